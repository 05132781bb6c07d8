"""Recording gameplay (``alaya record game``): scripted players play the game mode and every
frame goes into an episodes dataset (``alaya.data.recorder``) in one or more reference styles,
with the action rows, camera poses, intrinsics, depth maps and event counts.

Episode ``ep<seed>`` is world seed ``seed`` played by a player of the same seed, so a dataset
is reproducible frame for frame, and an interrupted recording resumes where it stopped
(episodes already listed are skipped; a half-recorded one was never listed)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from alaya.data.episodes import EpisodeDataset
from alaya.data.recorder import EpisodeRecorder
from alaya.engine.game import GameConfig, GameStream
from alaya.engine.players import PlayerConfig, ScriptedPlayer
from alaya.engine.styles import get_style

DEFAULT_STYLES = ("golden_sunset", "snowy_winter")


@dataclass
class GameplayConfig:
    episodes: int = 160
    frames: int = 300
    first_seed: int = 0
    styles: tuple[str, ...] = DEFAULT_STYLES
    depth: bool = True                 # store each frame's depth (float16 metres, 0 = sky)
    game: GameConfig = field(default_factory=GameConfig)
    player: PlayerConfig = field(default_factory=PlayerConfig)


def record_episode(game: GameStream, player: ScriptedPlayer, writer, frames: int,
                   styles: tuple[str, ...], depth: bool = True) -> None:
    """Play ``frames`` frames into an open episode writer; frame 0 is the start (no action).
    With ``depth`` each frame's depth map (the G-buffer's) is stored too."""
    for t in range(frames):
        action = np.zeros(8, np.float32)
        if t > 0:
            action = player.act(game)
            game.apply(action)
        frame = game.step()
        writer.add({s: game.render_style(s) for s in styles}, action,
                   world_to_camera=frame["world_to_camera"], K=game.K.astype(np.float32),
                   events=game.events if t > 0 else np.zeros_like(game.events),
                   depth=frame["depth"] if depth else None)


def record_gameplay(root: str | os.PathLike, config: GameplayConfig | None = None,
                    progress: bool = True) -> list[str]:
    """Record ``config.episodes`` episodes into ``root``; returns the ids recorded now."""
    c = config or GameplayConfig()
    styles = {s: list(get_style(s).phrasings) for s in c.styles}
    recorder = EpisodeRecorder(root, styles, fps=c.game.fps, source="alaya-game",
                               generator={"frames": c.frames, "game": repr(c.game), "player": repr(c.player)},
                               size=c.game.size)
    done = set(EpisodeDataset(root).ids())
    recorded = []
    for seed in tqdm(range(c.first_seed, c.first_seed + c.episodes), desc="recording", disable=not progress):
        eid = f"ep{seed:05d}"
        if eid in done:
            continue
        game = GameStream(seed, c.game)
        try:
            with recorder.begin(eid, seed=seed) as writer:
                record_episode(game, ScriptedPlayer(seed, c.player), writer, c.frames, c.styles, c.depth)
        finally:
            game.close()
        recorded.append(eid)
    return recorded
