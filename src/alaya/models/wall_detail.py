"""Close-up detail for walls seen only from afar, learnt from recordings of walls seen close up.

::

    detail = WallDetail.from_pretrained("weights/world_model/wall_detail")
    tile = detail.nearest(mean_colour)                  # a wall's tile, by its colour near at hand
    colours *= 1 + detail.at(tile, u, z, metres_per_pixel)[:, None]   # u, z: metres on the wall

A session's start frame sees the arena's walls 9-15 m away, where a 128² pixel spans 11-15 cm,
so the walls' textures (``RegionWalls``) hold nothing finer than ~12 cm. Walked up to, such a
wall is a smooth gradient where the game shows its material's grain, stripes and mortar lines,
and what no frame showed cannot be recovered. It can be drawn as the recordings show walls of
that look close up. ``alaya train wall-detail`` (``alaya.train.wall_detail``) cuts tiles from
recorded frames where a vertical plane fills part of the view within reach: ``tile`` x ``tile``
texels of ``texel`` metres on the wall's plane. Each keeps its detail finer than a far texel
(luminance over its ``far``-metre box mean, less 1) and its mean colour, the key a wall's own
colour is matched with.

``at`` looks the detail up by metres along and up the wall, tiled: each tile is made periodic
when it is set (``periodic``: its borders cross-faded with the tile moved by half its size, so
it meets itself without a seam) and averaged over the pixel's footprint (``levels`` box filters
of 1, 2, 4, ... texels; a detail finer than a pixel is not drawn aliased). Luminance only, as a
factor: the wall keeps the colour its far texels give.

What a wall no frame showed looks like is unknown: a game draws each wall's material at random,
so the wall the start frame shows says nothing of the others' (its colour is a worse guess for
them than the average wall's: docs/world_journal.md, twenty-eighth section). The recordings do
say how the walls of each style look on average against the way they face, the light falling on
them: ``facing`` holds, per recorded style (``style_keys``: its phrasings' mean embedding), the
close-up tiles' mean colour fitted as ``a + b cos(azimuth) + c sin(azimuth)`` of the wall's
facing. ``facing_for`` gives it for a session's prompt (the nearest style, when it is near:
``MIN_STYLE_SIMILARITY``), and ``RegionWalls`` colours a border no frame showed with it
(``alaya.models.region_walls``).

Its material is unknown too, and a smooth wall of the average colour is no wall the game shows:
``materials`` holds tiles of walls' whole look (the same cut, the luminance over the tile's mean,
less 1, where the wall was evenly lit: brick courses and their seams, planks, marble's streaks),
and ``RegionWalls`` draws a border no frame showed as one of them, drawn at random (a sample of
the recorded walls, not their mean), in its facing's colour. ``material_at`` looks one up as
``at`` does, interpolated bilinearly within the footprint's level, and scattered per 0.64 m cell
where it has no period of its own (``alaya.models.wall_materials``: a streaked material repeated
as it is shows its tile as a grid of bumps).

``fog`` holds each recorded style's fog (``AerialFog``: density and colour, learnt from surface
points the recordings saw at two distances, ``alaya.train.fog_pairs``); ``fog_for`` gives it for
a session's prompt, and the walls a start frame saw far away are cleared of it
(``region_shell``, ``memory_fog``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from alaya.models.aerial_fog import AerialFog
from alaya.models.wall_materials import (bilinear_tiled, material_pattern, relative_luma, repeating_axes,
                                         scattered_tile)
from alaya.nn.pretrained import from_pretrained, save_pretrained

WALL_DETAIL_DIR = "wall_detail"          # a world model's wall detail, inside its folder
MAX_DETAIL = 0.7                         # |detail| clip: a factor between 0.3 and 1.7
MIN_STYLE_SIMILARITY = 0.75             # cosine of a prompt's embedding to a recorded style's keys


@dataclass
class WallDetailConfig:
    tiles: int = 96                      # tiles kept
    tile: int = 32                       # texels a side
    texel: float = 0.02                  # metres a texel spans (no finer than a 128² frame's pixel
                                         # within reach, or the pixel grid beats with the texels)
    far: float = 0.12                    # metres: the box whose mean a tile's detail is relative to
    levels: int = 3                      # footprint filters: boxes of 1, 2, 4, ... texels
    styles: int = 0                      # recorded styles whose walls' colour against facing is kept
    text_dim: int = 384                  # ... keyed by their phrasings' embedding
    materials: int = 0                   # material tiles kept (0: none), ``tile`` x ``tile`` texels of ``texel``
    material_levels: int = 5             # ... their footprint filters: boxes of 1, 2, 4, ... texels
    scatter: bool = False                # ... those without a period drawn scattered (``material_repeats``
                                         # kept; a folder saved before it draws every material tiled)
    top_mean: float = 0.0                # metres: the recorded border walls' mean top (0: none recorded)
    top_between: float = 0.0             # m²: the variance of the recorded worlds' mean tops ...
    top_within: float = 0.0              # m²: ... and of the tops within one world
    fog: bool = False                    # each recorded style's fog is kept (``fog_for``; a folder saved before has none)

    def __post_init__(self) -> None:
        if self.tiles < 1 or self.tile < 2 or self.levels < 1:
            raise ValueError(f"WallDetailConfig: tiles >= 1, tile >= 2 and levels >= 1 expected, got "
                             f"{self.tiles}, {self.tile}, {self.levels}")
        if not (math.isfinite(self.texel) and self.texel > 0 and math.isfinite(self.far) and self.far > self.texel):
            raise ValueError(f"WallDetailConfig: texel > 0 and far > texel (metres) expected, got "
                             f"{self.texel!r}, {self.far!r}")
        if self.fog and not self.styles:
            raise ValueError("WallDetailConfig.fog: a fog is kept per recorded style, and styles is 0")
        if self.styles < 0 or self.text_dim < 1:
            raise ValueError(f"WallDetailConfig: styles >= 0 and text_dim >= 1 expected, got "
                             f"{self.styles}, {self.text_dim}")
        if 2 ** (self.levels - 1) > self.tile:
            raise ValueError(f"WallDetailConfig.levels: a box of 2^(levels - 1) texels must fit a tile of "
                             f"{self.tile}, got {self.levels}")
        if self.materials < 0 or not 1 <= self.material_levels or 2 ** (self.material_levels - 1) > self.tile:
            raise ValueError(f"WallDetailConfig: materials >= 0 and 1 <= material_levels with a box of "
                             f"2^(material_levels - 1) texels in a tile of {self.tile} expected, got {self.materials}, "
                             f"{self.material_levels}")
        tops = (self.top_mean, self.top_between, self.top_within)
        if not all(math.isfinite(t) and t >= 0 for t in tops):
            raise ValueError(f"WallDetailConfig: top_mean, top_between and top_within finite and >= 0 expected, "
                             f"got {tops}")


def box_mean(tiles: torch.Tensor, size: int, mode: str = "reflect") -> torch.Tensor:
    """(N, T, T) each texel's mean over the ``size`` x ``size`` box around it, the tile padded by
    ``mode`` (``F.pad``'s: "reflect", or "circular" for a periodic tile)."""
    if size <= 1:
        return tiles
    lo, hi = (size - 1) // 2, size // 2
    padded = F.pad(tiles[:, None], (lo, hi, lo, hi), mode=mode)
    return F.avg_pool2d(padded, size, stride=1)[:, 0]


def periodic(tiles: torch.Tensor) -> torch.Tensor:
    """(N, T, T) zero-mean detail tiles made to repeat without seams: along each axis in turn, the
    tile cross-faded with itself moved by half its size (weight 1 at the centre, 0 at the borders,
    where the moved copy meets itself continuously), the weights' sum of squares normalised to 1
    (two unrelated grains blended keep the grain's strength)."""
    n = tiles.shape[-1]
    w = 1 - ((torch.arange(n, dtype=tiles.dtype) + 0.5) * 2 / n - 1).abs()
    scale = (w ** 2 + (1 - w) ** 2).sqrt()
    x = (w * tiles + (1 - w) * tiles.roll(n // 2, -1)) / scale
    w, scale = w[:, None], scale[:, None]
    return (w * x + (1 - w) * x.roll(n // 2, -2)) / scale


def relative_detail(luma: torch.Tensor, far_texels: int) -> torch.Tensor:
    """(N, T, T) luminance tiles' detail finer than ``far_texels``: luma over its box mean, less 1, clipped."""
    low = box_mean(luma.double(), far_texels)
    return (luma.double() / low.clamp_min(1e-3) - 1).clamp(-MAX_DETAIL, MAX_DETAIL).float()


def footprint_level(pixel_metres: np.ndarray, texel: float, levels: int) -> np.ndarray:
    """(n,) the box filter (0: one texel, k: 2^k texels) nearest each pixel's width ``pixel_metres``."""
    width = np.nan_to_num(pixel_metres / texel, nan=1.0, posinf=2.0 ** levels)
    return np.clip(np.round(np.log2(np.maximum(width, 1e-6))), 0, levels - 1).astype(np.int64)


def footprint_levels(tiles: torch.Tensor, levels: int) -> np.ndarray:
    """(N, levels, T, T) float32: periodic tiles (N, T, T) box-filtered over 1, 2, 4, ... texels."""
    tiles = tiles.float()
    return torch.stack([box_mean(tiles, 2 ** k, "circular") for k in range(levels)], 1).numpy()


def wall_lookup(index: int, count: int, name: str, u, z, pixel_metres) -> tuple[np.ndarray, ...]:
    """``u``, ``z``, ``pixel_metres`` as float64 (n,) each, checked, for looking up tile ``index`` of
    ``count`` (``name`` says which kind in the error)."""
    if not 0 <= index < count:
        raise ValueError(f"{name}: expected 0 .. {count - 1}, got {index!r}")
    u, z, pixel_metres = (np.asarray(a, np.float64).reshape(-1) for a in (u, z, pixel_metres))
    if not u.shape == z.shape == pixel_metres.shape:
        raise ValueError(f"u, z, pixel_metres: expected the same shape, got {u.shape}, {z.shape}, {pixel_metres.shape}")
    return u, z, pixel_metres


def facing_basis(facing: np.ndarray) -> np.ndarray:
    """(N, 3) [1, cos(azimuth), sin(azimuth)] of walls whose faces look along ``facing`` (N, 2): world x, y."""
    azimuth = np.arctan2(facing[:, 1], facing[:, 0])
    return np.stack([np.ones_like(azimuth), np.cos(azimuth), np.sin(azimuth)], 1)


@dataclass(frozen=True)
class FacingColour:
    """A style's walls' mean colour near at hand against the way they face: ``coefficients`` (3, 3),
    rows a, b, c of ``a + b cos(azimuth) + c sin(azimuth)`` per channel."""
    coefficients: np.ndarray

    def __call__(self, facing) -> np.ndarray:
        """(3,) in [0, 1] for a wall whose face looks along ``facing`` (2,): world x, y (not unit)."""
        f = np.asarray(facing, np.float64).reshape(-1)
        if f.shape != (2,) or not np.isfinite(f).all() or not f.any():
            raise ValueError(f"facing: expected 2 finite values, not both 0, got {facing!r}")
        return np.clip(facing_basis(f[None])[0] @ self.coefficients, 0, 1)


class WallDetail(nn.Module):
    """``tiles`` (tiles, tile, tile): each tile's detail, periodic; ``keys`` (tiles, 3): each tile's
    mean colour in [0, 1]; ``style_keys`` (styles, text_dim) and ``facing`` (styles, 3, 3): each
    recorded style's key and ``FacingColour``; ``materials`` (materials, tile, tile): walls' whole
    patterns (``material_pattern``) and ``material_repeats`` (materials, 2): 1 along each axis
    [along, up] where the recorded tile repeats (``repeating_axes``). The footprint levels are made
    from the tiles when first looked up."""

    def __init__(self, config: WallDetailConfig | None = None) -> None:
        super().__init__()
        self.config = c = config or WallDetailConfig()
        self.register_buffer("tiles", torch.zeros(c.tiles, c.tile, c.tile))
        self.register_buffer("keys", torch.zeros(c.tiles, 3))
        if c.styles:                      # (a folder saved without styles has neither)
            self.register_buffer("style_keys", torch.zeros(c.styles, c.text_dim))
            self.register_buffer("facing", torch.zeros(c.styles, 3, 3))
        else:
            self.style_keys, self.facing = torch.zeros(0, c.text_dim), torch.zeros(0, 3, 3)
        if c.fog:                         # per style: density per metre, colour sRGB (3,) (above 1: lit)
            self.register_buffer("fog", torch.zeros(c.styles, 4))
        else:
            self.fog = torch.zeros(0, 4)
        if c.materials:                   # (nor one saved without materials)
            self.register_buffer("materials", torch.zeros(c.materials, c.tile, c.tile))
        else:
            self.materials = torch.zeros(0, c.tile, c.tile)
        if c.materials and c.scatter:
            self.register_buffer("material_repeats", torch.ones(c.materials, 2))
        else:                             # every material repeats: drawn tiled
            self.material_repeats = torch.ones(c.materials, 2)
        self._numpy: tuple[np.ndarray, np.ndarray] | None = None
        self._material_levels: dict[int, np.ndarray] = {}

    def set_tiles(self, detail: torch.Tensor, keys: torch.Tensor) -> None:
        """Take ``detail`` (tiles, tile, tile), each tile's detail (``relative_detail``), and ``keys``
        (tiles, 3) mean colours; the footprint levels are made here."""
        c = self.config
        if tuple(detail.shape) != (c.tiles, c.tile, c.tile) or tuple(keys.shape) != (c.tiles, 3):
            raise ValueError(f"detail, keys: expected {(c.tiles, c.tile, c.tile)} and {(c.tiles, 3)}, got "
                             f"{tuple(detail.shape)} and {tuple(keys.shape)}")
        if not (torch.isfinite(detail).all() and torch.isfinite(keys).all()):
            raise ValueError("detail, keys: must be finite")
        self.tiles.copy_(periodic(detail.float()).clamp(-MAX_DETAIL, MAX_DETAIL))
        self.keys.copy_(keys.float().clamp(0, 1))
        self._numpy = None

    def set_facing(self, style_keys: torch.Tensor, facing: torch.Tensor) -> None:
        """Take each recorded style's key (styles, text_dim) and ``FacingColour`` coefficients (styles, 3, 3)."""
        c = self.config
        if tuple(style_keys.shape) != (c.styles, c.text_dim) or tuple(facing.shape) != (c.styles, 3, 3):
            raise ValueError(f"style_keys, facing: expected {(c.styles, c.text_dim)} and {(c.styles, 3, 3)}, got "
                             f"{tuple(style_keys.shape)} and {tuple(facing.shape)}")
        if not (torch.isfinite(style_keys).all() and torch.isfinite(facing).all()):
            raise ValueError("style_keys, facing: must be finite")
        self.style_keys.copy_(F.normalize(style_keys.float(), dim=-1))
        self.facing.copy_(facing.float())

    def set_fog(self, fog: torch.Tensor) -> None:
        """Take each recorded style's fog (styles, 4): density per metre, then its colour (3,) sRGB
        (``AerialFog``, as ``learn_fog_from_pairs`` learns it)."""
        c = self.config
        if not c.fog or tuple(fog.shape) != (c.styles, 4):
            raise ValueError(f"fog: expected {(c.styles, 4)} with config.fog, got {tuple(fog.shape)} (fog {c.fog})")
        if not (torch.isfinite(fog).all() and (fog >= 0).all()):
            raise ValueError("fog: must be finite and >= 0")
        self.fog.copy_(fog.float())

    def set_materials(self, luma: torch.Tensor) -> None:
        """Take ``luma`` (materials, tile, tile): walls' luminance, row 0 lowest;
        their patterns are kept (``material_pattern``), and along which axes each repeats
        (``repeating_axes`` of the tile as recorded: making it periodic puts a repeat into any tile)."""
        c = self.config
        if tuple(luma.shape) != (c.materials, c.tile, c.tile):
            raise ValueError(f"luma: expected {(c.materials, c.tile, c.tile)}, got {tuple(luma.shape)}")
        if not (torch.isfinite(luma).all() and (luma >= 0).all()):
            raise ValueError("luma: must be finite and >= 0")
        self.materials.copy_(material_pattern(luma))
        if c.scatter:
            self.material_repeats.copy_(torch.from_numpy(repeating_axes(relative_luma(luma))).float())
        self._material_levels = {}

    def material_at(self, material: int, u, z, pixel_metres) -> np.ndarray:
        """(n,) the pattern of ``material`` (a factor less 1) at ``u``, ``z`` (n,) metres along and up
        a wall, for pixels each spanning ``pixel_metres`` (n,) there: the box level nearest a pixel's
        width, interpolated bilinearly between its texels, tiled along the axes it repeats along and
        scattered along the others (``scattered_tile``)."""
        c = self.config
        u, z, pixel_metres = wall_lookup(material, c.materials, "material", u, z, pixel_metres)
        levels = self._material_levels.get(material)
        if levels is None:                 # made once per material drawn
            repeats = self.material_repeats[material].numpy() > 0.5
            tile = scattered_tile(self.materials[material].double().numpy(), repeats, material)
            levels = self._material_levels[material] = footprint_levels(torch.from_numpy(tile)[None], c.material_levels)[0]
        level = footprint_level(pixel_metres, c.texel, c.material_levels)
        return bilinear_tiled(levels, level, np.nan_to_num(u) / c.texel, np.nan_to_num(z) / c.texel)

    def recorded_style(self, style) -> int | None:
        """The recorded style nearest a prompt's embedding ``style`` (text_dim,), or None: none is
        within ``MIN_STYLE_SIMILARITY`` (an empty prompt, a look the recordings never had)."""
        style = torch.as_tensor(style, dtype=torch.float32).reshape(-1)
        if style.shape != (self.config.text_dim,) or not torch.isfinite(style).all():
            raise ValueError(f"style: expected {self.config.text_dim} finite values, got shape {tuple(style.shape)}")
        if self.config.styles == 0 or float(style.norm()) == 0:
            return None
        similarity = self.style_keys @ F.normalize(style, dim=0)
        best = int(similarity.argmax())
        return best if float(similarity[best]) >= MIN_STYLE_SIMILARITY else None

    def facing_for(self, style) -> FacingColour | None:
        """The ``FacingColour`` of the recorded style nearest ``style`` (``recorded_style``), or None."""
        best = self.recorded_style(style)
        return None if best is None else FacingColour(self.facing[best].double().numpy())

    def fog_for(self, style) -> AerialFog | None:
        """The fog of the recorded style nearest ``style`` (``recorded_style``), or None: none near,
        or no fog kept."""
        best = self.recorded_style(style) if self.config.fog else None
        if best is None:
            return None
        fog = self.fog[best].double().numpy()
        return AerialFog(float(fog[0]), fog[1:].copy())

    def unseen_top(self, seen) -> float:
        """The top (metres above the floor) of a border wall no frame showed, given the tops ``seen``
        of its world's walls that a frame showed: the recorded borders' mean top, moved towards the
        seen walls' mean as far as the recordings say one world's walls share a height (the
        best linear predictor of a random-effects model: weight n b / (n b + w) for n seen walls,
        b ``top_between`` and w ``top_within``). A game that draws each wall's height at random
        gives a weight near 0: the seen walls say little of the others."""
        c = self.config
        seen = np.asarray(seen, np.float64).reshape(-1)
        if c.top_mean <= 0:
            raise ValueError("unseen_top: this wall detail has no recorded border tops (top_mean 0)")
        if not np.isfinite(seen).all():
            raise ValueError(f"seen: expected finite tops in metres, got {seen!r}")
        n, spread = len(seen), len(seen) * c.top_between + c.top_within
        weight = n * c.top_between / spread if n and spread > 0 else 0.0
        return float(c.top_mean + weight * (seen.mean() - c.top_mean)) if n else float(c.top_mean)

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(levels (tiles, levels, tile, tile) float32, keys (tiles, 3) float64), made once."""
        if self._numpy is None:
            self._numpy = footprint_levels(self.tiles, self.config.levels), self.keys.numpy().astype(np.float64)
        return self._numpy

    def nearest(self, colour, among: int = 1) -> int:
        """The tile whose mean colour is nearest ``colour`` (3,) in [0, 1]; with ``among`` > 1, of
        the ``among`` nearest the one of median detail (RMS): walls of one colour range from plain
        marble to brick courses, and a colour alone says little of which."""
        colour = np.asarray(colour, np.float64).reshape(-1)
        if colour.shape != (3,) or not np.isfinite(colour).all():
            raise ValueError(f"colour: expected 3 finite values in [0, 1], got {colour!r}")
        if among < 1:
            raise ValueError(f"among: tiles >= 1, got {among!r}")
        levels, keys = self._arrays()
        near = np.argsort(((keys - colour) ** 2).sum(1), kind="stable")[:among]
        strength = np.sqrt((levels[near, 0] ** 2).mean((1, 2)))
        return int(near[np.argsort(strength, kind="stable")[(len(near) - 1) // 2]])

    def at(self, tile: int, u, z, pixel_metres) -> np.ndarray:
        """(n,) the detail of ``tile`` at ``u``, ``z`` (n,) metres along and up a wall, for pixels each
        spanning ``pixel_metres`` (n,) there (its level: the box nearest a pixel's width)."""
        c = self.config
        u, z, pixel_metres = wall_lookup(tile, c.tiles, "tile", u, z, pixel_metres)
        detail, _ = self._arrays()
        level = footprint_level(pixel_metres, c.texel, c.levels)
        iu = np.mod(np.floor(np.nan_to_num(u) / c.texel).astype(np.int64), c.tile)
        iz = np.mod(np.floor(np.nan_to_num(z) / c.texel).astype(np.int64), c.tile)
        return detail[tile, level, iz, iu]

    def save_pretrained(self, folder, **metadata) -> None:
        save_pretrained(self, folder, dtype=torch.float16, **metadata)

    @classmethod
    def from_pretrained(cls, folder) -> WallDetail:
        model = from_pretrained(cls, WallDetailConfig, folder).eval()
        model._numpy, model._material_levels = None, {}      # the levels of the loaded tiles
        return model
