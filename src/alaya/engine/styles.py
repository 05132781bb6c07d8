"""Named looks of the reference renderer, with the prompt phrasings that describe them.

Each :class:`Style` is a parameter set for the deferred shader in ``glsl/lighting.frag`` and
``glsl/composite.frag``. Phrasings go into ``dataset.json`` and train text conditioning later.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

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


STYLES: dict[str, Style] = {s.name: s for s in (
    Style("clear_noon", "bright midday sun, blue sky, crisp shadows",
          ("a clear sunny noon", "bright midday sunlight under a blue sky",
           "a sunny day with crisp shadows", "high noon, clear weather"),
          sun_elevation=62, sun_azimuth=35, sun_intensity=2.0, ambient_intensity=0.55,
          fog_density=0.006, exposure=0.9, saturation=1.1),
    Style("golden_sunset", "low warm sun, long shadows, orange sky",
          ("a golden sunset", "warm evening light at sunset",
           "the golden hour with long shadows", "sunset glow over the scene"),
          sun_elevation=9, sun_azimuth=200, sun_color=(1.0, 0.55, 0.25), sun_intensity=3.6,
          sky_zenith=(0.25, 0.22, 0.45), sky_horizon=(1.0, 0.55, 0.25),
          ground_ambient=(0.30, 0.16, 0.10), ambient_intensity=0.55,
          fog_color=(0.95, 0.55, 0.35), fog_density=0.02, tint=(1.08, 0.95, 0.85),
          bloom_strength=0.35, saturation=1.15),
    Style("moonlit_night", "cold moonlight, dark blue sky with stars",
          ("a moonlit night", "cold blue moonlight at night",
           "a starry night lit by the moon", "night time under a full moon"),
          sun_elevation=35, sun_azimuth=130, sun_color=(0.55, 0.65, 1.0), sun_intensity=0.9,
          sky_zenith=(0.01, 0.015, 0.05), sky_horizon=(0.04, 0.06, 0.14),
          ground_ambient=(0.02, 0.02, 0.04), ambient_intensity=0.5,
          fog_color=(0.03, 0.05, 0.10), fog_density=0.02, emissive_gain=1.5,
          bloom_strength=0.6, bloom_threshold=0.6, exposure=1.6, saturation=0.6,
          tint=(0.85, 0.95, 1.15), stars=1.0),
    Style("neon_night", "dark city night, glowing neon, magenta and cyan light, wet floors",
          ("a neon-lit night", "cyberpunk neon lights in the dark",
           "glowing neon colours at night", "a synthwave night with magenta and cyan light"),
          sun_elevation=25, sun_azimuth=300, sun_color=(1.0, 0.2, 0.8), sun_intensity=0.6,
          fill_color=(0.05, 0.45, 0.55), fill_direction=(15, 120),
          sky_zenith=(0.005, 0.0, 0.02), sky_horizon=(0.10, 0.01, 0.12),
          ground_ambient=(0.02, 0.01, 0.04), ambient_intensity=0.35,
          fog_color=(0.08, 0.01, 0.10), fog_density=0.03, emissive_gain=3.0,
          bloom_strength=1.0, bloom_threshold=0.5, exposure=1.2, saturation=1.3,
          roughness_scale=0.35, shadow_softness=2.0, sun_disk=0.0),
    Style("foggy_morning", "soft pale light in thick morning fog",
          ("a foggy morning", "thick mist in the early morning",
           "a hazy, misty dawn", "soft light through dense fog"),
          sun_elevation=18, sun_azimuth=80, sun_color=(1.0, 0.92, 0.80), sun_intensity=1.4,
          sky_zenith=(0.62, 0.66, 0.70), sky_horizon=(0.80, 0.82, 0.84),
          ground_ambient=(0.45, 0.45, 0.45), ambient_intensity=1.0,
          fog_color=(0.78, 0.80, 0.82), fog_density=0.09, fog_height_falloff=0.3,
          saturation=0.55, contrast=0.8, shadow_softness=3.0, shadow_strength=0.5,
          bloom_strength=0.1),
    Style("snowy_winter", "snow-covered ground and objects, cold bright overcast light",
          ("a snowy winter day", "everything covered in fresh snow",
           "a cold winter scene with snow", "a frosty, snow-covered landscape"),
          sun_elevation=24, sun_azimuth=250, sun_color=(0.95, 0.97, 1.0), sun_intensity=2.0,
          sky_zenith=(0.55, 0.65, 0.80), sky_horizon=(0.88, 0.90, 0.95),
          ground_ambient=(0.60, 0.62, 0.68),
          fog_color=(0.85, 0.88, 0.95), fog_density=0.03, snow=1.0, exposure=0.75,
          ambient_intensity=0.7,
          tint=(0.92, 0.97, 1.08), saturation=0.8, shadow_softness=2.0),
    Style("toon", "flat cel shading with bold black outlines",
          ("a cartoon with bold outlines", "cel-shaded toon style",
           "flat comic-book colours with black ink lines", "an anime-style cel-shaded look"),
          sun_elevation=50, sun_azimuth=60, sun_intensity=2.6, sky_zenith=(0.25, 0.55, 1.0),
          sky_horizon=(0.60, 0.85, 1.0), fog_density=0.0, toon_levels=3, outline=1.0,
          saturation=1.35, bloom_strength=0.0, vignette=0.0),
)}

STYLE_NAMES = tuple(STYLES)


def get_style(name: str) -> Style:
    if name not in STYLES:
        raise KeyError(f"unknown style {name!r}; known styles: {', '.join(STYLE_NAMES)}")
    return STYLES[name]
