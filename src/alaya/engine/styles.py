"""Named looks of the reference renderer, with the prompt phrasings that describe them.

Each :class:`Style` is a parameter set for the deferred shader in ``glsl/lighting.frag`` and
``glsl/composite.frag``. Phrasings go into ``dataset.json`` and train text conditioning later.
The looks themselves are data, in ``styles.json`` (in ``to_json``'s form, with only the
parameters that differ from the defaults below); their order there is ``STYLE_NAMES``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from importlib import resources

Color = tuple[float, float, float]


@dataclass(frozen=True)
class Style:
    name: str
    description: str
    phrasings: tuple[str, ...]
    sun_elevation: float = 55.0          # degrees above the horizon
    sun_azimuth: float = 40.0            # degrees, counter-clockwise from +x
    sun_color: Color = (1.0, 0.96, 0.88)
    sun_intensity: float = 3.0
    sky_zenith: Color = (0.20, 0.42, 0.85)
    sky_horizon: Color = (0.65, 0.80, 0.95)
    ground_ambient: Color = (0.25, 0.22, 0.18)
    ambient_intensity: float = 0.8
    fill_color: Color = (0.0, 0.0, 0.0)  # second, shadowless directional light
    fill_direction: tuple[float, float] = (20.0, 220.0)   # elevation, azimuth (degrees)
    fog_color: Color = (0.70, 0.80, 0.92)
    fog_density: float = 0.01            # per metre
    fog_height_falloff: float = 0.0      # > 0: fog thins with height
    emissive_gain: float = 1.0
    bloom_strength: float = 0.25
    bloom_threshold: float = 1.0
    exposure: float = 1.0
    saturation: float = 1.0
    tint: Color = (1.0, 1.0, 1.0)
    contrast: float = 1.0
    shadow_softness: float = 1.0         # PCF radius in shadow-map texels
    shadow_strength: float = 1.0
    roughness_scale: float = 1.0         # < 1 gives a wet, glossy look
    snow: float = 0.0                    # coverage of up-facing surfaces
    stars: float = 0.0
    sun_disk: float = 1.0                # visibility of the sun/moon disk and halo in the sky
    toon_levels: int = 0                 # > 0: quantised cel shading
    outline: float = 0.0                 # strength of depth/normal edge lines
    vignette: float = 0.15

    def to_json(self) -> dict:
        d = asdict(self)
        params = {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()
                  if k not in ("name", "description", "phrasings")}
        return {"description": d.pop("description"), "phrasings": list(d.pop("phrasings")),
                "parameters": params}

    @classmethod
    def from_json(cls, name: str, d: dict) -> Style:
        """The style ``name`` from ``to_json``'s form; parameters left out keep their defaults."""
        params = {k: tuple(v) if isinstance(v, list) else v for k, v in d["parameters"].items()}
        return cls(name, d["description"], tuple(d["phrasings"]), **params)


STYLES: dict[str, Style] = {name: Style.from_json(name, d) for name, d in json.loads(
    resources.files("alaya.engine").joinpath("styles.json").read_text()).items()}

STYLE_NAMES = tuple(STYLES)


def get_style(name: str) -> Style:
    if name not in STYLES:
        raise KeyError(f"unknown style {name!r}; known styles: {', '.join(STYLE_NAMES)}")
    return STYLES[name]
