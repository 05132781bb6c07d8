"""The ground truth of the live evaluation: the real game (``alaya.engine.game``) playing the same
action rows from the same start, rendered at the world model's size in the scene's style, and
the test scenes it starts from.

A test scene is a start frame shipped beside the weights (``<weights>/starts/NN_<episode>_<style>.png``,
what ``alaya play --world`` starts from; ``alaya.data.start_frames.write_start_frames`` names them):
frame 0 of a recorded test episode, whose world seed is the episode's (``episodes.json``, or
the recorder's ``ep<seed>`` name). The game's own frame 0 of that seed and style is checked
against the shipped one (``Scene.start_psnr``, 100 when identical); at another size than the
shipped frames' the game's frame 0 is the start.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
from PIL import Image

from alaya.evaluation.frame_stats import psnr_frames
from alaya.evaluation.world_live import Scene

EPISODE_SEED = re.compile(r"^ep(\d+)$")


def play_in_game(seed: int, style: str, actions: np.ndarray, size: int, progress: bool = False,
                 cameras: bool = False):
    """uint8 (T + 1, size, size, 3): the game of world ``seed`` in ``style``, frame 0 (the start,
    as ``record_episode`` records it) and one frame per action row after it; with ``cameras``,
    (those frames, float64 (T + 1, 4, 4) the camera's world_to_camera at each)."""
    from tqdm import tqdm

    from alaya.engine.game import GameConfig, GameStream
    game = GameStream(seed, GameConfig(size=size))
    try:
        game.step()
        views = [game.world_to_camera.copy()]
        frames = [game.render_style(style)]
        for row in tqdm(actions, desc=f"game {seed} {style}", disable=not progress, unit="frame", leave=False):
            game.apply(row)
            game.step()
            views.append(game.world_to_camera.copy())
            frames.append(game.render_style(style))
    finally:
        game.close()
    return (np.stack(frames), np.stack(views).astype(np.float64)) if cameras else np.stack(frames)


def game_start(seed: int, style: str, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(uint8 (size, size, 3), float32 (size, size) metres, 0 on the sky, float64 (4, 4)): the
    game's frame 0 of world ``seed`` in ``style``, its depth and its camera (world_to_camera), as
    ``record_episode`` records them."""
    from alaya.engine.game import GameConfig, GameStream
    game = GameStream(seed, GameConfig(size=size))
    try:
        frame = game.step()
        return (game.render_style(style), np.asarray(frame["depth"], np.float32),
                game.world_to_camera.astype(np.float64))
    finally:
        game.close()


def game_player(size: int, progress: bool = False):
    """``play_real(scene, actions)`` for ``evaluate_live``: (the game's frames after the start,
    its cameras from the start on)."""
    def play(scene, actions):
        frames, views = play_in_game(scene.seed, scene.style, actions, size, progress, cameras=True)
        return frames[1:], views
    return play


def _split_name(stem: str) -> tuple[str, str]:
    """(episode, style) of a start frame's stem ``NN_<episode>_<style>``, the style being one
    of the engine's style names."""
    from alaya.engine.styles import STYLE_NAMES
    for style in sorted(STYLE_NAMES, key=len, reverse=True):
        if stem.endswith("_" + style):
            head = stem[:-len(style) - 1]
            number, _, episode = head.partition("_")
            if number.isdigit() and episode:
                return episode, style
    raise ValueError(f"start frame {stem}.png: expected NN_<episode>_<style>.png with one of the game's styles")


def start_scenes(weights: str | os.PathLike[str], size: int, data: str | os.PathLike[str] | None = None,
                 count: int | None = None, start_depth: bool = True) -> list[Scene]:
    """The scenes of the start frames shipped with ``weights`` (sorted by name, the first
    ``count``), each with its world seed (from ``data``'s ``episodes.json`` when it lists the
    episode, else from the ``ep<seed>`` id), its style's first phrasing as the prompt, and the
    start frame: the shipped one at ``size``, else the game's frame 0, with its depth (the
    shipped ``.depth.npy`` beside the shipped frame, else the game's; ``start_depth=False``: none,
    the session predicts it), and its camera (the shipped ``.view.npy``, else the game's)."""
    from alaya.data.start_frames import read_start_depth, read_start_view
    from alaya.engine.styles import get_style
    paths = sorted((Path(weights) / "starts").glob("*.png"))
    if not paths:
        raise FileNotFoundError(f"{Path(weights) / 'starts'}: no start frames (*.png)")
    listed = {}
    if data is not None:
        from alaya.data.episodes import EpisodeDataset
        listed = {e: info["seed"] for e, info in EpisodeDataset(data).meta.episodes.items()}
    scenes = []
    for p in paths[:count]:
        episode, style = _split_name(p.stem)
        seed = listed.get(episode)
        if seed is None:
            m = EPISODE_SEED.match(episode)
            if not m:
                raise ValueError(f"{p}: cannot tell the game's world seed of episode {episode!r} "
                                 f"(not ep<seed>; pass --data with its episodes.json)")
            seed = int(m.group(1))
        game_frame, game_depth, game_view = game_start(seed, style, size)
        shipped = np.array(Image.open(p).convert("RGB"))
        start, start_psnr, depth, view = game_frame, None, game_depth, game_view
        if shipped.shape == game_frame.shape:
            start, start_psnr = shipped, float(psnr_frames(shipped[None], game_frame[None])[0])
            shipped_depth = read_start_depth(p, size)
            if shipped_depth is not None:
                depth = shipped_depth
            view = read_start_view(p)
        scenes.append(Scene(f"{episode}_{style}", seed, style, get_style(style).phrasings[0], start, start_psnr,
                            depth if start_depth else None, view))
    return scenes


