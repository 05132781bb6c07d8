"""The live evaluation of a world model (``alaya eval world --live``; docs/world.md, "Live
evaluation"): a session played frame by frame from a test scene's start frame with the scripts of
``live_scripts``, as ``alaya play --world`` plays it, beside the real game playing the same rows
from the same start, compared frame by frame.

It sees a session (``reset(frame)``, ``step(row)`` -> uint8 (S, S, 3)) made per scene by
``make_session(scene)``, and the real game only as ``play_real(scene, actions)`` -> uint8
(T, S, S, 3), the frames after the start, or (those frames, the game's world_to_camera (T + 1,
4, 4) from the start on) (``alaya.evaluation.live_reference`` plays our game, with its cameras).

Metrics, per script (pooled over the scenes) and overall (docs/world.md defines each):
``sharpness_windows`` (Laplacian variance of the generated frames over the real frames', per
window of ``window`` frames), their minimum and maximum, and ``sharpness_in_band`` (every window
within ``SHARPNESS_BAND``: a minimum alone passed frames holding five times the game's high
frequencies in the wrong place); ``orientation_windows`` / ``orientation_max`` (how
differently the generated frames' edges run from the real ones', 0 to 1: horizontal streaks and
a patchwork of squares score high at any sharpness); ``structure_windows`` / ``structure_max``
(``patch_distance``: how far the generated frames' band-pass patches lie from the real ones' in
distribution; a blur and streaks both score high, new content of the game's kind low, whether or
not it is the game's exact content); ``structure_game_ratio`` (``live_structure``: the script's
frames pooled over the scenes, palette and contrast taken out, against the real ones, over the
same distance between the game's own worlds: about 1 for worlds of the game's kind, above for a
patchwork, streaks or a blur), with ``structure_pooled`` and ``structure_other_worlds``;
``colour_drift`` (the generated mean colour's change from the first window to the last, minus
the real one's, per scene, averaged; in free
play it also counts content the model cannot know: the game's own change, ``game_colour_change``,
is what a world that keeps its start colours exactly scores), ``colour_drift_pooled`` (the same
change averaged over the scenes first: a drift every scene shares, such as a world turning
brown, and not which colour the unseen part of one world happens to have); standing still:
``still_psnr_min`` / ``_mean`` (every still frame against the frame where the player stopped;
``still_psnr_static_*`` over the pixels the game itself leaves unchanged) and
``still_hf_ratio_max`` (high-frequency energy, generated over real); walking back:
``return_psnr`` (the frame on return against the real game's); where the session has a
``camera_view()`` and ``play_real`` returns the game's cameras: ``camera_position_windows`` /
``_max`` / ``_last`` (metres between the session's camera and the game's, ``live_camera``),
``camera_rotation_max`` (degrees) and ``camera_apart_frame`` (the first frame a scene's cameras
are ``CAMERA_APART`` apart: from there on the frames compared are of different places);
per-frame PSNR against the real frames; the session's frames per second; and ``actions`` / ``action_ratio_min`` /
``action_placement_min``: how strongly each one-shot action changes the frames, generated over
the game's, and whether the change lies where the game's does (``live_actions``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from alaya.data.actions import ACTION_COLUMNS
from alaya.evaluation import metrics as M
from alaya.evaluation.live_actions import play_actions
from alaya.evaluation.frame_stats import hf_energy, orientation_distance, orientation_histogram
from alaya.evaluation.live_camera import camera_errors
from alaya.evaluation.live_scripts import MINUTE, SCRIPTS, LiveScript, live_scripts
from alaya.evaluation.live_structure import game_likeness, thin
from alaya.evaluation.patch_distance import structure_distance

WINDOW = 300          # frames of a sharpness window (10 s)
SHARPNESS_BAND = (0.6, 1.5)   # a window's ratio outside it: blur below, grain or patchwork above
CAMERA_APART = 1.0   # metres between the session's camera and the game's: from here on, frames of different places
                              # (1.5: the standing-still line's bound on high-frequency energy)
CHUNK = 300           # frames turned into float tensors at once
STRUCTURE_STRIDE = 3  # the structure distance looks at every third frame of a window ...
STRUCTURE_SAMPLES = 2400   # ... and this many patches per pyramid level (24 a frame in 300; ~1 s a window at 128²)


@dataclass
class Scene:
    """A test scene: the game's world ``seed`` seen in ``style`` (prompted with ``prompt``) from
    ``start`` (uint8 (S, S, 3), frame 0 of the session and of the game). ``start_psnr``: the
    shipped start frame against the game's own (100: identical; None: no shipped frame at this size).
    ``start_depth``: the start frame's recorded depth (float32 (S, S) metres), which a memory model
    starts from as play does (None: the session predicts it). ``start_view``: the start camera's
    world_to_camera (float64 (4, 4)) in the recordings' world, which keeps a session with a
    walkable region inside it as play does (None: no bound)."""
    name: str
    seed: int
    style: str
    prompt: str
    start: np.ndarray
    start_psnr: float | None = None
    start_depth: np.ndarray | None = None
    start_view: np.ndarray | None = None


@dataclass
class LiveConfig:
    scripts: tuple[str, ...] = SCRIPTS
    frames: int = MINUTE                   # the minute's length (shorter runs scale every script)
    window: int = WINDOW
    seed: int = 0                          # the play script's draw
    columns: tuple[str, ...] = ACTION_COLUMNS   # the action columns the data has
    gif_script: str = "play"               # the live minute of the first scene kept for the GIF
    actions: bool = True                   # also play the one-shot action check (``live_actions``)

    def __post_init__(self):
        if self.window < 1:
            raise ValueError(f"window must be >= 1, got {self.window}")


def windows(n: int, window: int) -> list[slice]:
    """Consecutive windows of ``window`` frames over n frames; a remainder shorter than half a
    window joins the last window, a longer one is a window of its own."""
    bounds = list(range(0, n, window)) + [n]
    if len(bounds) > 2 and bounds[-1] - bounds[-2] < window / 2:
        del bounds[-2]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def frame_series(frames: np.ndarray) -> dict[str, np.ndarray]:
    """Per frame of uint8 (T, S, S, 3): ``sharpness`` (Laplacian variance of luma), ``hf``,
    ``orientation`` (``orientation_histogram``, (T, 8)) and ``colour`` (mean RGB in [0, 1], (T, 3))."""
    out = {"sharpness": [], "hf": [], "orientation": [], "colour": []}
    for a in range(0, len(frames), CHUNK):
        x = M.frames_to_tensor(frames[a:a + CHUNK])
        out["sharpness"].append(M.laplacian_variance(x).numpy())
        out["hf"].append(hf_energy(x).numpy())
        out["orientation"].append(orientation_histogram(x).numpy())
        out["colour"].append(x.mean((2, 3)).numpy())
    return {k: np.concatenate(v) for k, v in out.items()}


def psnr_series(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(T,) PSNR of uint8 (T, S, S, 3) frames (``metrics.psnr``: identical frames give 100)."""
    if a.shape != b.shape:
        raise ValueError(f"frames of two shapes: {a.shape} and {b.shape}")
    return np.concatenate([M.psnr(M.frames_to_tensor(a[i:i + CHUNK]), M.frames_to_tensor(b[i:i + CHUNK])).numpy()
                           for i in range(0, len(a), CHUNK)])


def psnr_where(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(T,) PSNR of uint8 (T, S, S, 3) frames over the pixels where ``mask`` (T, S, S) is set
    (100 for no error, NaN where no pixel is set)."""
    err = ((a.astype(np.float32) - b.astype(np.float32)) / 255) ** 2
    n = mask.reshape(len(mask), -1).sum(1)
    mse = (err.mean(-1) * mask).reshape(len(mask), -1).sum(1) / np.maximum(n, 1)
    with np.errstate(divide="ignore"):
        out = np.minimum(np.where(mse > 0, 10 * np.log10(1 / np.maximum(mse, 1e-20)), M.PSNR_CAP), M.PSNR_CAP)
    return np.where(n > 0, out, np.nan)


def ratio(num: float, den: float) -> float:
    """num / den, each floored at ``metrics.SHARPNESS_FLOOR`` (flat over flat is 1)."""
    return max(float(num), M.SHARPNESS_FLOOR) / max(float(den), M.SHARPNESS_FLOOR)


def play_session(session, start: np.ndarray, actions: np.ndarray, desc: str = "",
                 progress: bool = False, depth: np.ndarray | None = None, view: np.ndarray | None = None):
    """``session.reset(start)`` (with ``depth`` and ``view`` when given), then one ``step`` per row, as
    ``alaya play --world``: the frames (T, S, S, 3), the seconds each step took (T,) and, for a
    session with a ``camera_view()`` (world_to_camera), its cameras from the start on (T + 1,
    4, 4; else None), read outside the timed steps."""
    given = {k: v for k, v in (("depth", depth), ("view", view)) if v is not None}
    session.reset(start, **given)
    camera = getattr(session, "camera_view", None)
    views = [np.asarray(camera(), np.float64)] if camera is not None else None
    frames, seconds = [], []
    for row in tqdm(actions, desc=desc, disable=not progress, unit="frame", leave=False):
        t0 = time.perf_counter()
        frame = session.step(row)
        seconds.append(time.perf_counter() - t0)
        frames.append(np.asarray(frame))
        if views is not None:
            views.append(np.asarray(camera(), np.float64))
    return np.stack(frames), np.array(seconds), (np.stack(views) if views is not None else None)


def real_play(out) -> tuple[np.ndarray, np.ndarray | None]:
    """(frames, cameras or None) of what ``play_real`` returned: the frames, or (frames, the
    game's world_to_camera (T + 1, 4, 4) from the start on)."""
    if isinstance(out, tuple):
        frames, views = out
        return np.asarray(frames), np.asarray(views, np.float64)
    return np.asarray(out), None


def structure_series(gen: np.ndarray, real: np.ndarray, window: int) -> np.ndarray:
    """Per window of ``window`` frames: ``patch_distance.structure_distance`` of the generated
    frames (uint8 (T, S, S, 3)) from the real ones, on every ``STRUCTURE_STRIDE``-th frame and
    ``STRUCTURE_SAMPLES`` patches per level whatever the window's length."""
    out = []
    for w in windows(len(gen), window):
        g, r = M.frames_to_tensor(gen[w][::STRUCTURE_STRIDE]), M.frames_to_tensor(real[w][::STRUCTURE_STRIDE])
        per_frame = -(-STRUCTURE_SAMPLES // len(g))             # the same sample count (noise floor) in any window
        out.append(structure_distance(g, r, per_frame=per_frame))
    return np.array(out)


def compare(gen: np.ndarray, real: np.ndarray, start: np.ndarray, script: LiveScript, window: int = WINDOW,
            cameras: tuple[np.ndarray, np.ndarray] | None = None) -> dict:
    """Per-frame series of one scene and script: generated and real ``frame_series``, ``psnr``
    against the real frames, the ``structure`` distance per window, the frames ``kept`` for
    ``live_structure.game_likeness`` (generated and real, ``thin``), the script's landmarks
    (standing still, the return) and, given both camera paths (generated, real; T + 1 each),
    ``camera`` (``live_camera.camera_errors`` of the frames after the start)."""
    if gen.shape != real.shape or gen.shape[1:] != start.shape:
        raise ValueError(f"generated {gen.shape}, real {real.shape} and start {start.shape} frames disagree")
    out = {"gen": frame_series(gen), "real": frame_series(real), "psnr": psnr_series(gen, real),
           "structure": structure_series(gen, real, window), "kept": {"gen": thin(gen), "real": thin(real)}}
    if cameras is not None:
        if len(cameras[0]) != len(gen) + 1:
            raise ValueError(f"cameras: expected {len(gen) + 1} (the start and one per frame), got {len(cameras[0])}")
        out["camera"] = {k: v[1:] for k, v in camera_errors(*cameras).items()}
    if "still_from" in script.marks:
        k = script.marks["still_from"]                  # frame k: where the player stops (0: the start)
        refs = {}
        for key, frames in (("gen", gen), ("real", real)):
            refs[key] = start if k == 0 else frames[k - 1]
            still = frames[k:]
            out[f"{key}_still_psnr"] = psnr_series(still, np.broadcast_to(refs[key], still.shape))
        static = (real[k:] == refs["real"]).all(-1)     # pixels the game itself leaves unchanged
        out["still_psnr_static"] = psnr_where(gen[k:], np.broadcast_to(refs["gen"], gen[k:].shape), static)
        out["static_fraction"] = float(static.mean())
    if "back" in script.marks:
        out["return_vs_start"] = float(psnr_series(gen[-1:], start[None])[0])
        out["real_return_vs_start"] = float(psnr_series(real[-1:], start[None])[0])
    return out


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def summarize(series: list[dict], script: LiveScript, window: int, seconds: np.ndarray) -> dict:
    """One script's metrics over its scenes (``compare`` outputs), pooled as docs/world.md says."""
    T = len(series[0]["psnr"])
    wins = windows(T, window)
    lv = lambda key, w: float(np.mean([s[key]["sharpness"][w].mean() for s in series]))    # noqa: E731
    sharp = [ratio(lv("gen", w), lv("real", w)) for w in wins]
    changes = [{k: s[k]["colour"][wins[-1]].mean(0) - s[k]["colour"][wins[0]].mean(0) for k in ("gen", "real")}
               for s in series]
    drifts, drift_pooled, game_change = [None] * len(series), None, None
    if len(wins) > 1:                     # a colour change needs a first and a last window
        drifts = [float(np.linalg.norm(c["gen"] - c["real"])) for c in changes]
        drift_pooled = float(np.linalg.norm(np.mean([c["gen"] - c["real"] for c in changes], 0)))
        game_change = _mean([float(np.linalg.norm(c["real"])) for c in changes])
    psnr = np.stack([s["psnr"] for s in series])
    pooled = lambda key, w: np.concatenate([s[key]["orientation"][w] for s in series])    # noqa: E731
    orient = [orientation_distance(pooled("gen", w), pooled("real", w)) for w in wins]
    structure = np.stack([s["structure"] for s in series]).mean(0).tolist()
    out = {"frames": T, "scenes": len(series), "windows": [[w.start + 1, w.stop] for w in wins],
           "sharpness_windows": sharp, "sharpness_min": min(sharp),
           "sharpness_max": max(sharp), "orientation_windows": orient, "orientation_max": max(orient),
           "structure_windows": structure, "structure_max": max(structure),
           **game_likeness([s["kept"]["gen"] for s in series], [s["kept"]["real"] for s in series]),
           "colour_drift": _mean(drifts), "colour_drift_pooled": drift_pooled, "game_colour_change": game_change,
           "psnr_mean": float(psnr.mean()),
           "psnr_windows": [float(psnr[:, w].mean()) for w in wins], "psnr_frame1": float(psnr[:, 0].mean()),
           "fps": float(seconds.size / max(seconds.sum(), 1e-9)),
           "actions": {c: int((script.actions[:, i] != 0).sum()) for i, c in enumerate(ACTION_COLUMNS)}}
    scenes = [{"sharpness_min": min(ratio(s["gen"]["sharpness"][w].mean(), s["real"]["sharpness"][w].mean())
                                    for w in wins), "colour_drift": d, "psnr_mean": float(s["psnr"].mean())}
              for s, d in zip(series, drifts)]
    if len(wins) > 1:                     # each scene's change of mean RGB, first window to last
        for d, c in zip(scenes, changes):
            d.update(colour_change=c["gen"].tolist(), game_colour_change=c["real"].tolist())
    if "still_from" in script.marks:
        k = script.marks["still_from"]
        still = np.stack([s["gen_still_psnr"] for s in series])
        static = np.stack([s["still_psnr_static"] for s in series])
        hf = [np.stack([s[key]["hf"][k:] for s in series]) for key in ("gen", "real")]
        hf_ratio = [ratio(g, r) for g, r in zip(hf[0].mean(0), hf[1].mean(0))]
        out.update(still_frames=int(still.shape[1]), still_psnr_min=float(still.min()),
                   still_psnr_mean=float(still.mean()),
                   real_still_psnr_min=float(min(s["real_still_psnr"].min() for s in series)),
                   still_psnr_static_min=float(np.nanmin(static)), still_psnr_static_mean=float(np.nanmean(static)),
                   static_fraction=float(np.mean([s["static_fraction"] for s in series])),
                   still_hf_ratio_max=max(hf_ratio), still_hf_ratio_last=hf_ratio[-1])
        for d, s in zip(scenes, series):
            d.update(still_psnr_min=float(s["gen_still_psnr"].min()),
                     real_still_psnr_min=float(s["real_still_psnr"].min()),
                     still_psnr_static_min=float(np.nanmin(s["still_psnr_static"])),
                     still_hf_ratio_max=max(ratio(g, r) for g, r in zip(s["gen"]["hf"][k:], s["real"]["hf"][k:])))
    if "back" in script.marks:
        out.update(turning_point=script.marks["turning_point"], back=script.marks["back"],
                   return_psnr=float(psnr[:, -1].mean()),
                   return_vs_start_psnr=float(np.mean([s["return_vs_start"] for s in series])),
                   real_return_vs_start_psnr=float(np.mean([s["real_return_vs_start"] for s in series])))
        for d, s in zip(scenes, series):
            d.update(return_psnr=float(s["psnr"][-1]))
    if all("camera" in s for s in series):     # where the session's camera is against the game's
        position = np.stack([s["camera"]["position"] for s in series])
        rotation = np.stack([s["camera"]["rotation"] for s in series])
        out.update(camera_position_windows=[float(position[:, w].mean()) for w in wins],
                   camera_position_last=float(position[:, -1].mean()),
                   camera_position_max=float(position.max()), camera_rotation_max=float(rotation.max()),
                   camera_apart_frame=apart_frame(position))
        for d, p in zip(scenes, position):
            d.update(camera_position_last=float(p[-1]), camera_apart_frame=apart_frame(p[None]))
    out["per_scene"] = scenes
    return out


def apart_frame(position: np.ndarray, metres: float = CAMERA_APART) -> int | None:
    """The first frame (1-based) where any scene's camera (rows of ``position``, metres from
    the game's) is ``metres`` or more from the game's; None if never."""
    apart = np.flatnonzero((np.asarray(position) >= metres).any(0))
    return int(apart[0]) + 1 if apart.size else None


def overall(scripts: dict[str, dict], seconds: float, frames: int) -> dict:
    """The headline numbers over every script played (None where no script measures one):
    the minimum sharpness window, the largest colour drift, standing still and the return from
    their scripts (with how far the camera came back from the game's), the largest distance
    between the session's camera and the game's, PSNR over every frame, frames per second over
    every step."""
    got = lambda key: [s[key] for s in scripts.values() if s.get(key) is not None]    # noqa: E731
    still, back = scripts.get("still", {}), scripts.get("walk_back", {})
    total = sum(s["frames"] * s["scenes"] for s in scripts.values())
    lo, hi = min(got("sharpness_min"), default=None), max(got("sharpness_max"), default=None)
    return {"sharpness_min": lo, "sharpness_max": hi,
            "sharpness_in_band": None if lo is None else bool(SHARPNESS_BAND[0] <= lo and hi <= SHARPNESS_BAND[1]),
            "orientation_max": max(got("orientation_max"), default=None),
            "structure_max": max(got("structure_max"), default=None),
            "structure_game_ratio": max(got("structure_game_ratio"), default=None),
            "colour_drift": max(got("colour_drift"), default=None),
            "colour_drift_pooled": max(got("colour_drift_pooled"), default=None),
            "game_colour_change": max(got("game_colour_change"), default=None),
            "still_psnr_min": still.get("still_psnr_min"), "still_psnr_mean": still.get("still_psnr_mean"),
            "still_psnr_static_min": still.get("still_psnr_static_min"),
            "still_hf_ratio_max": still.get("still_hf_ratio_max"),
            "walk_back_return_psnr": back.get("return_psnr"),
            "walk_back_return_camera": back.get("camera_position_last"),
            "camera_position_max": max(got("camera_position_max"), default=None),
            "psnr_mean": float(sum(s["psnr_mean"] * s["frames"] * s["scenes"] for s in scripts.values()) / total)
            if total else None,
            "fps": float(frames / seconds) if seconds > 0 else None}


def evaluate_live(make_session, play_real, scenes: list[Scene], cfg: LiveConfig | None = None,
                  progress: bool = False) -> dict:
    """Play every script from every scene in a session and in the real game; the metrics (module
    docstring) as a JSON-ready dict, plus what the report needs: ``series`` (per script, the
    scenes' mean per-frame sharpness, generated and real) and ``gif`` (the first scene's frames
    of ``cfg.gif_script``, generated and real)."""
    cfg = cfg or LiveConfig()
    if not scenes:
        raise ValueError("the live evaluation needs at least one scene")
    scripts, skipped = live_scripts(cfg.scripts, cfg.frames, cfg.seed, cfg.columns)
    series_kept, gif, results, all_seconds = {}, {}, {}, []
    gif_script = cfg.gif_script if cfg.gif_script in scripts else next(iter(scripts), None)
    for name, script in scripts.items():
        series, seconds = [], []
        for i, scene in enumerate(scenes):
            desc = f"{name} {scene.name}"
            gen, sec, gen_views = play_session(make_session(scene), scene.start, script.actions, desc, progress,
                                               scene.start_depth, scene.start_view)
            real, real_views = real_play(play_real(scene, script.actions))
            cameras = (gen_views, real_views) if gen_views is not None and real_views is not None else None
            series.append(compare(gen, real, scene.start, script, cfg.window, cameras))
            seconds.append(sec)
            if name == gif_script and i == 0:
                gif = {"generated": gen, "real": real, "start": scene.start, "scene": scene.name, "script": name}
        seconds = np.concatenate(seconds)
        all_seconds.append(seconds)
        results[name] = summarize(series, script, cfg.window, seconds)
        series_kept[name] = {k: np.mean([s[k]["sharpness"] for s in series], 0) for k in ("gen", "real")}
    seconds = np.concatenate(all_seconds) if all_seconds else np.zeros(0)
    actions = {}
    if cfg.actions:
        generated = lambda scene, rows: play_session(make_session(scene), scene.start, rows,     # noqa: E731
                                                     f"actions {scene.name}", progress, scene.start_depth,
                                                     scene.start_view)[0]
        actions = play_actions(generated, lambda scene, rows: real_play(play_real(scene, rows))[0], scenes,
                               cfg.columns)
    return {"config": {"scripts": list(scripts), "frames": cfg.frames, "window": cfg.window, "seed": cfg.seed},
            "scenes": [{"name": s.name, "seed": s.seed, "style": s.style, "prompt": s.prompt,
                        "size": int(s.start.shape[0]), "start_psnr": s.start_psnr} for s in scenes],
            "data_columns": list(cfg.columns), "skipped_actions": skipped["actions"],
            "skipped_scripts": skipped["scripts"],
            **overall(results, float(seconds.sum()), int(seconds.size)),
            "action_ratio_min": actions.get("ratio_min"),
            "action_placement_min": actions.get("placement_min"), "scripts": results,
            "actions": {k: v for k, v in actions.items() if k != "frames"}, "action_frames": actions.get("frames"),
            "series": series_kept, "gif": gif}


def public_json(result: dict) -> dict:
    """The result without its arrays (``series``, ``gif``, ``action_frames``): what ``--json`` prints."""
    return {k: v for k, v in result.items() if k not in ("series", "gif", "action_frames")}
