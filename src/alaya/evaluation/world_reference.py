"""The game's own long-rollout statistics: what a perfect world model would score.

The long rollout of ``alaya eval world`` measures a model against itself: sharpness, brightness
and mean colour of its last frames against its first. The real game's picture changes too as the
player walks from open floor to a wall, or into the shade, so these ratios are only meaningful
next to the game's own. For episodes recorded from our game (``alaya record game``: an episode's
seed is its world and its player), ``game_long_rollout`` plays the same actions in the game from
the same start frame and returns the same statistics (``game_*`` keys), plus how closely the
game's start frame matches the recorded one (``game_start_psnr``: 100 when identical).
"""

from __future__ import annotations

import numpy as np
from tqdm import tqdm

from alaya.evaluation.frame_stats import colour_drift, frame_stats, late_early_ratio, psnr_frames


def game_long_rollout(seed: int, style: str, actions: np.ndarray, size: int, window: int,
                      start: np.ndarray | None = None, progress: bool = False) -> dict:
    """Play ``actions`` (T, 8) in the game of world ``seed`` from its start frame (rendered in
    ``style`` at ``size``², as ``record_episode`` records frame 0); the long-rollout statistics
    of the T frames after the start, with ``window`` first / last frames."""
    from alaya.engine.game import GameConfig, GameStream
    if len(actions) < 2 * window:
        raise ValueError(f"actions: {len(actions)} rows, need at least 2 x window = {2 * window}")
    game = GameStream(seed, GameConfig(size=size))
    stats = []
    try:
        game.step()
        first = game.render_style(style)
        chunk = []
        for row in tqdm(actions, desc="game reference", disable=not progress, unit="frame"):
            game.apply(row)
            game.step()
            chunk.append(game.render_style(style))
            if len(chunk) == 100:
                stats.append(frame_stats(np.stack(chunk)))
                chunk = []
        if chunk:
            stats.append(frame_stats(np.stack(chunk)))
    finally:
        game.close()
    series = {k: np.concatenate([s[k] for s in stats]) for k in stats[0]}
    out = {"game_late_early_sharpness_ratio": late_early_ratio(series["sharpness"], window),
           "game_late_early_brightness_ratio": late_early_ratio(series["brightness"], window),
           "game_colour_drift": colour_drift(series["colour"], window)}
    if start is not None:
        out["game_start_psnr"] = float(psnr_frames(first[None], np.asarray(start)[None])[0])
    return out
