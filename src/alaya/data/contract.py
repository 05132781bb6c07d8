"""The clip contract: the keys, dtypes and shapes of one clip file (see DESIGN.md).

A clip of T frames at H x W rendered in S styles holds the arrays below. Shapes use the
symbols S, T, H, W, A; a reader binds them from the first array that names them and then
checks every other array against the bound values.

Conventions fixed here (the contract leaves them open):

* Background pixels (``mask == 0``) have depth 0, normal 0, albedo 0, roughness 0, metallic 0,
  material 0 and instance 0. Their motion is the flow of points at infinity (camera rotation
  only), so a whole frame can be warped.
* ``K`` maps camera-space points to pixels with the origin at the top-left pixel's corner:
  pixel (row i, column j) has its centre at (u, v) = (j + 0.5, i + 0.5).
"""

from __future__ import annotations

SCHEMA_VERSION = 1

# key -> (numpy dtype string, shape symbols)
CLIP_ARRAYS: dict[str, tuple[str, tuple[str, ...]]] = {
    "rgb": ("uint8", ("S", "T", "H", "W", "3")),
    "styles": ("<U", ("S",)),
    "depth": ("float32", ("T", "H", "W")),
    "mask": ("uint8", ("T", "H", "W")),
    "normal": ("float16", ("T", "H", "W", "3")),
    "albedo": ("uint8", ("T", "H", "W", "3")),
    "roughness": ("uint8", ("T", "H", "W")),
    "metallic": ("uint8", ("T", "H", "W")),
    "material": ("uint16", ("T", "H", "W")),
    "instance": ("uint16", ("T", "H", "W")),
    "motion": ("float16", ("T", "H", "W", "2")),
    "K": ("float32", ("3", "3")),
    "world_to_camera": ("float32", ("T", "4", "4")),
    "actions": ("float32", ("T", "A")),
}

OPTIONAL_KEYS = frozenset({"actions"})
REQUIRED_KEYS = tuple(k for k in CLIP_ARRAYS if k not in OPTIONAL_KEYS)

# The G-buffer keys a renderer consumes (everything but the RGB targets and the style names).
GBUFFER_KEYS = (
    "depth", "mask", "normal", "albedo", "roughness", "metallic", "material", "instance", "motion",
)
def renderer_input(clip: dict, start: int = 0, stop: int | None = None) -> dict:
    """What a renderer reads from a clip (G-buffer keys and the camera, those present), the
    per-frame arrays cut to frames [start, stop); ``K`` is the clip's, whole. Renderers with a
    view branch read the camera (``codecs.gbuffer.view_input``); the others ignore it."""
    out = {k: clip[k][start:stop] for k in (*GBUFFER_KEYS, "world_to_camera") if k in clip}
    if "K" in clip:
        out["K"] = clip["K"]
    return out
