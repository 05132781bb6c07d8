"""``alaya train effects``: fit ``ActionEffects`` (what each one-shot action draws over the view)
from recorded episodes, with no counterfactual frames.

Per pixel the model is ``y = (1 - alpha) x + colour``: a frame ``y`` seen n frames after a press
is the background ``x`` (what the view would show without the action) partly covered. The
recordings never show x and y of the same moment, but they show many frames of each kind, and
over them (background frames: no press of a fitted action within ``frames`` rows before)

    var(y) = (1 - alpha)^2 var(x)    and    mean(y) = (1 - alpha) mean(x) + colour,

so alpha = 1 - sqrt(var(y) / var(x)) and colour = mean(y) - (1 - alpha) mean(x), pixel by pixel
(the variances summed over the colour channels). This holds when presses come at moments like
any other, as in recordings of players pressing keys as they play; an effect whose own look
varies (the blade lit by each style's light) comes out a little more transparent than it is.
Statistics are pooled over ``smooth`` x ``smooth`` neighbourhoods, and a pixel keeps a layer only
where it differs from the background by more than ``z`` standard errors (in opacity or mean
colour): with ~400 frames per action and frame since the press, chance alone moves an opacity by
~0.035 and a mean colour by ~1/20 of the background's spread.

Where the episodes have camera poses and ``K``, each action is fitted twice: fixed on the screen,
and held for a level view (every frame shifted by ``focal * tan(pitch)`` rows before the
statistics, as ``ActionEffects`` shifts it back in play). The one whose layers are more opaque
in all is kept: an effect placed by the heading (the blade) is smeared over the pitches players
look at when fitted on the screen, and sharp when levelled; one that follows the view (the orb)
the other way round.

Jump is not fitted: what it does is the camera's (``alaya.models.camera_motion``).
"""

from __future__ import annotations

import math
import zipfile
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from alaya.data.actions import ACTION_COLUMNS
from alaya.data.episodes import EpisodeDataset
from alaya.data.geometry import view_pitch_degrees
from alaya.models.action_effects import ActionEffects, ActionEffectsConfig, shift_rows

EFFECT_ACTIONS = ("attack", "spell", "summon")      # one-shot actions that draw on the view


@dataclass
class EffectsFitConfig:
    data: str = ""
    split: str = "train"                 # "" or a split the data lacks: every episode
    frames: int = 8                      # frames from the press with a layer
    min_presses: int = 20                # an action pressed fewer times in the data gets no layer
    smooth: int = 3                      # statistics pooled over smooth x smooth pixels (odd)
    z: float = 4.0                       # standard errors a pixel must differ by to keep a layer
    progress: bool = True

    def __post_init__(self) -> None:
        if self.frames < 1 or self.min_presses < 1:
            raise ValueError(f"EffectsFitConfig: frames and min_presses must be >= 1, got "
                             f"{self.frames}, {self.min_presses}")
        if self.smooth < 1 or self.smooth % 2 == 0:
            raise ValueError(f"EffectsFitConfig.smooth must be an odd number >= 1, got {self.smooth}")
        if not self.z > 0:
            raise ValueError(f"EffectsFitConfig.z must be > 0, got {self.z}")


class _Moments:
    """Per-pixel count, sum and sum of squares of frames (3, S, S), float64."""

    def __init__(self, size: int) -> None:
        self.frames = 0
        self.n = torch.zeros(1, size, size, dtype=torch.float64)
        self.sum = torch.zeros(3, size, size, dtype=torch.float64)
        self.sq = torch.zeros(3, size, size, dtype=torch.float64)

    def add(self, frames: torch.Tensor, valid: torch.Tensor) -> None:
        """frames (N, 3, S, S) float64 in [0, 1]; valid (N, 1, S, S): where each shows the view."""
        self.frames += len(frames)
        self.n += valid.sum(0)
        self.sum += (frames * valid).sum(0)
        self.sq += (frames * frames * valid).sum(0)

    def pooled(self, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(mean, variance) per channel and the count per pixel, over k x k neighbourhoods as well
        as over frames."""
        n, total, sq = self.n, self.sum, self.sq
        if k > 1:
            n, total, sq = (F.avg_pool2d(v[None], k, 1, k // 2, count_include_pad=False)[0] for v in (n, total, sq))
        mean, sq = total / n.clamp_min(1e-9), sq / n.clamp_min(1e-9)
        return mean, (sq - mean * mean).clamp_min(0), n


def presses(actions: np.ndarray, columns: list[int]) -> np.ndarray:
    """(T,) index into ``columns`` of the fitted action pressed on each row, -1 for none (row 0,
    which is never played, included as none)."""
    hit = np.full(len(actions), -1)
    for j, col in enumerate(columns):
        hit[actions[:, col] != 0] = j
    hit[0] = -1
    return hit


def frames_since(hit: np.ndarray, n_actions: int, frames: int) -> np.ndarray:
    """(T,) per frame: -1 for a background frame (no fitted press within ``frames`` rows up to
    it), else the layer index action * frames + n of the latest press, n frames before."""
    out = np.full(len(hit), -1)
    last = None
    for t, j in enumerate(hit):
        if j >= 0:
            last = (j, t)
        if last is not None and t - last[1] < frames:
            out[t] = last[0] * frames + (t - last[1])
    return out


def _levelled(frames: torch.Tensor, rows: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Frames (N, 3, S, S) each moved up by its ``rows`` (to a level view) and where they show it."""
    valid = torch.ones(len(frames), 1, *frames.shape[2:], dtype=frames.dtype)
    return (torch.stack([shift_rows(f, -r) for f, r in zip(frames, rows)]),
            torch.stack([shift_rows(v, -r) for v, r in zip(valid, rows)]))


def _layers(background: _Moments, layers: list[_Moments], cfg: EffectsFitConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(alpha (L, 1, S, S), colour (L, 3, S, S)) by the moments of the module docstring."""
    mean_x, var_x, n_x = background.pooled(cfg.smooth)
    S = mean_x.shape[-1]
    alpha, colour = torch.zeros(len(layers), 1, S, S), torch.zeros(len(layers), 3, S, S)
    for k, m in enumerate(layers):
        if m.frames < 2:
            continue
        mean_y, var_y, n = m.pooled(cfg.smooth)
        n = n.clamp_min(1)
        a = (1 - (var_y.sum(0) / var_x.sum(0).clamp_min(1e-8)).sqrt()).clamp(0, 1)
        shift = ((mean_y - mean_x).abs() / (var_x / n).sqrt().clamp_min(1e-6)).amax(0)
        seen = (n[0] >= 0.9 * m.frames) & (n_x[0] >= 0.9 * background.frames)   # levelled: edges some frames miss
        keep = ((a / (1 / (2 * n[0])).sqrt() > cfg.z) | (shift > cfg.z)) & seen
        keep = F.avg_pool2d(keep.double()[None, None], 3, 1, 1, count_include_pad=False)[0, 0]   # soft edges
        alpha[k, 0] = (a * keep).float()
        colour[k] = ((mean_y - (1 - a) * mean_x) * keep).float()
    return alpha, colour


def _presses_and_poses(ds: EpisodeDataset, eid: str) -> tuple[np.ndarray, bool]:
    """An episode's action rows and whether it has poses, without reading its frames (the fit
    reads, and checks, them after); a file that does not open so is loaded, for its clear error."""
    try:
        with np.load(ds.path(eid), allow_pickle=False) as ep:
            if "actions" in ep.files:
                return np.asarray(ep["actions"]), "world_to_camera" in ep.files and "K" in ep.files
    except (OSError, ValueError, zipfile.BadZipFile):
        pass
    ep = ds.load(eid)
    return ep["actions"], "world_to_camera" in ep and "K" in ep


def fit_action_effects(cfg: EffectsFitConfig) -> tuple[ActionEffects, dict]:
    """The layers fitted from ``cfg.data`` and a report (presses per action, which are held for a
    level view, each layer's share of the view with an opacity above 0.1, and the frames used)."""
    ds = EpisodeDataset(cfg.data)
    ids = ds.ids(cfg.split) if cfg.split and ds.ids(cfg.split) else ds.ids()
    if not ids:
        raise ValueError(f"{cfg.data}: no episodes")
    counts = dict.fromkeys(EFFECT_ACTIONS, 0)
    posed = True
    for eid in ids:
        actions, has_poses = _presses_and_poses(ds, eid)
        posed &= has_poses
        for name in EFFECT_ACTIONS:
            counts[name] += int((actions[1:, ACTION_COLUMNS.index(name)] != 0).sum())
    fitted = tuple(a for a in EFFECT_ACTIONS if counts[a] >= cfg.min_presses)
    if not fitted:
        raise ValueError(f"{cfg.data}: no one-shot action of {', '.join(EFFECT_ACTIONS)} is pressed "
                         f"{cfg.min_presses} times or more (presses: {counts}); nothing to fit")
    columns = [ACTION_COLUMNS.index(a) for a in fitted]
    anchorings = ("screen", "level") if posed else ("screen",)
    size, focal, stats = None, 0.0, {}
    for eid in tqdm(ids, desc="fit effects", disable=not cfg.progress, dynamic_ncols=True, unit="episode"):
        ep = ds.load(eid)
        rgb = ep["rgb"]                                     # (styles, T, S, S, 3) uint8
        if rgb.shape[2] != rgb.shape[3]:
            raise ValueError(f"{eid}: 'rgb' frames must be square, got {rgb.shape[2]}x{rgb.shape[3]}")
        if size is None:
            size = rgb.shape[2]
            focal = float(ep["K"][1, 1]) * size / (2 * float(ep["K"][1, 2])) if posed else 0.0
            stats = {k: (_Moments(size), [_Moments(size) for _ in range(len(fitted) * cfg.frames)]) for k in anchorings}
        elif rgb.shape[2] != size:
            raise ValueError(f"{eid}: 'rgb' is {rgb.shape[2]}x{rgb.shape[2]}, earlier episodes {size}x{size}")
        since = frames_since(presses(ep["actions"], columns), len(fitted), cfg.frames)
        frames = torch.from_numpy(rgb).permute(0, 1, 4, 2, 3).double() / 255    # (styles, T, 3, S, S)
        rows = ([round(focal * math.tan(math.radians(float(p)))) for p in view_pitch_degrees(ep["world_to_camera"])]
                if posed else None)
        for kind in anchorings:
            for k in [-1, *np.unique(since[since >= 0]).tolist()]:
                pick = since == k
                x = frames[:, pick].flatten(0, 1)
                if kind == "level":
                    x, valid = _levelled(x, [r for r, p in zip(rows, pick) if p] * rgb.shape[0])
                else:
                    valid = torch.ones(len(x), 1, size, size, dtype=x.dtype)
                (stats[kind][0] if k < 0 else stats[kind][1][k]).add(x, valid)
    A, T = len(fitted), cfg.frames
    fits = {kind: [v.reshape(A, T, *v.shape[1:]) for v in _layers(*stats[kind], cfg)] for kind in anchorings}
    level = tuple(bool("level" in fits and float(fits["level"][0][i].sum()) > float(fits["screen"][0][i].sum()))
                  for i in range(A))
    alpha = torch.stack([fits["level" if level[i] else "screen"][0][i] for i in range(A)])
    colour = torch.stack([fits["level" if level[i] else "screen"][1][i] for i in range(A)])
    effects = ActionEffects(ActionEffectsConfig(actions=fitted, frames=T, size=size,
                                                pitch_anchored=level if posed else (), focal=focal))
    effects.set_layers(alpha, colour)
    background, layers = stats["screen"]
    report = {"presses": {a: counts[a] for a in EFFECT_ACTIONS}, "fitted": list(fitted),
              "pitch_anchored": [a for a, lv in zip(fitted, level) if lv],
              "opacity": {kind: {a: round(float(fits[kind][0][i].sum() / T / size ** 2), 5) for i, a in enumerate(fitted)}
                          for kind in anchorings},
              "background_frames": background.frames,
              "layer_frames": {a: [layers[i * T + n].frames for n in range(T)] for i, a in enumerate(fitted)},
              "covered": {a: [round(float((effects.alpha[i, n] > 0.1).float().mean()), 4) for n in range(T)]
                          for i, a in enumerate(fitted)}}
    return effects, report
