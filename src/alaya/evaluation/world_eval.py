"""``alaya eval world``: a world model (a game without an engine) on held-out gameplay episodes.

A session follows the world-session protocol (``alaya.runtime.world_session``)::

    session.reset(frame, prompt)      # uint8 (H, W, 3): start from a real frame, in a style
    frame = session.step(action)      # float32 (8,) action row -> the next uint8 (H, W, 3)
    session.size                      # H == W

``make_session`` is called once; every rollout starts with ``reset``, given the start frame's
recorded pitch and depth where the episode has them and the session's ``reset`` takes them (a
memory model then starts as play does; ``start_depth=False``: it predicts the depth); a replay
window's reset also gets the ``start_history`` action rows that led to its start frame (a jump or
walk under way at t0 goes on, as in the game; ``start_history=0``: from rest). Episodes
are resized to ``session.size``. For the first ``episodes`` episodes and each of their styles, ``windows``
start indices are drawn (seeded):

- **replay**: from real frame t0, the episode's true actions t0+1..t0+H; generated frame k is
  compared with real frame t0+k (``psnr_step{k}``, ``ssim_step{k}``); the copy-the-last-frame
  baseline compares real frame t0 with real frame t0+k (``baseline_psnr_step{k}``);
- **shuffled actions**: the same start frame with H action rows from a random other part of the
  held-out data (another episode when there are several); ``delta_psnr_actions`` is the mean
  PSNR over the horizon with true minus with shuffled actions (0 for a model that ignores them);
- **inverse dynamics**: the IDM's balanced accuracy (``alaya.evaluation.inverse_dynamics``) on
  (generated k-1, generated k) pairs (generated 0 = the real start) and on the real pairs, both
  against the true actions; ``idm_ratio`` = generated / real. The ratio is a mean over five
  heads, so it can pass while some keys show nothing (the navigation heads score as on real
  frames); ``idm_action_recall_ratio`` is, per one-shot action (jump, attack, ...), the IDM's
  recall of it on generated over real pairs, and ``idm_action_recall_ratio_min`` the least.

Then a **long rollout** of ``rollout_frames`` scripted player actions from one real frame
(brightness, sharpness and mean colour per frame; their drift from the first to the last
``rollout_window`` frames), and **out-and-back loops** (turn left N frames then right N frames;
forward N then backward N): PSNR of the return frame and of the turning-point frame against the
start. A consistent world comes back to where it started. And **standing still**: no action for
``still_frames`` frames from the loops' start frames; PSNR of frames 1, ``still_frames`` / 2 and
``still_frames`` against the start (``still_psnr_step{k}``) and the sharpness of the last frame
over the start's (``still_sharpness_ratio``). The recorded scenes barely move while nobody acts (a
thrown body may still roll), so a world that stays put scores high PSNR and a ratio near 1; one
that blurs, melts or grows grain while the player waits does not.
"""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
from tqdm import tqdm

from alaya.data.geometry import view_pitch_degrees
from alaya.evaluation.frame_stats import (colour_drift, frame_stats, late_early_ratio, psnr_frames,
                                          ssim_frames)
from alaya.evaluation.inverse_dynamics import InverseDynamics, checked_episode, load_episode, resize_frames
from alaya.evaluation.other_data import fit_actions
from alaya.evaluation.scripted_play import loop_actions, scripted_actions, still_actions
from alaya.evaluation.world_replay_metrics import idm_metrics, pick_samples, replay_metrics


class WorldSession(Protocol):
    size: int

    def reset(self, frame: np.ndarray, prompt: str) -> None: ...   # may also take pitch= (degrees):
                                                                     # then it gets the start frame's

    def step(self, action: np.ndarray) -> np.ndarray: ...


@dataclass
class WorldEvalConfig:
    horizon: int = 16
    episodes: int = 8                 # first n held-out episodes
    windows: int = 4                  # start indices per episode and style
    styles: tuple[str, ...] | None = None   # None: every style of the episodes
    split: str = "test"               # when ``episodes`` is a dataset
    rollout_frames: int = 3000
    rollout_window: int = 300         # first / last frames compared in the long rollout
    loop_frames: int = 16             # N: out for N frames, back for N
    loops: int = 4                    # start frames per loop kind (and for standing still)
    still_frames: int = 60            # standing still: frames with no action
    samples: int = 3                  # episodes in the contact sheet
    gif_frames: int = 200
    seed: int = 0
    # every rollout's start frame goes to sessions whose reset takes ``depth`` with its recorded
    # depth where the episodes have one (as play and the live evaluation start); False: predicted
    start_depth: bool = True
    # replay windows start with up to this many recorded action rows before their start frame, for
    # sessions whose reset takes ``history`` (a jump or walk under way goes on, as in the game); 0: from rest
    start_history: int = 16
    # the data's action columns and their ranges (other_data.data_action_ranges); None: every
    # column in full. Scripted inputs are fitted to them; a loop needing a value outside is skipped
    action_ranges: dict[str, tuple[float, float]] | None = None

    def __post_init__(self):
        for name in ("horizon", "episodes", "windows", "rollout_frames", "rollout_window", "loop_frames", "loops",
                     "still_frames"):
            if getattr(self, name) < 1:
                raise ValueError(f"WorldEvalConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.start_history < 0:
            raise ValueError(f"WorldEvalConfig.start_history must be >= 0, got {self.start_history}")


# --- driving a session ------------------------------------------------------------------------

def session_size(session) -> int:
    size = getattr(session, "size", None)
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"session.size must be a positive int (H == W), got {size!r}")
    return int(size)


class _Driver:
    """Runs a session over action rows, checks every frame it returns, times ``step``."""

    def __init__(self, session, size: int):
        self.session, self.size = session, size
        self.seconds, self.steps = 0.0, 0

    def stream(self, frame: np.ndarray, prompt: str, actions: np.ndarray, pitch: float | None = None,
               depth: np.ndarray | None = None, history: np.ndarray | None = None, view: np.ndarray | None = None):
        """``pitch``: the recorded camera pitch of ``frame``, ``depth`` its recorded depth,
        ``history`` the action rows that led to it, ``view`` its recorded world_to_camera (which
        keeps a session with a walkable region inside it), each for sessions whose reset takes it."""
        takes = inspect.signature(self.session.reset).parameters
        extra = {k: v for k, v in (("pitch", pitch), ("depth", depth), ("history", history), ("view", view))
                 if v is not None and k in takes}
        self.session.reset(frame, prompt, **extra)
        for k, row in enumerate(actions):
            t0 = time.perf_counter()
            out = self.session.step(np.ascontiguousarray(row, dtype=np.float32))
            self.seconds += time.perf_counter() - t0
            self.steps += 1
            yield self.check(out, k + 1)

    def rollout(self, frame: np.ndarray, prompt: str, actions: np.ndarray, pitch: float | None = None,
                depth: np.ndarray | None = None, history: np.ndarray | None = None,
                view: np.ndarray | None = None) -> np.ndarray:
        """uint8 (len(actions), H, W, 3): the frames after each action row."""
        return np.stack(list(self.stream(frame, prompt, actions, pitch, depth, history, view)))

    def check(self, out, step: int) -> np.ndarray:
        shape = (self.size, self.size, 3)
        if not isinstance(out, np.ndarray) or out.dtype != np.uint8 or out.shape != shape:
            got = f"{out.dtype} {out.shape}" if isinstance(out, np.ndarray) else type(out).__name__
            raise ValueError(f"session.step returned {got} at step {step}; expected a uint8 numpy array "
                             f"of shape {shape} (session.size = {self.size})")
        return out


def start_pitch(ep: dict, t: int) -> float | None:
    """The recorded camera pitch (degrees) of frame ``t``, None without ``world_to_camera``."""
    return float(view_pitch_degrees(ep["world_to_camera"][t])) if "world_to_camera" in ep else None


def start_view(ep: dict, t: int) -> np.ndarray | None:
    """The recorded world_to_camera (4, 4) of frame ``t``, None without ``world_to_camera``."""
    return np.asarray(ep["world_to_camera"][t], dtype=np.float64) if "world_to_camera" in ep else None


def start_depth(ep: dict, t: int, use: bool = True) -> np.ndarray | None:
    """The recorded depth of frame ``t`` as float32 (S, S) metres at the episode's (resized) frame
    size S (nearest sample), None without ``depth`` or when not ``use``d."""
    if not use or "depth" not in ep:
        return None
    d = np.asarray(ep["depth"][t], dtype=np.float32)
    S = ep["rgb"].shape[2]
    if d.shape != (S, S):
        rows, cols = (np.arange(S) * n // S for n in d.shape)
        d = d[rows][:, cols]
    return d


# --- the evaluation ---------------------------------------------------------------------------

def load_episodes(episodes, n: int, split: str, size: int) -> list[tuple[str, dict]]:
    """(name, checked episode resized to ``size``) for the first ``n`` of: npz paths, episode
    dicts, or a dataset with ``ids(split)`` / ``load(id)``."""
    if isinstance(episodes, (str, os.PathLike)):
        raise ValueError(f"episodes: expected a list of npz paths or episode dicts, or a dataset; got "
                         f"the single path {str(episodes)!r}")
    if hasattr(episodes, "ids") and hasattr(episodes, "load"):
        items = [(str(i), lambda i=i: episodes.load(i)) for i in episodes.ids(split)[:n]]
    else:
        items = [(f"episode {j}", lambda e=e: e) if isinstance(e, Mapping) else
                 (Path(e).stem, lambda e=e: load_episode(e)) for j, e in enumerate(list(episodes)[:n])]
    if not items:
        raise ValueError(f"episodes: none to evaluate (split '{split}')" if hasattr(episodes, "ids")
                         else "episodes: empty")
    out = []
    for name, load in items:
        ep = checked_episode(load(), name)
        out.append((name, {**ep, "rgb": resize_frames(ep["rgb"], size)}))
    return out


def _prompt(style: str, index: int, prompts: Mapping[str, Sequence[str]] | None) -> str:
    if prompts is None:
        return style
    if not prompts.get(style):
        raise ValueError(f"prompts: no prompt for style {style!r} (have {sorted(prompts)})")
    return prompts[style][index % len(prompts[style])]


def _windows(eps: list[tuple[str, dict]], cfg: WorldEvalConfig, rng: np.random.Generator):
    """(episode, style index, t0, shuffled action rows (H, 8)) per replay window."""
    H = cfg.horizon
    for name, ep in eps:
        T = ep["rgb"].shape[1]
        if T < H + 1:
            raise ValueError(f"{name}: 'rgb' has {T} frames; WorldEvalConfig.horizon = {H} needs >= {H + 1}")
    out = []
    for i, (name, ep) in enumerate(eps):
        styles = [s for s in range(len(ep["styles"])) if cfg.styles is None or ep["styles"][s] in cfg.styles]
        for s in styles:
            for _ in range(cfg.windows):
                t0 = int(rng.integers(0, ep["rgb"].shape[1] - H))
                out.append((i, s, t0, _shuffled(eps, i, t0, H, rng)))
    if not out:
        raise ValueError(f"WorldEvalConfig.styles {cfg.styles} matches no style of the episodes")
    return out


def _shuffled(eps, i: int, t0: int, H: int, rng: np.random.Generator) -> np.ndarray:
    """H action rows from another episode, or from a part of episode ``i`` away from t0."""
    if len(eps) > 1:
        j = int(rng.choice([j for j in range(len(eps)) if j != i]))
        t1 = int(rng.integers(0, eps[j][1]["rgb"].shape[1] - H))
    else:
        j, n = i, eps[i][1]["rgb"].shape[1] - H
        far = [t for t in range(n) if abs(t - t0) >= H] or [t for t in range(n) if t != t0]
        if not far:
            raise ValueError(f"{eps[i][0]}: too short to shuffle actions with one episode "
                             f"(needs > {H + 1} frames, or a second episode)")
        t1 = int(rng.choice(far))
    return eps[j][1]["actions"][t1 + 1:t1 + 1 + H]


def evaluate_world(make_session: Callable[[], WorldSession], episodes, idm: InverseDynamics | None = None,
                   config: WorldEvalConfig | None = None, prompts: Mapping[str, Sequence[str]] | None = None,
                   progress: bool = True) -> dict:
    """Every metric of the module docstring: flat keys overall, ``per_style``, ``rows`` (one per
    replay window), and frames for the report (``samples``, ``loop_samples``, ``rollout_head``,
    ``rollout_series``; ``public_json`` drops the frames). ``prompts``: {style: [prompts]} (the
    dataset's), episode i uses prompt i mod n; default: the style name. ``idm`` None skips the
    IDM metrics."""
    cfg = config or WorldEvalConfig()
    session = make_session()
    size = session_size(session)
    drive = _Driver(session, size)
    eps = load_episodes(episodes, cfg.episodes, cfg.split, size)
    rng = np.random.default_rng(cfg.seed)
    windows = _windows(eps, cfg, rng)
    H, n_loop = cfg.horizon, 2 * cfg.loop_frames
    bar = tqdm(total=len(windows) * 2 * H + cfg.rollout_frames + cfg.loops * (2 * n_loop + cfg.still_frames),
               desc="eval world",
               disable=not progress, dynamic_ncols=True, unit="frame")
    rows, pairs = [], []
    for i, s, t0, shuffled in windows:
        name, ep = eps[i]
        real, actions = ep["rgb"][s, t0:t0 + H + 1], ep["actions"][t0 + 1:t0 + H + 1]
        prompt = _prompt(str(ep["styles"][s]), i, prompts)
        pitch, depth = start_pitch(ep, t0), start_depth(ep, t0, cfg.start_depth)
        history = ep["actions"][max(1, t0 - cfg.start_history + 1):t0 + 1] if cfg.start_history and t0 > 0 else None
        view = start_view(ep, t0)
        gen = drive.rollout(real[0], prompt, actions, pitch, depth, history, view)
        gen_shuffled = drive.rollout(real[0], prompt, shuffled, pitch, depth, history, view)
        bar.update(2 * H)
        rows.append({"episode": name, "style": str(ep["styles"][s]), "t0": t0,
                     "psnr": psnr_frames(gen, real[1:]), "ssim": ssim_frames(gen, real[1:]),
                     "baseline_psnr": psnr_frames(np.repeat(real[:1], H, 0), real[1:]),
                     "psnr_shuffled": psnr_frames(gen_shuffled, real[1:])})
        pairs.append((real, np.concatenate([real[:1], gen]), actions))
    result = replay_metrics(rows, H)
    by_style: dict[str, list[int]] = {}
    for j, r in enumerate(rows):
        by_style.setdefault(r["style"], []).append(j)
    result["per_style"] = {st: replay_metrics([rows[j] for j in js], H, summary=True) for st, js in by_style.items()}
    if idm is not None:
        result.update(idm_metrics(idm, pairs))
        for st, js in by_style.items():
            result["per_style"][st].update(idm_metrics(idm, [pairs[j] for j in js], detail=False))
    result.update(_long_rollout(drive, eps, cfg, prompts, bar))
    result.update(_loops(drive, eps, cfg, prompts, rng, bar))
    bar.close()
    result["s_per_frame"] = drive.seconds / max(drive.steps, 1)
    result["config"] = asdict(cfg)
    result["episodes"] = [name for name, _ in eps]
    result["rows"] = [{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in r.items()} for r in rows]
    result["samples"] = pick_samples(rows, pairs, cfg.samples)
    return result


def _long_rollout(drive: _Driver, eps, cfg: WorldEvalConfig, prompts, bar) -> dict:
    """Scripted actions from episode 0's first frame (first style); per-frame statistics."""
    name, ep = eps[0]
    actions, changed = fit_actions(scripted_actions(cfg.rollout_frames, cfg.seed), cfg.action_ranges)
    stats, head, chunk = [], [], []
    for frame in drive.stream(ep["rgb"][0, 0], _prompt(str(ep["styles"][0]), 0, prompts), actions, start_pitch(ep, 0),
                              start_depth(ep, 0, cfg.start_depth), view=start_view(ep, 0)):
        if len(head) < cfg.gif_frames:
            head.append(frame)
        chunk.append(frame)
        if len(chunk) == 100:
            stats.append(frame_stats(np.stack(chunk)))
            bar.update(len(chunk))
            chunk = []
    if chunk:
        stats.append(frame_stats(np.stack(chunk)))
        bar.update(len(chunk))
    series = {k: np.concatenate([s[k] for s in stats]) for k in stats[0]}
    w = min(cfg.rollout_window, max(1, cfg.rollout_frames // 2))
    return {"late_early_sharpness_ratio": late_early_ratio(series["sharpness"], w),
            "late_early_brightness_ratio": late_early_ratio(series["brightness"], w),
            "colour_drift": colour_drift(series["colour"], w), "rollout_window_used": w,
            "rollout_columns_fitted": changed,
            "rollout_head": np.stack(head),
            "rollout_series": {k: v.tolist() for k, v in series.items()}}


def _loops(drive: _Driver, eps, cfg: WorldEvalConfig, prompts, rng: np.random.Generator, bar) -> dict:
    """Out-and-back loops from ``loops`` real frames: PSNR vs the start at the turning point and
    at the return, per kind (``turn``, ``move``)."""
    out, samples, skipped = {}, {}, {}
    starts = _loop_starts(eps, cfg, prompts, rng)
    for kind in ("turn", "move"):
        actions = loop_actions(cfg.loop_frames, kind)
        changed = fit_actions(actions, cfg.action_ranges)[1]
        if changed:                      # the data never goes that way: no honest loop to play
            skipped[f"loop_{kind}"] = f"needs {', '.join(changed)} of -1 and +1, outside the data's range"
            continue
        turn, back = [], []
        for j, (frame, prompt, pitch, depth, view) in enumerate(starts):
            gen = drive.rollout(frame, prompt, actions, pitch, depth, view=view)
            bar.update(len(actions))
            turn.append(psnr_frames(gen[cfg.loop_frames - 1:cfg.loop_frames], frame[None])[0])
            back.append(psnr_frames(gen[-1:], frame[None])[0])
            if j == 0:
                samples[kind] = {"start": frame, "turning_point": gen[cfg.loop_frames - 1], "return": gen[-1]}
        out[f"loop_{kind}_psnr_turn"] = float(np.mean(turn))
        out[f"loop_{kind}_psnr_return"] = float(np.mean(back))
    out["loop_samples"] = samples
    out["skipped"] = skipped
    out.update(_stand_still(drive, starts, cfg, bar))
    return out


def _loop_starts(eps, cfg: WorldEvalConfig, prompts, rng: np.random.Generator) -> list[tuple]:
    """(frame, prompt, pitch, depth, view) of ``cfg.loops`` random real frames, episodes in turn."""
    starts = []
    for j in range(cfg.loops):
        i = j % len(eps)
        name, ep = eps[i]
        s, t = int(rng.integers(len(ep["styles"]))), int(rng.integers(ep["rgb"].shape[1]))
        starts.append((ep["rgb"][s, t], _prompt(str(ep["styles"][s]), i, prompts), start_pitch(ep, t),
                       start_depth(ep, t, cfg.start_depth), start_view(ep, t)))
    return starts


def _stand_still(drive: _Driver, starts: list[tuple], cfg: WorldEvalConfig, bar) -> dict:
    """No action for ``cfg.still_frames`` frames from each start: PSNR against the start at
    frames 1, n/2 and n, and the last frames' mean sharpness over the starts'."""
    n = cfg.still_frames
    steps = sorted({1, max(1, n // 2), n})
    psnr, sharp = {k: [] for k in steps}, []
    for frame, prompt, pitch, depth, view in starts:
        gen = drive.rollout(frame, prompt, still_actions(n), pitch, depth, view=view)
        bar.update(n)
        for k in steps:
            psnr[k].append(psnr_frames(gen[k - 1:k], frame[None])[0])
        sharp.append(frame_stats(np.stack([frame, gen[-1]]))["sharpness"])
    out = {f"still_psnr_step{k}": float(np.mean(v)) for k, v in psnr.items()}
    out["still_sharpness_ratio"] = late_early_ratio(np.array(sharp).T.reshape(-1), len(sharp))
    return out


FRAME_KEYS = ("samples", "loop_samples", "rollout_head", "rollout_series")


def public_json(result: dict) -> dict:
    """The result without frames and per-frame series (what ``--json`` prints)."""
    return {k: v for k, v in result.items() if k not in FRAME_KEYS}


def load_idm(folder: str | os.PathLike | None) -> InverseDynamics | None:
    """The IDM of ``folder``, or None (skip the IDM metrics) when ``folder`` is None."""
    return None if folder is None else InverseDynamics.from_pretrained(folder)
