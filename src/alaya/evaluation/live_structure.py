"""Whether a live script's frames are of the game's kind, judged against the game itself
(``alaya eval world --live``; docs/world.md, "Live evaluation").

A window's sharpness ratio is passed by detail in the wrong form (streaks, a patchwork of
blocks), and one scene's structure distance (``patch_distance``) swings with what is in view.
Pooled over a whole script and several scenes, the patch distribution is steadier, and the game
gives its own reference: split the scenes into two halves; each half's generated frames are
compared with its own real frames, and each half's real frames with the other half's, the game
played in other worlds of its style. Each frame is first standardized (its mean colour taken
out, divided by its standard deviation), so a world's palette and contrast do not count, only
the form of its detail.

``game_likeness(gen, real)``: ``structure_pooled`` (generated against real, the mean over the
splits), ``structure_other_worlds`` (one half's real frames against the other's, the mean over
the same splits) and ``structure_game_ratio``, the first over the second. A generator that draws
plausible worlds of the game's kind, knowing nothing past its start, scores about 1 in
expectation; one that also keeps what its start showed scores below 1; a patchwork, streaks or
a blur score above (docs/world.md gives the game's own frames so treated). With fewer than two
scenes there is no other world: None.
"""

from __future__ import annotations

from itertools import combinations, islice

import numpy as np
import torch

from alaya.evaluation import metrics as M
from alaya.evaluation.patch_distance import structure_distance

STRIDE = 12          # every twelfth frame of a scene's script is kept (150 of a minute)
SAMPLES = 4800       # patches per pyramid level and set, whatever the frame count
SPLITS = 10          # at most this many ways of halving the scenes (all of them for 6 scenes)


def thin(frames: np.ndarray, stride: int = STRIDE) -> np.ndarray:
    """The frames (uint8 (T, S, S, 3)) a scene keeps for ``game_likeness``."""
    return np.ascontiguousarray(frames[::stride])


def standardized(frames: np.ndarray) -> torch.Tensor:
    """uint8 (T, S, S, 3) frames as (T, 3, S, S), each with its mean colour taken out and divided
    by its standard deviation (a flat frame stays flat)."""
    x = M.frames_to_tensor(frames)
    x = x - x.mean((2, 3), keepdim=True)
    return x / x.std((1, 2, 3), keepdim=True).clamp(min=1e-3)


def halvings(n: int, limit: int = SPLITS) -> list[tuple[list[int], list[int]]]:
    """Up to ``limit`` ways to split scenes 0..n-1 in two halves (scene 0 always in the first,
    so no split is counted twice), in a fixed order."""
    rest = range(1, n)
    firsts = islice(combinations(rest, n // 2 - 1), limit)
    return [([0, *a], [i for i in rest if i not in a]) for a in firsts]


def _distance(gen: torch.Tensor, real: torch.Tensor, samples: int) -> float:
    return structure_distance(gen, real, per_frame=-(-samples // min(len(gen), len(real))))


def game_likeness(gen: list[np.ndarray], real: list[np.ndarray], samples: int = SAMPLES) -> dict:
    """``gen[i]`` and ``real[i]``: scene i's kept frames (uint8 (T_i, S, S, 3)), generated and
    the game's; the module docstring's three numbers (None each with fewer than two scenes),
    each distance drawn from ``samples`` patches per pyramid level and set."""
    if len(gen) != len(real):
        raise ValueError(f"gen and real: one frame set per scene each, got {len(gen)} and {len(real)}")
    if len(gen) < 2:
        return {"structure_pooled": None, "structure_other_worlds": None, "structure_game_ratio": None}
    gen_x, real_x = [standardized(f) for f in gen], [standardized(f) for f in real]
    pooled, other = [], []
    for a, b in halvings(len(gen)):
        ga, gb, ra, rb = (torch.cat([sets[i] for i in half]) for sets in (gen_x, real_x) for half in (a, b))
        pooled.append((_distance(ga, ra, samples) + _distance(gb, rb, samples)) / 2)
        other.append((_distance(rb, ra, samples) + _distance(ra, rb, samples)) / 2)
    pooled, other = float(np.mean(pooled)), float(np.mean(other))
    return {"structure_pooled": pooled, "structure_other_worlds": other,
            "structure_game_ratio": pooled / max(other, 1e-9)}
