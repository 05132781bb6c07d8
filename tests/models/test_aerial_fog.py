"""The fog a start frame's floor shows, as a blend towards the fog's colour in linear light
(``alaya.models.aerial_fog``): it is learnt back from a fogged floor, it takes a wall's fog off
in the wall's own colours where the floor's offset per metre does not, and its bad input is
named."""

import numpy as np
import pytest

from alaya.data.walkable_region import WalkableRegion
from alaya.models.aerial_fog import AerialFog, learn_fog, to_linear, to_srgb
from alaya.models.region_floor import RegionFloor
from alaya.models.texture_tiles import DistanceHaze, learn_haze

FOG = np.array([0.95, 0.72, 0.55])       # a warm evening fog, sRGB
DENSITY = 0.03
LAWN = np.array([0.25, 0.42, 0.10])
BRICK = np.array([0.80, 0.25, 0.12])


def fogged(colours: np.ndarray, distance: np.ndarray, density: float = DENSITY) -> np.ndarray:
    """Colours (n, 3) sRGB seen ``distance`` (n,) metres away through a game's fog: blended in
    linear light, as a renderer blends before its output's gamma."""
    f = (1.0 - np.exp(-density * distance))[:, None]
    return to_srgb(to_linear(colours) * (1 - f) + to_linear(FOG) * f)


def lawn(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A grass floor's samples 1-20 m away, its grain +-0.05, through the fog: (distance, colours)."""
    rng = np.random.default_rng(seed)
    d = rng.uniform(1.0, 20.0, n)
    grain = np.clip(LAWN + rng.uniform(-0.05, 0.05, (n, 1)), 0, 1)
    return d, fogged(grain, d)


def test_srgb_and_linear_are_each_others_inverse():
    c = np.linspace(0.0, 1.0, 101)
    assert np.abs(to_srgb(to_linear(c)) - c).max() < 1e-9
    assert to_linear(0.5) == pytest.approx(0.214, abs=1e-3)


def test_apply_puts_back_what_clear_took_off():
    rng = np.random.default_rng(1)
    fog = AerialFog(DENSITY, FOG)
    near = rng.uniform(0.0, 1.0, (500, 3))
    d = rng.uniform(0.0, 40.0, 500)
    assert np.abs(fog.clear(fog.apply(near, d), d) - near).max() < 1e-4
    assert np.abs(fog.apply(near, np.zeros(500)) - near).max() < 1e-6       # no distance, no fog
    far = fog.apply(near, np.full(500, 1e6))                                   # infinitely far: the fog's colour
    assert np.abs(far - FOG).max() < 1e-4


def test_the_density_is_learnt_back_from_a_fogged_floor():
    d, colours = lawn(20000)
    for density in (0.0, 0.015, DENSITY, 0.06):
        fog = learn_fog(d, fogged(np.tile(LAWN, (len(d), 1)), d, density), FOG)
        assert fog is not None and abs(fog.density - density) <= 0.0025
    fog = learn_fog(d, colours, FOG)                                           # with the grain
    assert abs(fog.density - DENSITY) <= 0.005
    assert np.array_equal(fog.colour, FOG)


def test_a_red_wall_beyond_a_green_lawn_keeps_its_red():
    """The wall's fog taken off with the fog learnt from the lawn comes back within 0.02 of the
    brick's colour at 8-16 m; the lawn's offset per metre (``DistanceHaze``) turned it olive:
    it takes off what the lawn gained, towards a fog far from green, from a wall that gained
    much less."""
    d, colours = lawn(20000)
    fog = learn_fog(d, colours, FOG)
    haze = learn_haze(d, colours, d < 6.0)
    at = np.array([8.0, 12.0, 16.0])
    seen = fogged(np.tile(BRICK, (3, 1)), at)
    assert np.abs(fog.clear(seen, at) - BRICK).max() < 0.02
    assert isinstance(haze, DistanceHaze) and np.abs(haze.clear(seen, at) - BRICK).max() > 0.08


def test_too_little_floor_learns_no_fog_and_bad_input_is_named():
    d, colours = lawn(20000)
    assert learn_fog(d[:50], colours[:50], FOG) is None                       # under 20 samples a band
    near = d < 2.5
    assert learn_fog(d[near], colours[near], FOG) is None                     # two bands only
    with pytest.raises(ValueError, match="distance, colours"):
        learn_fog(d, colours[:, :2], FOG)
    assert learn_fog(np.full(100, np.nan), np.zeros((100, 3)), FOG) is None


def test_a_floor_given_the_fog_colour_learns_its_fog_and_one_without_its_offsets():
    """``RegionFloor.learn`` with a fog colour keeps an ``AerialFog`` for the walls; without one, or
    when its floor is too near for a density, the offsets per metre."""
    region = WalkableRegion(np.array([[-25.0, -25.0], [25.0, -25.0], [25.0, 25.0], [-25.0, 25.0]]))
    eye = np.array([0.0, 0.0, 1.4])
    x, y = np.meshgrid(np.arange(1.0, 20.0, 0.1), np.arange(-6.0, 6.0, 0.1))
    xyz = np.stack([x.ravel(), y.ravel(), np.zeros(x.size)])
    d = np.linalg.norm(xyz - eye[:, None], axis=0)
    rgb = (fogged(np.tile(LAWN, (x.size, 1)), d) * 255).round().astype(np.uint8)
    floor = RegionFloor(region, margin=0.5)
    floor.learn(xyz, rgb, eye, FOG)
    assert isinstance(floor.haze, AerialFog) and abs(floor.haze.density - DENSITY) <= 0.005
    floor.learn(xyz, rgb, eye)
    assert isinstance(floor.haze, DistanceHaze)
    close = d < 2.4
    floor.learn(xyz[:, close], rgb[close], eye, FOG)
    assert isinstance(floor.haze, DistanceHaze)


def test_a_session_shell_fogs_its_walls_with_the_sky_at_the_horizon_when_asked():
    """``memory_fog``: the shell's walls take the floor's ``AerialFog``, its colour the dome's
    horizon colour; off (as folders saved before it load), or without a dome, the offsets."""
    import torch
    from types import SimpleNamespace

    from alaya.models.region_shell import region_shell
    from alaya.models.sky_dome import SkyDome
    from alaya.models.view_warp import pinhole
    from alaya.models.world import WorldModelConfig
    region = WalkableRegion(np.array([[-25.0, -25.0], [25.0, -25.0], [25.0, 25.0], [-25.0, 25.0]]))
    eye = np.array([0.0, 0.0, 1.4])
    x, y = np.meshgrid(np.arange(1.0, 20.0, 0.1), np.arange(-6.0, 6.0, 0.1))
    xyz = np.stack([x.ravel(), y.ravel(), np.zeros(x.size)])
    rgb = (fogged(np.tile(LAWN, (x.size, 1)), np.linalg.norm(xyz - eye[:, None], axis=0)) * 255).round()
    view = torch.eye(4, dtype=torch.float64)
    view[:3, :3] = torch.tensor([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]], dtype=torch.float64)
    view[:3, 3] = -view[:3, :3] @ torch.tensor(eye)
    dome = SkyDome()
    K = pinhole(32, 50.0)
    sky = torch.zeros(32, 32, dtype=torch.bool)
    sky[:12] = True
    dome.insert(torch.tensor((FOG * 255).round(), dtype=torch.uint8).expand(32, 32, 3), sky, K, view.float())
    memory = SimpleNamespace(xyz=torch.from_numpy(xyz).float(), rgb=torch.from_numpy(rgb).to(torch.uint8), dome=dome)
    config = WorldModelConfig(memory_wall_margin=0.5, memory_floor=True, memory_fog=True)
    shell = region_shell(region, torch.eye(4, dtype=torch.float64), memory, config, view)
    assert isinstance(shell.walls.haze, AerialFog) and shell.walls.haze is shell.floor.haze
    assert np.abs(shell.walls.haze.colour * 255 - (FOG * 255).round()).max() <= 1.0
    assert abs(shell.walls.haze.density - DENSITY) <= 0.005
    off = WorldModelConfig(memory_wall_margin=0.5, memory_floor=True)
    no_dome = SimpleNamespace(xyz=memory.xyz, rgb=memory.rgb, dome=None)
    for plain in (region_shell(region, torch.eye(4, dtype=torch.float64), memory, off, view),
                  region_shell(region, torch.eye(4, dtype=torch.float64), no_dome, config, view)):
        assert isinstance(plain.walls.haze, DistanceHaze)
