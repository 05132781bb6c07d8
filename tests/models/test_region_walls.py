"""The walkable region's border as walls (``alaya.models.region_walls``): a seen wall's texture
comes back where a view meets that wall, a wall never seen borrows it, and nothing is drawn over
the floor, above the wall's top or over memory nearer than the wall."""

import math

import numpy as np
import pytest
import torch

from alaya.data.walkable_region import WalkableRegion
from alaya.models import region_walls
from alaya.models.region_shell import coarse_points
from alaya.models.region_walls import RegionWalls, WallTexture, texel_colours
from alaya.models.view_warp import pinhole
from wall_views import EYE, SQUARE, checker, level_view

SIZE = 64
@pytest.fixture()
def walls() -> RegionWalls:
    """A 4 x 4 m region, walls 0.5 m beyond it; the points show the wall at x = +2.5 (1.8 m high)."""
    w = RegionWalls(WalkableRegion(np.array([[-2.0, -2.0], [2.0, -2.0], [2.0, 2.0], [-2.0, 2.0]])), margin=0.5)
    y, z = np.meshgrid(np.arange(-2.5, 2.5, 0.03), np.arange(0.06, 1.8, 0.03))
    xyz = np.stack([np.full(y.size, 2.5), y.ravel(), z.ravel()])
    assert w.learn(xyz, checker(y.ravel(), z.ravel())) == 1
    return w


def empty_render():
    return torch.zeros(1, 3, SIZE, SIZE), torch.zeros(1, 1, SIZE, SIZE), torch.zeros(1, 1, SIZE, SIZE)


def wall_pixels(view: torch.Tensor, K: torch.Tensor, distance: float, top: float, slack: float = -0.02) -> np.ndarray:
    """(H, W) bool: the pixels whose ray meets the plane ``distance`` ahead between the floor and
    ``top`` (each bound moved out by ``slack`` metres: < 0 in from the edges' rounding, > 0 out)."""
    v, u = np.meshgrid(np.arange(SIZE) + 0.5, np.arange(SIZE) + 0.5, indexing="ij")
    y_cam = -(v - K[1, 2].item()) / K[1, 1].item()          # height per metre ahead, camera y up
    z = EYE + distance * y_cam
    return (z > -slack) & (z < top + slack)


def test_a_seen_wall_comes_back_where_the_view_meets_it(walls):
    K = pinhole(SIZE, 70.0)
    view = level_view(0.0)                                   # looking along +x, at the seen wall
    rgb, cov, depth = walls.draw(*empty_render(), K, view)
    top = walls.walls[0].top if walls.walls[0].points else max(w.top for w in walls.walls)
    expect = wall_pixels(view, K, 2.5, top)
    got = cov[0, 0].numpy() > 0
    assert expect.sum() > SIZE * SIZE * 0.3
    assert got[expect].all() and not got[~wall_pixels(view, K, 2.5, top, slack=0.06)].any()
    assert torch.allclose(depth[0, 0][torch.from_numpy(expect)], torch.tensor(2.5, dtype=torch.float32), atol=1e-4)
    # the colour is the checker where the ray meets the wall (nearest texel: all but the squares' edges)
    v, u = np.meshgrid(np.arange(SIZE) + 0.5, np.arange(SIZE) + 0.5, indexing="ij")
    along = -2.5 * (u - K[0, 2].item()) / K[0, 0].item()      # looking along +x, camera right is -y
    height = EYE - 2.5 * (v - K[1, 2].item()) / K[1, 1].item()
    # (a texel's colour is the mean of its points: away from the squares' edges by more than a texel)
    edge_u = np.abs((along / SQUARE + 0.5) % 1 - 0.5) * SQUARE
    edge_z = np.abs((height / SQUARE + 0.5) % 1 - 0.5) * SQUARE
    inner = expect & (edge_u > walls.texel) & (edge_z > walls.texel)
    assert inner.sum() > 100
    true = checker(along[inner], height[inner]).astype(np.float32) / 255
    drawn = rgb[0].permute(1, 2, 0).numpy()[inner]
    assert (np.abs(drawn - true).max(1) < 0.05).mean() > 0.95


def test_a_wall_never_seen_borrows_the_seen_texture_and_top(walls):
    K = pinhole(SIZE, 70.0)
    seen = walls.walls[[w.points > 0 for w in walls.walls].index(True)]
    for yaw in (90.0, 180.0, 270.0):
        rgb, cov, depth = walls.draw(*empty_render(), K, level_view(yaw))
        expect = wall_pixels(level_view(yaw), K, 2.5, seen.top)
        assert (cov[0, 0].numpy() > 0)[expect].all()
        colours = rgb[0].permute(1, 2, 0).numpy()[expect]
        assert (colours[:, 0] > 0.6).mean() > 0.3 and (colours[:, 2] > 0.6).mean() > 0.3   # red and blue squares


def test_without_borrow_a_wall_never_seen_is_not_drawn(walls):
    K = pinhole(SIZE, 70.0)
    own = RegionWalls(WalkableRegion(np.array([[-2.0, -2.0], [2.0, -2.0], [2.0, 2.0], [-2.0, 2.0]])), margin=0.5,
                      borrow=False)
    y, z = np.meshgrid(np.arange(-2.5, 2.5, 0.03), np.arange(0.06, 1.8, 0.03))
    assert own.learn(np.stack([np.full(y.size, 2.5), y.ravel(), z.ravel()]), checker(y.ravel(), z.ravel())) == 1
    assert own.draw(*empty_render(), K, level_view(180.0))[1].sum() == 0
    seen = own.draw(*empty_render(), K, level_view(0.0))
    assert torch.equal(seen[0], walls.draw(*empty_render(), K, level_view(0.0))[0])   # the seen wall as before


def test_nearer_memory_stays_and_memory_beyond_the_wall_gives_way(walls):
    K = pinhole(SIZE, 70.0)
    rgb, cov, depth = empty_render()
    rgb[:, 1] = 1.0
    cov[:] = 1.0
    depth[..., :, : SIZE // 2] = 1.5                         # nearer than the wall: a body in front
    depth[..., :, SIZE // 2:] = 9.0                          # beyond it: the memory's far field
    out_rgb, out_cov, out_depth = walls.draw(rgb, cov, depth, K, level_view(0.0))
    wall = torch.from_numpy(wall_pixels(level_view(0.0), K, 2.5, walls.walls[0].top))
    left, right = wall.clone(), wall.clone()
    left[:, SIZE // 2:] = False
    right[:, : SIZE // 2] = False
    assert torch.equal(out_rgb[0][:, left], rgb[0][:, left]) and (out_depth[0, 0][left] == 1.5).all()
    assert (out_depth[0, 0][right] - 2.5).abs().max() < 1e-4 and (out_rgb[0, 1][right] < 1.0).all()
    assert out_rgb is not rgb and rgb[0, 1].eq(1.0).all()     # the input is not written


def test_magnified_memory_on_the_wall_gives_way_and_a_body_in_front_stays(walls):
    """Where the memory's points are coarse (``coarse_points``: a far-seen wall walked up to), a
    seen wall is drawn over those on it (within ``BEYOND``); a body in front of it, the points that
    are not coarse and those on a wall that borrowed its texture stay."""
    K = pinhole(SIZE, 70.0)
    rgb, cov, depth = empty_render()
    rgb[:, 1] = 1.0
    cov[:] = 1.0
    depth[:] = 2.5 + 0.3                                     # points on the wall (a terrain's bump off it)
    depth[..., :, : SIZE // 4] = 1.5                         # a body 1 m in front of the wall
    extent = torch.ones(1, 1, SIZE, SIZE)
    extent[..., :, SIZE // 2:] = 6.0                         # the right half magnified six times
    coarse = coarse_points(extent, above=3.0)
    assert coarse[..., :, SIZE // 2 - 2:].all() and not coarse[..., :, : SIZE // 2 - 2].any()   # grown by 2 px
    wall = torch.from_numpy(wall_pixels(level_view(0.0), K, 2.5, walls.walls[0].top))
    kept = walls.draw(rgb, cov, depth, K, level_view(0.0))              # no coarse mask: the memory stays
    assert torch.equal(kept[0], rgb)
    out_rgb, _, out_depth = walls.draw(rgb, cov, depth, K, level_view(0.0), coarse)
    drawn = wall & coarse[0, 0]
    assert drawn.sum() > 200 and (out_depth[0, 0][drawn] - 2.5).abs().max() < 1e-4
    assert (out_rgb[0, 1][drawn] < 1.0).all()
    assert torch.equal(out_rgb[0][:, ~coarse[0, 0]], rgb[0][:, ~coarse[0, 0]])   # the body and the fine points
    far = coarse.clone()
    depth_far = depth.clone()
    depth_far[..., :, SIZE // 2 - 2:] = 1.5                   # coarse, but a body in front of the wall
    assert torch.equal(walls.draw(rgb, cov, depth_far, K, level_view(0.0), far)[0], rgb)
    # a borrowed wall's texture is a guess: the points on it, magnified or not, are what was seen
    assert torch.equal(walls.draw(rgb, cov, torch.full_like(depth, 2.5), K, level_view(180.0), coarse)[0], rgb)


def test_depth_at_is_where_the_walls_are_drawn(walls):
    K = pinhole(SIZE, 70.0)
    for yaw in (0.0, 30.0, 135.0):
        _, cov, depth = walls.draw(*empty_render(), K, level_view(yaw))
        at = walls.depth_at(K, level_view(yaw), SIZE, SIZE)
        drawn = cov[0, 0].numpy() > 0
        assert at.shape == (SIZE, SIZE) and drawn.any() and np.array_equal(at > 0, drawn)
        assert np.abs(at[drawn] - depth[0, 0].numpy()[drawn]).max() < 1e-4
    region = WalkableRegion(np.array([[-2.0, -2.0], [2.0, -2.0], [2.0, 2.0], [-2.0, 2.0]]))
    assert not RegionWalls(region).depth_at(K, level_view(0.0), SIZE, SIZE).any()   # none learnt: none


def test_sharpening_restores_the_contrast_a_far_footprint_blurred():
    """``sharpened``: a flat texture stays; a step blurred over a texel (as a far pixel's
    footprint blurs a wall) comes back steeper, its mean kept; the columns tile (the texture does
    along its edge), so the last column's neighbour is the first."""
    from alaya.models.region_walls import sharpened
    flat = np.full((4, 6, 3), 0.4, np.float32)
    np.testing.assert_allclose(sharpened(flat, False, 1.0), flat, atol=1e-6)
    step = np.repeat(np.repeat(np.array([[0.2, 0.2, 0.4, 0.6, 0.8, 0.8, 0.6, 0.4]], np.float32), 4, 0)[..., None], 3, 2)
    sharp = sharpened(step, False, 1.0)
    assert sharp[0, 1, 0] < step[0, 1, 0] and sharp[0, 4, 0] > step[0, 4, 0]   # the dark side darker, the light lighter
    np.testing.assert_allclose(sharp[:, 2:4], step[:, 2:4], atol=1e-6)          # the even ramp between stays
    assert abs(sharp.mean() - step.mean()) < 1e-6
    assert sharp[0, 0, 0] < step[0, 0, 0]                      # beside the last column's 0.4 (tiled): darker
    assert np.array_equal(sharpened(step, False, 0.0), step)
    with pytest.raises(ValueError, match="sharpen"):
        RegionWalls(WalkableRegion(np.array([[-2.0, -2.0], [2.0, -2.0], [2.0, 2.0], [-2.0, 2.0]])), sharpen=-1.0)


def test_no_wall_seen_draws_nothing_and_bad_input_names_the_field():
    region = WalkableRegion(np.array([[-2.0, -2.0], [2.0, -2.0], [2.0, 2.0], [-2.0, 2.0]]))
    w = RegionWalls(region, margin=0.5)
    assert w.learn(np.zeros((3, 10)), np.zeros((10, 3), np.uint8)) == 0
    r = empty_render()
    assert all(a is b for a, b in zip(w.draw(*r, pinhole(SIZE, 70.0), level_view(0.0)), r))
    with pytest.raises(ValueError, match="margin"):
        RegionWalls(region, margin=-1.0)
    with pytest.raises(ValueError, match="texel"):
        RegionWalls(region, texel=0.0)
    with pytest.raises(ValueError, match="xyz"):
        w.learn(np.zeros((2, 10)), np.zeros((10, 3), np.uint8))


def test_a_repeating_wall_is_folded_into_one_period(walls):
    """The seen checker repeats every 2 squares along the edge: its points fold into one period
    of fine texels (the wall is too low for two periods up it: rows stay 0.12 m); with ``fold``
    off the texture spans the seen stretch."""
    seen = walls.walls[[w.points > 0 for w in walls.walls].index(True)]
    assert abs(seen.texels.shape[1] * seen.texel_u - 2 * SQUARE) < 0.02 and seen.texel_u < 0.05
    assert not seen.wrap_z and seen.texel_z == walls.texel
    plain = RegionWalls(WalkableRegion(np.array([[-2.0, -2.0], [2.0, -2.0], [2.0, 2.0], [-2.0, 2.0]])), margin=0.5,
                        fold=False)
    y, z = np.meshgrid(np.arange(-2.5, 2.5, 0.03), np.arange(0.06, 1.8, 0.03))
    plain.learn(np.stack([np.full(y.size, 2.5), y.ravel(), z.ravel()]), checker(y.ravel(), z.ravel()))
    unfolded = plain.walls[[w.points > 0 for w in plain.walls].index(True)]
    assert unfolded.texel_u == plain.texel and unfolded.texels.shape[1] * plain.texel > 4.0


FOG = np.array([0.95, 0.55, 0.35])      # the engine's golden-sunset fog colour, 0.02 a metre
FOG_DENSITY = 0.02


def fogged(colour: np.ndarray, distance: np.ndarray) -> np.ndarray:
    """``colour`` (N, 3) in [0, 1] seen ``distance`` (N,) metres away through the engine's fog."""
    f = 1.0 - np.exp(-FOG_DENSITY * distance)[:, None]
    return colour * (1 - f) + FOG * f


def test_the_haze_of_a_fogged_floor_is_its_colour_against_distance():
    from alaya.models.texture_tiles import learn_haze
    rng = np.random.default_rng(0)
    d = rng.uniform(1.0, 30.0, 20000)
    grey = np.full((d.size, 3), 0.3)
    near = d < 6.0
    haze = learn_haze(d, fogged(grey, d), near)
    for at in (3.0, 10.0, 20.0, 28.0):
        want = fogged(grey[:1], np.array([at]))[0] - fogged(grey[near], d[near]).mean(0)
        assert np.abs(haze.at([at])[0] - want).max() < 0.01
    far = haze.at([60.0])[0]                                   # past the bands: the last band's
    assert np.abs(far - haze.at([39.5])[0]).max() < 1e-6
    assert learn_haze(d, fogged(grey, d), d < 0.5) is None     # nothing near: no reference
    assert learn_haze(d[:30], fogged(grey, d)[:30], near[:30]) is None


def test_a_wall_seen_through_fog_is_drawn_near_in_its_own_colours():
    """A wall of dark and light grey squares seen 12 m away through the fog, and a grey floor seen
    1-11 m away (its haze: the floor's colour against distance): drawn from 2 m, the squares come
    back near their colours at 2 m; without the haze they keep 12 m of fog. (The haze is the
    floor's offset: exact for a wall of the floor's mean colour, approximate for others, since the
    game's fog blends towards its colour rather than adding to it.)"""
    from alaya.models.region_floor import RegionFloor
    region = WalkableRegion(np.array([[-12.0, -6.0], [11.5, -6.0], [11.5, 6.0], [-12.0, 6.0]]))
    eye = np.array([0.0, 0.0, EYE])
    y, z = np.meshgrid(np.arange(-5.0, 5.0, 0.03), np.arange(0.06, 2.5, 0.03))
    wall = np.stack([np.full(y.size, 12.0), y.ravel(), z.ravel()])
    fx, fy = np.meshgrid(np.arange(1.0, 11.5, 0.05), np.arange(-5.5, 5.5, 0.05))
    floor = np.stack([fx.ravel(), fy.ravel(), np.zeros(fx.size)])
    xyz = np.concatenate([wall, floor], 1)

    def squares(u, height):                                  # dark and light grey, their mean the floor's
        dark = ((np.floor(u / SQUARE) + np.floor(height / SQUARE)) % 2 == 0)[:, None]
        return np.where(dark, 0.2, 0.4) * np.ones((1, 3))

    true = np.concatenate([squares(y.ravel(), z.ravel()), np.full((fx.size, 3), 0.3)])
    seen = (fogged(true, np.linalg.norm(xyz - eye[:, None], axis=0)) * 255).round().astype(np.uint8)
    f = RegionFloor(region, margin=0.5)
    f.learn(xyz, seen, eye)
    assert f.haze is not None
    K = pinhole(SIZE, 70.0)
    view = level_view(0.0)
    view[:3, 3] = -view[:3, :3] @ torch.tensor([10.0, 0.0, EYE], dtype=torch.float64)   # 2 m from the wall
    v, u = np.meshgrid(np.arange(SIZE) + 0.5, np.arange(SIZE) + 0.5, indexing="ij")
    along = -2.0 * (u - K[0, 2].item()) / K[0, 0].item()      # looking along +x, camera right is -y
    height = EYE - 2.0 * (v - K[1, 2].item()) / K[1, 1].item()
    edge = np.minimum(np.abs((along / SQUARE + 0.5) % 1 - 0.5), np.abs((height / SQUARE + 0.5) % 1 - 0.5)) * SQUARE
    errors = {}
    for with_haze in (True, False):
        w = RegionWalls(region, margin=0.5)
        assert w.learn(xyz, seen, eye, f.haze if with_haze else None) == 1
        rgb, cov, _ = w.draw(*empty_render(), K, view)
        inner = (cov[0, 0].numpy() > 0) & (edge > 0.12)
        assert inner.sum() > 500
        ray = np.sqrt(4.0 + along[inner] ** 2 + (height[inner] - EYE) ** 2)
        want = fogged(squares(along[inner], height[inner]), ray)
        errors[with_haze] = np.abs(rgb[0].permute(1, 2, 0).numpy()[inner] - want).mean()
    assert errors[True] < 0.025 and errors[False] > 2 * errors[True]
    with pytest.raises(ValueError, match="eye"):
        RegionWalls(region).learn(xyz, seen, eye[:2], f.haze)


def test_a_texel_seen_wide_is_interpolated_and_one_seen_small_keeps_its_colour():
    """``texel_colours``: nearest, a texel's colour holds across it and steps at its edge; smooth,
    the colour runs linearly between neighbouring texels' centres (no block edges), equals each
    texel's own at its centre, and wraps along the wall and clamps at its bottom and top rows."""
    texels = np.zeros((2, 3, 3), np.float32)
    texels[:, 1] = 1.0                                     # columns 0 1 2: black white black, tiled
    texels[1, :, 0] = 0.5                                  # the top row redder
    wall = WallTexture(texels, u0=0.0, top=0.24, points=100, texel_u=0.12, texel_z=0.12, wrap_z=False)
    su = np.linspace(0.0, 3.0, 61)[:-1]
    sz = np.full_like(su, 0.5)
    crisp = texel_colours(wall, su, sz, np.zeros(len(su), bool))
    np.testing.assert_array_equal(crisp, texels[0, np.floor(su).astype(int)])
    smooth = texel_colours(wall, su, sz, np.ones(len(su), bool))
    assert np.abs(np.diff(smooth[:, 1])).max() <= 0.1 + 1e-6        # 1 / 20 of a texel a sample: no step
    centre = np.isclose(su % 1, 0.5)
    np.testing.assert_allclose(smooth[centre], texels[0, np.floor(su[centre]).astype(int)], atol=1e-6)
    np.testing.assert_allclose(smooth[su == 1.0, 1], 0.5, atol=1e-6)  # columns 0 | 1: halfway from black to white
    np.testing.assert_allclose(smooth[su == 0.0, 1], 0.0, atol=1e-6)  # columns 2 | 0 (tiled): black on both sides
    low, high = texel_colours(wall, np.array([1.5, 1.5]), np.array([-3.0, 9.0]), np.ones(2, bool))
    np.testing.assert_allclose(low, texels[0, 1]), np.testing.assert_allclose(high, texels[1, 1])


def test_a_wall_walked_up_to_is_drawn_without_block_edges(walls, monkeypatch):
    """Close up (the folded checker's 4 cm texels 3 pixels wide) the drawn wall's colour changes
    from pixel to pixel by a part of the checker's contrast; drawn nearest-texel it steps by all of it."""
    K, view = pinhole(SIZE, 70.0), level_view(0.0)
    view[:3, 3] = -view[:3, :3] @ torch.tensor([1.9, 0.0, EYE], dtype=view.dtype)   # 0.6 m from the seen wall

    def largest_step():
        rgb, cov, _ = walls.draw(*empty_render(), K, view)
        on = (cov[0, 0] > 0)[:, 1:] & (cov[0, 0] > 0)[:, :-1]
        assert on.float().mean() > 0.8
        return float((rgb[0, :, :, 1:] - rgb[0, :, :, :-1]).abs().amax(0)[on].max())

    assert largest_step() < 0.4
    monkeypatch.setattr(region_walls, "MAGNIFIED", math.inf)
    assert largest_step() > 0.6


def test_a_wall_of_one_flat_colour_is_learnt_without_a_period():
    """A plain painted wall has no luminance variance to find a period in (it once divided by zero)."""
    w = RegionWalls(WalkableRegion(np.array([[-2.0, -2.0], [2.0, -2.0], [2.0, 2.0], [-2.0, 2.0]])), margin=0.5)
    y, z = np.meshgrid(np.arange(-2.5, 2.5, 0.03), np.arange(0.06, 1.8, 0.03))
    xyz = np.stack([np.full(y.size, 2.5), y.ravel(), z.ravel()])
    assert w.learn(xyz, np.tile(np.array([[120, 200, 90]], np.uint8), (y.size, 1))) == 1
    assert not w.walls[0].wrap_z and np.allclose(w.walls[0].texels, [120 / 255, 200 / 255, 90 / 255], atol=1e-6)
