"""The engine shots the scene-memory tests share (imported as ``memory_shots``): a held-still game,
its frame and depth from any camera, a camera moved or turned, PSNR over a mask."""

import math

import numpy as np
import torch

from alaya.engine.game import GameConfig, GameStream
from alaya.engine.styles import get_style

SIZE = 64


def held_game(seed: int = 5, size: int = SIZE):
    """A fixture body: the game of world ``seed`` after its warm-up, closed afterwards."""
    g = GameStream(seed, GameConfig(size=size, warmup_frames=30))
    g.step()
    yield g
    g.close()


def shot(game, view: np.ndarray) -> tuple[torch.Tensor, np.ndarray]:
    """The engine's frame from ``view`` with the world held still: rgb (3, H, W) in [0, 1], depth."""
    depth = game.raster.render(game.world.geom_matrices(), view.astype(np.float32))["depth"]
    rgb = game.reference.render(get_style("clear_noon"), view.astype(np.float32))
    return torch.from_numpy(rgb).permute(2, 0, 1).float() / 255, depth


def moved(view: np.ndarray, right: float = 0.0, turn_degrees: float = 0.0) -> np.ndarray:
    """``view`` with the camera moved ``right`` metres along its x axis, then turned left about its y axis."""
    shift = np.eye(4)
    shift[0, 3] = -right
    a = math.radians(turn_degrees)
    turn = np.eye(4)
    turn[[0, 0, 2, 2], [0, 2, 0, 2]] = [math.cos(a), -math.sin(a), math.sin(a), math.cos(a)]
    return turn @ shift @ view.astype(np.float64)


def psnr(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> float:
    m = mask.bool().expand_as(a)
    mse = float(((a - b)[m] ** 2).mean())
    return 100.0 if mse == 0 else 10 * math.log10(1 / mse)
