"""``alaya train wall-detail``: cut ``WallDetail`` tiles from recorded frames of walls seen close up.

Each frame (every ``every``-th, each recorded style) is searched on a grid of ``window`` x
``window``-pixel windows. A window makes a candidate where its depth is all within ``reach``
metres, its points (the recorded depth and camera, world z up) lie on one vertical plane (normal
within ``VERTICAL`` of level, the points within ``FLAT`` metres of the plane), and a pixel there
spans at most ``SHARP`` texels (so the tile holds what the camera resolved, not an upsampling).
The tile is the plane's ``tile`` x ``tile`` grid of ``texel``-metre texels around the window's
centre, along the wall (horizontal) and up it, each projected into the frame and sampled
bilinearly; one whose texels fall off the frame or on another surface (the depth there is not the
plane's) is dropped. Of a frame's candidates the one nearest the camera is kept, and of all the
candidates ``tiles`` are drawn at random (seeded; the data's mix of walls). Episodes need depth,
``K`` and camera poses (``alaya record game`` writes them).

Every candidate also says which way its wall faces (the plane's normal, towards the camera) and in
which recorded style it was seen: per style with ``min_facing`` candidates, the tiles' mean colours
are fitted by least squares as ``a + b cos(azimuth) + c sin(azimuth)`` of the facing
(``FacingColour``), keyed by the mean embedding of the style's phrasings (``episodes.json``'s
prompts for it, which the world model is trained with).

Of the candidates evenly lit (``evenly_lit``: no shadow's edge across them), ``materials`` are kept
whole as the walls' materials, chosen to span their range of fine detail (``representative``).

Where the episodes have cameras, the border walls' tops their first frames show are measured too
(``border_tops``): what a session draws a border no frame showed at (``WallDetail.unseen_top``).

With ``fog``, each of those styles' fog is learnt from surface points its frames saw at two
distances (``alaya.train.fog_pairs``, ``learn_fog_from_pairs``): what a session takes off the walls
its start frame saw far away (``WallDetail.fog_for``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from alaya.data.episodes import EpisodeDataset
from alaya.data.start_frames import recorded_region
from alaya.models.aerial_fog import MIN_PAIRS, learn_fog_from_pairs
from alaya.models.memory_geometry import camera_points
from alaya.train.border_tops import border_tops
from alaya.train.fog_pairs import surface_pairs
from alaya.models.texture_tiles import LUMA
from alaya.text.encoder import PromptEncoder
from alaya.models.wall_detail import WallDetail, WallDetailConfig, box_mean, facing_basis, relative_detail
from alaya.models.wall_materials import material_pattern

VERTICAL = 0.08          # |normal z| below this: a wall
FLAT = 0.006             # metres: RMS distance of a window's points from its plane
SHARP = 1.6              # texels a pixel may span at most where a tile is cut
ON_PLANE = 0.03          # metres (+ 2% of the depth): a texel's depth in the frame must be the plane's
MAX_SHADE = 0.1          # a material tile's quarter-tile box means: their spread over its mean at most


@dataclass
class WallDetailFitConfig:
    data: str = ""
    split: str = "train"                 # "" or a split the data lacks: every episode
    every: int = 3                       # frames: every ``every``-th frame is searched
    window: int = 24                     # pixels: the windows searched (a grid at half this step)
    reach: tuple[float, float] = (0.3, 1.6)   # metres: the depths a window's pixels must lie between
    seed: int = 0
    min_facing: int = 30                 # candidates a style needs for its walls' colour against facing
    materials: int = 48                  # material tiles kept (0: none): tiles whole, evenly lit
    wall_margin: float = 0.6             # metres: the border walls beyond the players' region whose tops are
                                         # measured (``border_tops``; a world model's ``memory_wall_margin``)
    fog: bool = True                     # each style's fog learnt (``fog_pairs``)
    progress: bool = True
    model: WallDetailConfig = None       # type: ignore[assignment]   (default WallDetailConfig())

    def __post_init__(self) -> None:
        if self.model is None:
            self.model = WallDetailConfig()
        if self.every < 1 or self.window < 4:
            raise ValueError(f"WallDetailFitConfig: every >= 1 and window >= 4 expected, got {self.every}, {self.window}")
        if not 0 < self.reach[0] < self.reach[1]:
            raise ValueError(f"WallDetailFitConfig.reach: 0 < near < far metres expected, got {self.reach!r}")
        if not (np.isfinite(self.wall_margin) and self.wall_margin > 0):
            raise ValueError(f"WallDetailFitConfig.wall_margin: metres > 0 expected, got {self.wall_margin!r}")
        if self.materials < 0:
            raise ValueError(f"WallDetailFitConfig.materials: >= 0 expected, got {self.materials}")


def _bilinear(image: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``image`` (H, W, ...) at continuous pixel coordinates u, v (pixel centres at +0.5), edges held."""
    H, W = image.shape[:2]
    x, y = np.clip(u - 0.5, 0, W - 1), np.clip(v - 0.5, 0, H - 1)
    x0, y0 = np.minimum(np.floor(x).astype(int), W - 2), np.minimum(np.floor(y).astype(int), H - 2)
    wx, wy = x - x0, y - y0
    if image.ndim == 3:
        wx, wy = wx[..., None], wy[..., None]
    return ((1 - wy) * ((1 - wx) * image[y0, x0] + wx * image[y0, x0 + 1])
            + wy * ((1 - wx) * image[y0 + 1, x0] + wx * image[y0 + 1, x0 + 1]))


def wall_tile(rgb: np.ndarray, depth: np.ndarray, K: np.ndarray, world_to_camera: np.ndarray,
              cfg: WallDetailFitConfig) -> tuple[np.ndarray, float, np.ndarray] | None:
    """(the tile's colours (tile, tile, 3) in [0, 1], row 0 at its top; the camera's distance to its
    centre; the way the wall faces, (2,) world x, y of its unit normal towards the camera) of a frame
    ``rgb`` (H, W, 3) uint8 with ``depth`` (H, W) metres along the view axis (0: sky), its ``K``
    (3, 3) and ``world_to_camera`` (4, 4), the nearest candidate; None without one."""
    m = cfg.model
    H, W = depth.shape
    depth = np.nan_to_num(np.asarray(depth, np.float64))
    K = np.asarray(K, np.float64)
    w2c = np.asarray(world_to_camera, np.float64)
    c2w = np.linalg.inv(w2c)
    cam = camera_points(torch.from_numpy(depth), torch.from_numpy(K)).numpy()          # (3, H, W)
    world = np.einsum("ij,jhw->ihw", c2w[:3, :3], cam) + c2w[:3, 3, None, None]
    half, step = cfg.window // 2, max(cfg.window // 2, 1)
    best = None
    for cv in range(half, H - half + 1, step):
        for cu in range(half, W - half + 1, step):
            d = depth[cv - half:cv + half, cu - half:cu + half]
            if not ((d > cfg.reach[0]) & (d < cfg.reach[1])).all():
                continue
            if best is not None and d.mean() >= best[1]:
                continue
            if d.max() / K[0, 0] > SHARP * m.texel:
                continue
            p = world[:, cv - half:cv + half, cu - half:cu + half].reshape(3, -1)
            centre = p.mean(1)
            _, s, vt = np.linalg.svd((p - centre[:, None]).T, full_matrices=False)
            normal = vt[2]
            if abs(normal[2]) > VERTICAL or s[2] / np.sqrt(p.shape[1]) > FLAT:
                continue
            along = np.array([-normal[1], normal[0], 0.0])
            along /= np.linalg.norm(along)
            if (w2c[:3, :3] @ along)[0] < 0:                     # along the wall: to the camera's right
                along = -along
            offsets = (np.arange(m.tile) - (m.tile - 1) / 2) * m.texel
            q = centre[:, None, None] + along[:, None, None] * offsets[None, None, :] \
                - np.array([0.0, 0.0, 1.0])[:, None, None] * offsets[None, :, None]   # (3, rows down, cols)
            pc = np.einsum("ij,jhw->ihw", w2c[:3, :3], q) + w2c[:3, 3, None, None]
            z = -pc[2]
            if (z <= 1e-3).any():
                continue
            u = K[0, 0] * pc[0] / z + K[0, 2]
            v = -K[1, 1] * pc[1] / z + K[1, 2]
            if u.min() < 0.5 or v.min() < 0.5 or u.max() > W - 0.5 or v.max() > H - 0.5:
                continue
            if (np.abs(_bilinear(depth, u, v) - z) > ON_PLANE + 0.02 * z).any():
                continue
            facing = normal[:2] / np.linalg.norm(normal[:2])
            if facing @ (c2w[:2, 3] - centre[:2]) < 0:           # the face the camera sees
                facing = -facing
            best = _bilinear(rgb.astype(np.float64) / 255, u, v), float(d.mean()), facing
    return best


def fit_wall_detail(cfg: WallDetailFitConfig) -> tuple[WallDetail, dict]:
    """The tiles cut from ``cfg.data`` and a report (frames searched, candidates, tiles kept, their
    detail's RMS and the spread of their mean colours)."""
    ds = EpisodeDataset(cfg.data)
    ids = ds.ids(cfg.split) if cfg.split and ds.ids(cfg.split) else ds.ids()
    if not ids:
        raise ValueError(f"{cfg.data}: no episodes")
    m = cfg.model
    tiles, facings, styles, searched, first_frames = [], [], [], 0, []
    pairs: dict[str, list[np.ndarray]] = {}
    pair_rng = np.random.default_rng(cfg.seed)
    for eid in tqdm(ids, desc="wall tiles", unit="episode", disable=not cfg.progress):
        ep = ds.load(eid)
        for name in ("depth", "K", "world_to_camera"):
            if name not in ep:
                raise ValueError(f"{ds.path(eid)}: no {name!r} (wall detail needs depth and cameras: alaya record game)")
        first_frames.append((ep["depth"][0], ep["K"], ep["world_to_camera"][0]))    # (for the border tops)
        rgb = ep["rgb"] if ep["rgb"].ndim == 5 else ep["rgb"][None]
        names = [str(n) for n in ep["styles"]]
        if cfg.fog:
            for name, found in zip(names, surface_pairs(rgb, ep["depth"], ep["K"], ep["world_to_camera"], pair_rng)):
                pairs.setdefault(name, []).append(found)
        for t in range(0, ep["depth"].shape[0], cfg.every):
            for s in range(rgb.shape[0]):
                searched += 1
                found = wall_tile(rgb[s, t], ep["depth"][t], ep["K"], ep["world_to_camera"][t], cfg)
                if found is not None:
                    tiles.append(found[0])
                    facings.append(found[2])
                    styles.append(names[s])
    if len(tiles) < m.tiles:
        raise ValueError(f"{cfg.data}: {len(tiles)} wall tiles found in {searched} frames, {m.tiles} needed "
                         f"(record walls close up: alaya record game --wall-contact 1)")
    pick = np.random.default_rng(cfg.seed).choice(len(tiles), m.tiles, replace=False)
    colours = torch.from_numpy(np.stack([tiles[i][::-1] for i in pick]).copy()).float()   # (N, T, T, 3), row 0 lowest
    luma = (colours * torch.from_numpy(LUMA)).sum(-1)
    detail = relative_detail(luma, max(int(round(m.far / m.texel)), 2))
    means = np.stack([t.reshape(-1, 3).mean(0) for t in tiles])
    named, facings = np.array(styles), np.stack(facings)
    fits = {name: fit_facing(facings[named == name], means[named == name])
            for name in sorted(set(styles)) if styles.count(name) >= cfg.min_facing}
    even = evenly_lit(tiles) if cfg.materials else []
    if len(even) < cfg.materials:
        raise ValueError(f"{cfg.data}: {len(even)} evenly lit wall tiles of {len(tiles)} found, {cfg.materials} "
                         f"needed (record walls close up: alaya record game --wall-contact 1; or fewer materials)")
    chosen = representative(torch.stack(even), cfg.materials) if cfg.materials else []
    region = recorded_region(ds, ("train", "val", "test"))
    tops = border_tops(first_frames, region[0], cfg.wall_margin) if region is not None else {}
    top_fields = {f"top_{k}": tops[k] for k in ("mean", "between", "within") if k in tops}
    fogs = {}
    seen = {name: np.concatenate(pairs.get(name, [np.zeros((0, 8))])) for name in fits} if cfg.fog else {}
    if seen and min(len(p) for p in seen.values()) >= MIN_PAIRS:    # (a fog for every style, or none)
        fogs = {name: learn_fog_from_pairs(p[:, 0:3], p[:, 3:6], p[:, 6], p[:, 7]) for name, p in seen.items()}
    model = WallDetail(dataclasses.replace(m, styles=len(fits), materials=cfg.materials, scatter=cfg.materials > 0,
                                           fog=bool(fogs), **top_fields))
    model.set_tiles(detail, colours.mean((1, 2)))
    if cfg.materials:
        model.set_materials(torch.stack([even[i] for i in chosen]))
    if fits:
        encoder = PromptEncoder()
        keys = [encoder.encode(list(ds.meta.styles[name])).float().mean(0) for name in fits]    # set_facing: unit
        model.set_facing(torch.stack(keys),
                         torch.from_numpy(np.stack([f[0] for f in fits.values()])))
    if fogs:
        model.set_fog(torch.tensor([[f.density, *f.colour] for f, _ in fogs.values()]))
    report = {"frames_searched": searched, "candidates": len(tiles), "tiles": m.tiles,
              "evenly_lit": len(even), "materials": cfg.materials,
              "material_rms": float(model.materials.pow(2).mean().sqrt()) if cfg.materials else None,
              "detail_rms": float(detail.pow(2).mean().sqrt()),
              "key_spread": [float(x) for x in model.keys.std(0)], "border_tops": tops,
              "facing": {name: {"candidates": styles.count(name), "colour_rms": f[1], "residual_rms": f[2]}
                         for name, f in fits.items()},
              "fog": {name: {"density": f.density, "colour": [float(x) for x in f.colour], **r}
                      for name, (f, r) in fogs.items()}}
    return model, report


def evenly_lit(walls: list[np.ndarray]) -> list[torch.Tensor]:
    """The luminance (T, T), row 0 lowest, of the wall tiles (T, T, 3) (row 0 at the top)
    whose quarter-tile box means spread at most ``MAX_SHADE`` of their mean: a material's look,
    not a shadow's edge across it."""
    kept = []
    for tile in walls:
        luma = torch.from_numpy(tile[::-1] @ LUMA).double()
        spread = float(box_mean(luma[None], max(tile.shape[0] // 4, 1))[0].std() / luma.mean().clamp_min(1e-3))
        if spread <= MAX_SHADE:
            kept.append(luma.float())
    return kept


def representative(luma: torch.Tensor, count: int) -> np.ndarray:
    """Indices of ``count`` of the walls' luminance tiles ``luma`` (N, T, T) spanning their range of
    fine detail evenly: sorted by their pattern's (``material_pattern``) Laplacian energy, the tiles
    at the midpoints of ``count`` equal quantile bins. The detail of recorded walls is heavy-tailed
    (brick and wood courses against smooth concrete and marble), and a random pick of a few dozen
    often misses the tail, so that walls drawn from it are on average smoother than the game's."""
    if not 1 <= count <= len(luma):
        raise ValueError(f"count: expected 1 .. {len(luma)} (the tiles given), got {count}")
    pattern = material_pattern(luma).double()
    lap = 4 * pattern - sum(pattern.roll(k, d) for k in (1, -1) for d in (-1, -2))   # the tiles repeat
    order = np.argsort(lap.pow(2).mean((1, 2)).numpy(), kind="stable")
    return order[((np.arange(count) + 0.5) / count * len(order)).astype(int)]


def fit_facing(facing: np.ndarray, colours: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(``FacingColour`` coefficients (3, 3), the colours' RMS distance from their mean, from the fit)
    of walls facing ``facing`` (N, 2) whose mean colours are ``colours`` (N, 3): least squares."""
    X = facing_basis(facing)
    coefficients = np.linalg.lstsq(X, colours, rcond=None)[0]
    rms = lambda r: float(np.sqrt((r ** 2).sum(1).mean()))                 # noqa: E731
    return coefficients, rms(colours - colours.mean(0)), rms(colours - X @ coefficients)
