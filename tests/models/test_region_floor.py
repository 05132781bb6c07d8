"""The walkable region's floor (``alaya.models.region_floor``): the start frame's floor texture
comes back, tiled in phase, where a view meets floor no frame showed; a grain floor keeps out
what lies on it; nothing is drawn above the horizon, beyond the walls or over nearer memory."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from alaya.data.walkable_region import WalkableRegion
from alaya.models.region_floor import RegionFloor
from alaya.models.texture_tiles import find_period
from alaya.models.view_warp import pinhole

SIZE = 64
EYE = 1.4
SQUARE = 0.5           # metres: the checker's squares (period 1 m along each axis)
REGION = WalkableRegion(np.array([[-4.0, -4.0], [4.0, -4.0], [4.0, 4.0], [-4.0, 4.0]]))


def view(yaw_degrees: float, pitch_degrees: float = 0.0, at=(0.0, 0.0)) -> torch.Tensor:
    """world_to_camera of a camera at (``at``, EYE) looking along yaw (z up), pitched up by pitch."""
    a, p = math.radians(yaw_degrees), math.radians(pitch_degrees)
    forward = np.array([math.cos(a) * math.cos(p), math.sin(a) * math.cos(p), math.sin(p)])
    right = np.array([math.sin(a), -math.cos(a), 0.0])
    up = np.cross(right, forward)
    R = np.stack([right, up, -forward])                  # camera x right, y up, looking down -z
    w2c = np.eye(4)
    w2c[:3, :3] = R
    w2c[:3, 3] = -R @ np.array([at[0], at[1], EYE])
    return torch.from_numpy(w2c)


def checker(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(N, 3) uint8: red and blue squares over the floor."""
    red = ((np.floor(x / SQUARE) + np.floor(y / SQUARE)) % 2 == 0)[:, None]
    return np.where(red, [[200, 40, 30]], [[30, 40, 200]]).astype(np.uint8)


def floor_points(x0=0.5, x1=5.5, y0=-3.0, y1=3.0, step=0.03):
    x, y = np.meshgrid(np.arange(x0, x1, step), np.arange(y0, y1, step))
    return np.stack([x.ravel(), y.ravel(), np.zeros(x.size)])


def empty_render():
    return torch.zeros(1, 3, SIZE, SIZE), torch.zeros(1, 1, SIZE, SIZE), torch.zeros(1, 1, SIZE, SIZE)


def floor_hits(w2c: torch.Tensor, K: torch.Tensor, size: int = SIZE):
    """(hit x, hit y, ray length to the floor, its depth along the view axis, pixel is looking
    down) per pixel (size, size)."""
    from alaya.models.sky_dome import pixel_directions
    d = pixel_directions(K, w2c, size, size).double().numpy()
    eye = -(w2c[:3, :3].T @ w2c[:3, 3]).numpy()
    t = np.where(d[2] < -1e-3, -EYE / np.minimum(d[2], -1e-3), np.inf)
    along = t * (-w2c[2, :3].numpy() @ d)
    return tuple(a.reshape(size, size) for a in (eye[0] + t * d[0], eye[1] + t * d[1], t, along, d[2] < -1e-3))


@pytest.fixture()
def floor() -> RegionFloor:
    """A checker floor seen ahead (+x) from (0, 0, EYE), walls 0.5 m beyond a 8 x 8 m region."""
    f = RegionFloor(REGION, margin=0.5)
    xyz = floor_points()
    assert f.learn(xyz, checker(xyz[0], xyz[1]), np.array([0.0, 0.0, EYE]))
    return f


def test_the_checker_comes_back_in_phase_behind_the_camera(floor):
    assert all(abs(p - 2 * SQUARE) < 0.005 for p in floor.periods)
    K = pinhole(SIZE, 70.0)
    w2c = view(180.0, -35.0, at=(1.0, 0.3))                  # turned round: floor no point showed
    rgb, cov, depth = floor.draw(*empty_render(), K, w2c)
    x, y, t, along, down = floor_hits(w2c, K)
    inside = down & (np.abs(x) < 4.5) & (np.abs(y) < 4.5)
    assert inside.sum() > SIZE * SIZE * 0.5
    got = cov[0, 0].numpy() > 0
    assert got[inside].all() and not got[~down].any()
    assert np.abs(depth[0, 0].numpy()[inside] - along[inside]).max() < 1e-3
    # its colour: the checker at the hit point (nearest texel at the finest mip level: near
    # pixels away from the squares' edges)
    edge = np.minimum(np.abs((x / SQUARE + 0.5) % 1 - 0.5), np.abs((y / SQUARE + 0.5) % 1 - 0.5)) * SQUARE
    near = inside & (t < 2.2) & (edge > 2 * floor.texel)
    assert near.sum() > 200
    true = checker(x[near], y[near]).astype(np.float32) / 255
    drawn = rgb[0].permute(1, 2, 0).numpy()[near]
    assert (np.abs(drawn - true).max(1) < 0.1).mean() > 0.95


def test_nothing_beyond_the_walls_above_the_horizon_or_over_nearer_memory(floor):
    K = pinhole(SIZE, 70.0)
    w2c = view(0.0, 0.0)                                     # level: the horizon across the middle
    rgb, cov, depth = empty_render()
    rgb[:, 1], cov[:], depth[:] = 1.0, 1.0, 30.0             # a far backdrop everywhere ...
    depth[..., :, : SIZE // 2] = 1.0                         # ... but a body 1 m ahead on the left
    out_rgb, out_cov, out_depth = floor.draw(rgb, cov, depth, K, w2c)
    changed = (out_rgb != rgb).any(1)[0].numpy()
    x, y, t, along, down = floor_hits(w2c, K)
    assert changed.any() and not changed[~down].any() and not changed[:, : SIZE // 2].any()
    assert (np.abs(x[changed]) <= 4.5 + 1e-6).all()         # the walls stand at 4.5 m
    assert not changed[down & (x > 4.6)].any()
    assert rgb[0, 1].eq(1.0).all()                           # the input is not written


def test_a_grain_floor_leaves_out_what_lies_on_it():
    rng = np.random.default_rng(0)
    xyz = floor_points()
    sand = np.clip(rng.normal([200, 170, 120], 12, (xyz.shape[1], 3)), 0, 255).astype(np.uint8)
    box = np.abs(xyz[0] - 2.0) + np.abs(xyz[1]) < 0.6        # a blue box's top, 0.3 m up, in the best-seen stretch
    xyz[2, box] = 0.3
    sand[box] = [20, 30, 230]
    f = RegionFloor(REGION, margin=0.5)
    assert f.learn(xyz, sand, np.array([0.0, 0.0, EYE])) and f.periods == (None, None)
    rgb, cov, _ = f.draw(*empty_render(), pinhole(SIZE, 70.0), view(90.0, -30.0))
    drawn = rgb[0].permute(1, 2, 0).numpy()[cov[0, 0].numpy() > 0]
    assert len(drawn) > 500 and (drawn[:, 2] < 0.7).all() and abs(drawn[:, 0].mean() - 200 / 255) < 0.03


def test_period_search_and_bad_input():
    x = np.random.default_rng(1).uniform(0, 6, 20000)
    y = np.random.default_rng(2).uniform(0, 6, 20000)
    assert abs(find_period(x, y, (np.floor(x / 0.35) % 2).astype(float), 0.05) - 0.7) < 0.005
    assert find_period(x, y, np.random.default_rng(3).random(20000), 0.05) is None
    f = RegionFloor(REGION)
    assert not f.learn(np.zeros((3, 10)), np.zeros((10, 3), np.uint8), np.array([0.0, 0.0, EYE]))
    assert not f.learn(np.full((3, 10), 5.0), np.zeros((10, 3), np.uint8), np.array([0.0, 0.0, EYE]))   # none low
    assert not f.learn(np.zeros((3, 0)), np.zeros((0, 3), np.uint8), np.array([0.0, 0.0, EYE]))         # none at all
    r = empty_render()
    assert all(a is b for a, b in zip(f.draw(*r, pinhole(SIZE, 70.0), view(0.0, -30.0)), r))
    for name in ("margin", "texel", "eye_height", "reach", "window"):
        with pytest.raises(ValueError, match=name):
            RegionFloor(REGION, **{name: -1.0})
    with pytest.raises(ValueError, match="xyz"):
        f.learn(np.zeros((2, 10)), np.zeros((10, 3), np.uint8), np.zeros(3))


def test_depth_at_is_where_the_floor_is_drawn(floor):
    K = pinhole(SIZE, 70.0)
    for w2c in (view(180.0, -35.0, at=(1.0, 0.3)), view(0.0, 0.0), view(90.0, -10.0)):
        _, cov, depth = floor.draw(*empty_render(), K, w2c)
        at = floor.depth_at(K, w2c, SIZE, SIZE)
        assert at.shape == (SIZE, SIZE)
        drawn = cov[0, 0].numpy() > 0
        assert drawn.any() and np.array_equal(at > 0, drawn)
        assert np.abs(at[drawn] - depth[0, 0].numpy()[drawn]).max() < 1e-4
    assert not floor.depth_at(K, view(0.0, 20.0), SIZE, SIZE).any()   # up: its floor lies past the walls
    assert not RegionFloor(REGION).depth_at(K, view(0.0, -30.0), SIZE, SIZE).any()   # none learnt: none


def test_a_generated_frame_keeps_out_of_the_memory_what_lies_on_the_drawn_shell(floor):
    """``generated_insert(drawn_shell=)``: pixels whose generated depth is the floor's (or, within
    ``SHELL_SLACK``, nearer) go in as nothing; a body standing on it, and pixels the floor does
    not reach, go in."""
    from alaya.models.memory_conditioning import SHELL_SLACK, encode_depth, generated_insert
    K = pinhole(SIZE, 70.0)
    w2c = view(0.0, -20.0)
    at = torch.from_numpy(floor.depth_at(K, w2c, SIZE, SIZE)).float()
    on = at > 0
    assert on[-1].all() and not on[0].any()
    depth = torch.where(on, at * (1 - SHELL_SLACK / 2), torch.full_like(at, 20.0))   # the floor, a little short
    depth[:, : SIZE // 4] = torch.where(on[:, : SIZE // 4], at[:, : SIZE // 4] * 0.6, depth[:, : SIZE // 4])   # a body on it
    image = torch.rand(5, SIZE, SIZE)
    image[3] = encode_depth(depth)
    args = (image, K, w2c.float(), None, False, 0.0, 0.5)
    _, plain, _ = generated_insert(*args)
    _, kept, _ = generated_insert(*args, drawn_shell=at)
    assert (plain > 0).all()
    body = torch.zeros(SIZE, SIZE, dtype=torch.bool)
    body[:, : SIZE // 4] = True
    assert (kept[on & ~body] == 0).all()                       # on the floor: left out
    assert (kept[on & body] > 0).all()                         # the body: in
    torch.testing.assert_close(kept[~on], plain[~on])          # no floor there: as without
    with pytest.raises(ValueError, match="drawn_shell"):
        generated_insert(*args, drawn_shell=at[:-1])


def test_a_session_turned_round_shows_the_floor_it_never_saw():
    """``memory_floor``: a session whose start frame shows a checker floor ahead, turned round
    (180 degrees), shows floor of both colours in the lower half at the floor's depth, and keeps
    no generated pixels there in its memory; without it, not."""
    from alaya.runtime.world_session import SKY_BELOW_WALLS, WorldSession
    from test_wall_sessions import _Turn
    from tiny_memory import still_model
    start = view(0.0, -20.0)
    K = pinhole(32, 50.0)
    x, y, t, along, down = floor_hits(start, K, 32)
    depth = np.where(down & (t < 5.8), along, 0.0).astype(np.float32)
    frame = np.where(depth[..., None] > 0, checker(np.where(down, x, 0).ravel(), np.where(down, y, 0).ravel()).reshape(32, 32, 3), 220).astype(np.uint8)
    shown, far, points = {}, {}, {}
    for on in (True, False):
        model = still_model()
        model.config = dataclasses.replace(model.config, memory_floor=on, memory_sky_dome=True,
                                           memory_sky_depth=25.0, memory_sky_extend=True)
        session = WorldSession(model, size=32, backend="torch", camera_motion=_Turn(), region=REGION)
        session.reset(frame, depth=depth, view=start.numpy(), pitch=-20.0)
        for _ in range(18):
            out = session.step(np.zeros(8, np.float32))
        shown[on], far[on] = out.astype(np.float32), session._depth.numpy()
        points[on] = session.memory.xyz.shape[1]
        assert session.memory.dome.extend_to == (SKY_BELOW_WALLS if on else 0.0)   # the sky below the horizon: beyond the walls
    low = shown[True][24:]
    assert (low[..., 0] > 150).mean() > 0.2 and (low[..., 2] > 150).mean() > 0.2     # red and blue squares
    assert np.abs(shown[True][24:] - shown[False][24:]).mean() > 30
    assert (far[True][24:] > 0).all() and far[True][24:].max() < 6.0
    assert points[True] < points[False]       # the floor is drawn each frame, its pixels not stored


def test_a_session_keeps_what_its_network_replaced_on_the_floor_out_of_its_memory():
    """A network whose gate replaces everything the memory shows (so every generated pixel may go
    into the memory): turned round, the floor it is shown is drawn, and none of the points its
    frames add lie on the floor; with the session's drawn depth withheld, many do."""
    from alaya.runtime.world_session import WorldSession
    from test_wall_sessions import _Turn
    from tiny_memory import still_model
    start = view(0.0, -20.0)
    K = pinhole(32, 50.0)
    x, y, t, along, down = floor_hits(start, K, 32)
    depth = np.where(down & (t < 5.8), along, 0.0).astype(np.float32)
    frame = np.where(depth[..., None] > 0, checker(np.where(down, x, 0).ravel(), np.where(down, y, 0).ravel()).reshape(32, 32, 3), 220).astype(np.uint8)
    on_floor = {}
    for withheld in (False, True):
        model = still_model()
        with torch.no_grad():
            model.core.out.bias[64:] = -1e6                  # the gate replaces the memory everywhere
        model.config = dataclasses.replace(model.config, memory_floor=True)
        session = WorldSession(model, size=32, backend="torch", camera_motion=_Turn(), region=REGION)
        session.reset(frame, depth=depth, view=start.numpy(), pitch=-20.0)
        if withheld:
            session._shell.drawn_depth = lambda *a: None
        first = session.memory.xyz.shape[1]                  # the start frame's points come first
        for _ in range(18):
            session.step(np.zeros(8, np.float32))
        R = session._to_region.double()
        xyz = (R[:3, :3] @ session.memory.xyz.double() + R[:3, 3:]).numpy()[:, first:]
        inside = (np.abs(xyz[:2]) < 4.0).all(0)                # the region (its walls 0.6 m out)
        on_floor[withheld] = int((inside & (np.abs(xyz[2] - session._shell.floor.height) < 0.05)).sum())
    assert on_floor[False] == 0 and on_floor[True] > 50


def value_noise(x: np.ndarray, y: np.ndarray, scale: float, seed: int = 0) -> np.ndarray:
    """A smooth random grain (bilinear value noise on a ``1 / scale``-metre lattice), as the engine's
    grass and sand: it matches itself at short shifts but has no period."""
    lattice = np.random.default_rng(seed).random((64, 64))
    u, v = x * scale + 20, y * scale + 20
    i, j = np.floor(u).astype(int), np.floor(v).astype(int)
    fu, fv = u - i, v - j
    return ((1 - fu) * (1 - fv) * lattice[j, i] + fu * (1 - fv) * lattice[j, i + 1]
            + (1 - fu) * fv * lattice[j + 1, i] + fu * fv * lattice[j + 1, i + 1])


def test_a_period_sampled_on_a_lattice_coarser_than_the_search_grid_is_found_whole():
    """Samples on a regular lattice (a wall seen far away: a pixel every 5 to 16 cm) of a 0.96 m
    checker: the period found is 0.96 m, not a half or a third of it (left empty, the fine grid's
    cells between samples matched the texture to itself moved by a part of its period)."""
    for spacing in (0.04, 0.05, 0.07, 0.12, 0.16):
        u, z = np.meshgrid(np.arange(-5.0, 5.0, spacing), np.arange(0.06, 2.5, spacing))
        u, z = u.ravel(), z.ravel()
        lum = ((np.floor(u / 0.48) + np.floor(z / 0.48)) % 2).astype(float)
        assert abs(find_period(u, z, lum, 0.04) - 0.96) < 0.03, spacing


def test_a_smooth_grain_has_no_period_and_a_fogged_pattern_keeps_its_own():
    rng = np.random.default_rng(4)
    x, y = rng.uniform(0, 6, 30000), rng.uniform(0, 5, 30000)
    for scale in (1.5, 3.0):
        assert find_period(x, y, value_noise(x, y, scale), 0.05) is None
        assert find_period(y, x, value_noise(x, y, scale), 0.05) is None
    # stripes of 0.8 m whose colour drifts with distance (fog) by more than their contrast
    stripes = (np.floor(x / 0.4) % 2) * 0.2 + 0.1 * x
    assert abs(find_period(x, y, stripes, 0.05) - 0.8) < 0.01
    assert find_period(y, x, stripes, 0.05) is None


def test_a_jump_does_not_lift_the_floor(floor):
    """The floor stays at the start camera's foot: from 0.6 m higher, its depth grows by (1.4 + 0.6) / 1.4."""
    K = pinhole(SIZE, 70.0)
    low = view(180.0, -35.0)
    high = low.clone()
    high[:3, 3] = -high[:3, :3] @ torch.tensor([0.0, 0.0, EYE + 0.6], dtype=torch.float64)
    d_low = floor.draw(*empty_render(), K, low)[2][0, 0]
    d_high = floor.draw(*empty_render(), K, high)[2][0, 0]
    both = (d_low > 0) & (d_high > 0)
    assert both.sum() > 500
    assert torch.allclose(d_high[both] / d_low[both], torch.tensor((EYE + 0.6) / EYE), rtol=1e-4)
