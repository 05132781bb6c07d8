"""The material library: what every surface in the world is made of.

Ids are 1-based (0 means "no material", the background). Colours are sRGB in 0..1.
``pattern`` is a procedural albedo pattern the rasterizer draws in object space
(0 solid, 1 checker, 2 stripes, 3 value noise), so surfaces carry texture-like detail.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Material:
    name: str
    albedo: tuple[float, float, float]
    roughness: float
    metallic: float
    emission: tuple[float, float, float] = (0.0, 0.0, 0.0)
    pattern: int = 0
    pattern_scale: float = 1.0

    def to_dict(self, material_id: int) -> dict:
        d = {"id": material_id, **asdict(self)}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


MATERIALS: tuple[Material, ...] = (
    Material("grass", (0.30, 0.52, 0.20), 0.95, 0.0, pattern=3, pattern_scale=1.5),
    Material("sand", (0.80, 0.70, 0.50), 0.90, 0.0, pattern=3, pattern_scale=3.0),
    Material("concrete", (0.60, 0.60, 0.58), 0.85, 0.0, pattern=3, pattern_scale=4.0),
    Material("brick", (0.62, 0.27, 0.20), 0.80, 0.0, pattern=2, pattern_scale=4.0),
    Material("wood", (0.55, 0.36, 0.20), 0.65, 0.0, pattern=2, pattern_scale=6.0),
    Material("checker_tile", (0.85, 0.85, 0.82), 0.40, 0.0, pattern=1, pattern_scale=2.0),
    Material("red_plastic", (0.80, 0.10, 0.10), 0.35, 0.0),
    Material("blue_plastic", (0.12, 0.25, 0.80), 0.35, 0.0),
    Material("yellow_paint", (0.90, 0.78, 0.12), 0.50, 0.0),
    Material("rubber", (0.08, 0.08, 0.09), 0.90, 0.0),
    Material("steel", (0.62, 0.63, 0.66), 0.30, 1.0),
    Material("gold", (1.00, 0.77, 0.34), 0.25, 1.0),
    Material("copper", (0.95, 0.60, 0.45), 0.35, 1.0),
    Material("marble", (0.92, 0.92, 0.90), 0.20, 0.0, pattern=3, pattern_scale=8.0),
    Material("neon_cyan", (0.10, 0.90, 0.95), 0.30, 0.0, emission=(0.2, 2.5, 2.8)),
    Material("neon_magenta", (0.95, 0.15, 0.80), 0.30, 0.0, emission=(2.8, 0.3, 2.2)),
    Material("lava", (0.90, 0.30, 0.05), 0.60, 0.0, emission=(3.0, 0.8, 0.1), pattern=3,
             pattern_scale=2.0),
    Material("glass_green", (0.35, 0.75, 0.45), 0.05, 0.0),
)

MATERIAL_IDS: dict[str, int] = {m.name: i + 1 for i, m in enumerate(MATERIALS)}

# Groups the scene generator draws from.
GROUND_MATERIALS = ("grass", "sand", "concrete", "checker_tile")
WALL_MATERIALS = ("brick", "concrete", "wood", "marble")
PROP_MATERIALS = (
    "red_plastic", "blue_plastic", "yellow_paint", "rubber", "steel", "gold", "copper",
    "wood", "marble", "glass_green",
)
EMISSIVE_MATERIALS = ("neon_cyan", "neon_magenta", "lava")


def material(name_or_id: str | int) -> Material:
    """Look a material up by name or 1-based id."""
    if isinstance(name_or_id, str):
        if name_or_id not in MATERIAL_IDS:
            raise KeyError(f"unknown material {name_or_id!r}; known: {sorted(MATERIAL_IDS)}")
        return MATERIALS[MATERIAL_IDS[name_or_id] - 1]
    if not 1 <= name_or_id <= len(MATERIALS):
        raise KeyError(f"material id {name_or_id} out of range 1..{len(MATERIALS)}")
    return MATERIALS[name_or_id - 1]


def library_json() -> list[dict]:
    """The library as it is written into dataset.json."""
    return [m.to_dict(i + 1) for i, m in enumerate(MATERIALS)]
