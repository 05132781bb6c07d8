"""The scene memory against the engine: what it stores, it shows again from where it was seen, hides
what is behind, forgets in order, and never grows past its capacity."""

import numpy as np
import pytest
import torch

from alaya.models.scene_memory import SceneMemory, SceneMemoryConfig
from memory_shots import SIZE, held_game, moved, psnr, shot


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def game():
    yield from held_game()


def seen_from(depth: np.ndarray, view: np.ndarray, depth_then: np.ndarray, view_then: np.ndarray,
              K: np.ndarray) -> torch.Tensor:
    """(1, H, W): the pixels of (depth, view) whose surface the camera (depth_then, view_then) saw
    too: they re-project into its frame within 3% of the depth it measured there."""
    H, W = depth.shape
    v, u = np.mgrid[0:H, 0:W] + 0.5
    d = depth.astype(np.float64)
    cam = np.stack([(u - K[0, 2]) / K[0, 0] * d, -(v - K[1, 2]) / K[1, 1] * d, -d, np.ones_like(d)], -1)
    then = cam @ np.linalg.inv(view).T @ np.asarray(view_then, np.float64).T
    z = np.maximum(-then[..., 2], 1e-6)
    x, y = K[0, 0] * then[..., 0] / z + K[0, 2], -K[1, 1] * then[..., 1] / z + K[1, 2]
    ok = (d > 0) & (-then[..., 2] > 0) & (x >= 0) & (x < W) & (y >= 0) & (y < H)
    i, j = np.clip(y, 0, H - 1).astype(int), np.clip(x, 0, W - 1).astype(int)
    return torch.from_numpy(ok & (np.abs(depth_then[i, j] - z) <= 0.03 * z))[None]


def test_standing_still_reproduces_the_frame(game):
    view, K = game.world_to_camera, game.K
    rgb, depth = shot(game, view)
    memory = SceneMemory()
    added = memory.insert(rgb, depth, K, view, time=0)
    assert added == int((depth > memory.config.near).sum()) == len(memory)
    out = memory.render(K, view, SIZE, SIZE)
    solid = torch.tensor(depth) > memory.config.near
    assert out.rgb.shape == (3, SIZE, SIZE) and out.coverage.shape == out.depth.shape == (1, SIZE, SIZE)
    assert out.coverage[0][solid].mean() == 1.0 and out.coverage[0][~solid].sum() == 0   # sky is not stored
    assert psnr(out.rgb, rgb, out.coverage) >= 35.0
    torch.testing.assert_close(out.depth[0][solid], torch.tensor(depth)[solid], rtol=1e-4, atol=1e-4)
    assert memory.insert(rgb, depth, K, view, time=1) == 0          # seen again: nothing new
    assert len(memory) == added and (memory.time == 1).all()       # ... but refreshed


def test_moving_sideways_and_back_returns_the_original(game):
    view, K = game.world_to_camera, game.K
    rgb, depth = shot(game, view)
    memory = SceneMemory()
    memory.insert(rgb, depth, K, view, time=0)
    side = moved(view, right=0.5)
    side_rgb, side_depth = shot(game, side)
    out = memory.render(K, side, SIZE, SIZE)
    seen = seen_from(side_depth, side, depth, view, K)             # what the memory can know
    assert seen.sum() > 0.5 * (side_depth > 0).sum()
    assert out.coverage[seen].min() == 1                           # no pinholes
    # parallax right: as close as a backward warp with the true depth (29.5 dB; edges and the
    # renderer's screen-space noise differ)
    assert psnr(out.rgb, side_rgb, seen) >= 23.0
    assert psnr(out.rgb, side_rgb, out.coverage) >= 20.0
    back = memory.render(K, view, SIZE, SIZE)                      # back: the frame it saw
    assert psnr(back.rgb, rgb, back.coverage) > 60.0
    memory.insert(side_rgb, side_depth, K, side, time=1)           # the side view remembered too:
    back = memory.render(K, view, SIZE, SIZE)                      # a few silhouette pixels differ
    assert psnr(back.rgb, rgb, back.coverage) >= 30.0
    assert back.coverage[0][torch.tensor(depth) > memory.config.near].mean() > 0.999


def test_walking_up_to_what_it_saw_leaves_no_holes(game):
    """Points grow with the projection of their surface: a floor seen at a grazing angle, walked
    up to, stays closed (a point's fixed round size would open stripes across it)."""
    view, K = game.world_to_camera, game.K
    rgb, depth = shot(game, view)
    memory = SceneMemory()
    memory.insert(rgb, depth, K, view, time=0)
    for metres in (1.0, 3.0):
        ahead = np.eye(4)
        ahead[2, 3] = metres
        near = ahead @ view
        near_rgb, near_depth = shot(game, near)
        out = memory.render(K, near, SIZE, SIZE)
        seen = seen_from(near_depth, near, depth, view, K)
        assert seen.sum() > 0.5 * (near_depth > 0).sum()
        assert out.coverage[seen].min() == 1
        assert psnr(out.rgb, near_rgb, seen) >= 22.0


def test_a_render_says_how_magnified_its_points_are():
    """``MemoryView.extent``: about one pixel at the view that inserted a wall, four times that
    from four times nearer, 0 where no point lands."""
    from alaya.models.view_warp import pinhole
    K = pinhole(SIZE, 70.0)
    rgb = np.random.default_rng(0).integers(0, 255, (SIZE, SIZE, 3), dtype=np.uint8)
    depth = np.full((SIZE, SIZE), 8.0, np.float32)
    depth[:, : SIZE // 4] = 0                                 # no point there
    memory = SceneMemory()
    view = np.eye(4)
    memory.insert(rgb, depth, K, view, time=0)
    out = memory.render(K, view, SIZE, SIZE)
    assert out.extent.shape == (1, SIZE, SIZE)
    solid = out.coverage[0] > 0
    assert (out.extent[0][~solid] == 0).all() and ((out.extent[0][solid] - 1).abs() < 0.1).all()
    near = np.eye(4)
    near[2, 3] = 6.0                                          # 6 m ahead: the wall 2 m away
    out = memory.render(K, near, SIZE, SIZE)
    seen = out.coverage[0] > 0
    assert seen.float().mean() > 0.9 and ((out.extent[0][seen] - 4).abs() < 0.2).all()


def test_replace_shows_the_newest_frame_where_it_was_seen(game):
    view, K = game.world_to_camera, game.K
    side = moved(view, right=0.3)
    side_rgb, side_depth = shot(game, side)
    scores = {}
    for replace in (False, True):
        memory = SceneMemory(SceneMemoryConfig(replace=replace))
        memory.insert(*shot(game, view), K, view, time=0)
        memory.insert(side_rgb, side_depth, K, side, time=1)
        out = memory.render(K, side, SIZE, SIZE)
        scores[replace] = psnr(out.rgb, side_rgb, out.coverage)
        assert out.coverage[0][torch.tensor(side_depth) > 0].mean() > 0.85   # (new sights: next frame)
    assert scores[True] >= 33.0 > scores[False] + 8     # the first sight, re-sampled: ~21 dB


def test_turned_around_sees_nothing_until_it_turns_back(game):
    view, K = game.world_to_camera, game.K
    rgb, depth = shot(game, view)
    memory = SceneMemory()
    memory.insert(rgb, depth, K, view, time=0)
    for angle in (150, 180, 210):
        assert memory.render(K, moved(view, turn_degrees=angle), SIZE, SIZE).coverage.sum() == 0
    back = memory.render(K, moved(moved(view, turn_degrees=180), turn_degrees=180), SIZE, SIZE)
    assert psnr(back.rgb, rgb, back.coverage) >= 35.0
    assert back.coverage[0][torch.tensor(depth) > memory.config.near].mean() == 1.0


def test_a_half_turn_shows_the_side_still_in_view(game):
    view, K = game.world_to_camera, game.K
    memory = SceneMemory()
    memory.insert(*shot(game, view), K, view, time=0)
    half = memory.render(K, moved(view, turn_degrees=30), SIZE, SIZE).coverage[0]
    assert half[:, : SIZE // 4].sum() == 0 and half[:, -SIZE // 4:].mean() > 0.3   # turned left


def test_rendering_first_changes_nothing(game):
    """Play renders the memory where it then inserts the new frame; the insert reuses that
    projection, and the memory ends up the same as without the render."""
    view, K = game.world_to_camera, game.K
    views = [view, moved(view, right=0.3), moved(view, right=0.3, turn_degrees=20), moved(view, turn_degrees=-15)]
    a, b = SceneMemory(), SceneMemory()
    for t, v in enumerate(views):
        rgb, depth = shot(game, v)
        b.render(K, v, SIZE, SIZE)
        assert a.insert(rgb, depth, K, v, time=t) == b.insert(rgb, depth, K, v, time=t)
        b.render(K, view, SIZE, SIZE)                       # elsewhere: not reused
    for x, y in zip((a.xyz, a.rgb, a.time, a.tangents), (b.xyz, b.rgb, b.time, b.tangents)):
        assert torch.equal(x, y)


# -- synthetic scenes --------------------------------------------------------------------------

K8 = torch.tensor([[8.0, 0.0, 4.0], [0.0, 8.0, 4.0], [0.0, 0.0, 1.0]])


def colour(r: int, g: int, b: int, n: int = 8) -> torch.Tensor:
    return torch.tensor([r, g, b], dtype=torch.uint8).expand(n, n, 3).clone()


def at(x: float = 0.0, y: float = 0.0) -> torch.Tensor:
    """A camera at (x, y, 0) looking down world -z (the identity view, moved)."""
    m = torch.eye(4, dtype=torch.float64)
    m[0, 3], m[1, 3] = -x, -y
    return m


def test_a_near_point_hides_a_far_one():
    memory = SceneMemory()
    memory.insert(colour(255, 0, 0), torch.full((8, 8), 5.0), K8, at(), time=0)    # a far red wall
    depth, rgb = torch.full((8, 8), 5.0), colour(255, 0, 0)
    depth[2:6, 2:6], rgb[2:6, 2:6] = 2.0, torch.tensor([0, 255, 0], dtype=torch.uint8)
    memory.insert(rgb, depth, K8, at(), time=1)                                     # a green patch before it,
    memory.insert(rgb, depth, K8, at(), time=2)                                     # seen twice: it stays
    assert len(memory) == 64 + 16
    out = memory.render(K8, at(), 8, 8)
    assert (out.rgb[1, 2:6, 2:6] == 1).all() and (out.rgb[0, 2:6, 2:6] == 0).all()
    assert (out.depth[0, 2:6, 2:6] == 2.0).all() and (out.depth[0, 0] == 5.0).all()
    assert out.coverage.mean() == 1.0
    # from the side the patch moves more than the wall, and still hides what is behind it
    side = memory.render(K8, at(x=0.5), 8, 8)
    green, seen = side.rgb[1] > 0.5, side.coverage[0] > 0
    assert green.sum() == 16 and not green[:, 6:].any() and green[:, 0].any()
    assert (side.depth[0][green] == 2.0).all() and torch.allclose(side.depth[0][seen & ~green], torch.tensor(5.0))


def test_what_is_seen_behind_a_remembered_body_removes_it():
    memory = SceneMemory()
    near = torch.full((8, 8), 2.0)
    memory.insert(colour(0, 255, 0), near, K8, at(), time=0)
    memory.insert(colour(255, 0, 0), torch.full((8, 8), 5.0), K8, at(), time=1)   # it moved away
    assert len(memory) == 0                  # gone; what is behind it is added once seen twice
    memory.insert(colour(255, 0, 0), torch.full((8, 8), 5.0), K8, at(), time=2)
    out = memory.render(K8, at(), 8, 8)
    assert (out.depth[0] == 5.0).all() and (out.rgb[0] == 1).all()
    assert len(memory) == 64


def test_a_see_through_mask_limits_what_a_frame_may_remove():
    memory = SceneMemory(SceneMemoryConfig(see_through=False))
    memory.insert(colour(0, 255, 0), torch.full((8, 8), 2.0), K8, at(), time=0)
    far = torch.full((8, 8), 5.0)
    memory.insert(colour(255, 0, 0), far, K8, at(), time=1)
    assert len(memory) == 64                 # the config forbids removing
    mask = torch.zeros(8, 8, dtype=torch.bool)
    mask[:, :4] = True
    memory.insert(colour(255, 0, 0), far, K8, at(), time=2, see_through=mask)
    out = memory.render(K8, at(), 8, 8)
    assert (out.depth[0][:, 5:] == 2.0).all()           # outside the mask: kept
    assert (out.depth[0][:, :3] == 5.0).all()           # inside: removed, what lies behind shows
    with pytest.raises(ValueError, match="see_through"):
        memory.insert(colour(255, 0, 0), far, K8, at(), time=3, see_through=torch.ones(4, 4, dtype=torch.bool))


def test_fill_pinholes_fills_isolated_holes_only():
    from alaya.models.memory_geometry import fill_pinholes
    rgb = torch.rand(1, 3, 12, 12)
    depth = torch.full((1, 1, 12, 12), 3.0)
    cov = torch.ones(1, 1, 12, 12)
    cov[..., 5, 5] = 0                        # a pinhole
    cov[..., :, 9:] = 0                       # an uncovered strip, 3 wide
    rgb, depth = rgb * cov, depth * cov
    out_rgb, out_cov, out_depth = fill_pinholes(rgb, cov, depth, passes=2)
    assert out_cov[0, 0, 5, 5] == 1 and abs(float(out_depth[0, 0, 5, 5]) - 3.0) < 1e-5
    neighbours = rgb[0, :, 4:7, 4:7].sum((1, 2)) / 8
    torch.testing.assert_close(out_rgb[0, :, 5, 5], neighbours)
    assert (out_cov[..., :, 10:] == 0).all()  # a strip is not a pinhole: at most its border column fills
    torch.testing.assert_close(out_rgb * cov, rgb * cov)                       # covered pixels unchanged
    assert torch.equal(fill_pinholes(rgb, cov, depth, passes=0)[1], cov)       # 0 passes: off


def test_a_body_in_motion_is_not_remembered():
    wall, rgb = torch.full((8, 8), 5.0), colour(255, 0, 0)
    rgb[:, :2] = rgb[:, 4:6] = torch.tensor([0, 0, 255], dtype=torch.uint8)
    frames = []
    for left in (0, 4, 4):                     # a blue bar moves four pixels right, then rests
        depth = wall.clone()
        depth[:, left:left + 2] = 2.0
        frames.append(depth)
    memory = SceneMemory()
    memory.insert(rgb, frames[0], K8, at(), time=0)          # the first frame goes in whole
    memory.insert(rgb, frames[1], K8, at(), time=1)          # the bar moved: its old place is seen
    out = memory.render(K8, at(), 8, 8)                      # through, its new one not yet trusted
    assert out.depth.max() == 5.0 and out.coverage[0, :, :2].sum() == 0
    assert out.coverage[0, :, 2:].all()
    memory.insert(rgb, frames[2], K8, at(), time=2)          # at rest: remembered
    out = memory.render(K8, at(), 8, 8)
    assert (out.depth[0, :, 4:6] == 2.0).all() and (out.depth[0, :, :2] == 5.0).all()
    assert out.coverage.mean() == 1.0
    memory = SceneMemory(SceneMemoryConfig(confirm=False))   # without confirming: both at once
    memory.insert(rgb, frames[0], K8, at(), time=0)
    memory.insert(rgb, frames[1], K8, at(), time=1)
    assert (memory.render(K8, at(), 8, 8).depth[0, :, 4:6] == 2.0).all()


def test_points_behind_the_camera_are_not_drawn():
    memory = SceneMemory()
    memory.insert(colour(9, 9, 9), torch.full((8, 8), 1.0), K8, at(), time=0)
    behind = torch.eye(4, dtype=torch.float64)
    behind[2, 3] = 3.0                                    # the camera 3 m past the points, facing on
    assert memory.render(K8, behind, 8, 8).coverage.sum() == 0
    assert memory.render(K8, at(), 16, 16).coverage.sum() > 0   # any size renders


def test_capacity_is_never_exceeded():
    memory = SceneMemory(SceneMemoryConfig(max_points=100, confirm=False))
    rng = np.random.default_rng(0)
    for t in range(12):
        depth = rng.uniform(1.0, 10.0, (8, 8))
        rgb = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
        memory.insert(rgb, depth, K8, at(x=0.3 * t), time=t)
        assert len(memory) <= 100
        assert memory.nbytes == 31 * len(memory)
    assert len(memory) == 100


def test_eviction_drops_the_oldest_and_the_farthest_first():
    c = SceneMemoryConfig(max_points=128, max_distance=100.0, max_age=150.0, confirm=False)
    memory = SceneMemory(c)
    for t, x in ((0, 0.0), (50, 10.0), (100, 5.0)):      # three walls side by side, 64 points each
        memory.insert(colour(0, 0, 0), torch.full((8, 8), 3.0), K8, at(x=x), time=t)
    assert len(memory) == 128                            # the first two equally far from x = 5:
    assert memory.time.unique().tolist() == [50.0, 100.0]   # the oldest went first
    memory = SceneMemory(c)
    for x in (0.0, 30.0, 10.0):                          # same time: the farthest from (10, 0, 0) goes
        memory.insert(colour(0, 0, 0), torch.full((8, 8), 3.0), K8, at(x=x), time=0)
    assert memory.xyz[0].min() > -5 and memory.xyz[0].max() < 20
    # beyond max_age or max_distance, points go whatever the room
    memory = SceneMemory(SceneMemoryConfig(max_age=5.0, max_distance=50.0, confirm=False))
    memory.insert(colour(0, 0, 0), torch.full((8, 8), 3.0), K8, at(), time=0)
    memory.insert(colour(0, 0, 0), torch.full((8, 8), 3.0), K8, at(x=10.0), time=6)
    assert memory.time.unique().tolist() == [6.0]
    memory.insert(colour(0, 0, 0), torch.full((8, 8), 3.0), K8, at(x=100.0), time=7)
    assert memory.time.unique().tolist() == [7.0]
    assert memory.evict(at(x=200.0), time=8) == 64 and len(memory) == 0


def test_stride_subsamples_and_grows_the_points():
    memory = SceneMemory(SceneMemoryConfig(stride=2))
    assert memory.insert(colour(50, 60, 70), torch.full((8, 8), 4.0), K8, at(), time=0) == 16
    out = memory.render(K8, at(), 8, 8)
    assert out.coverage.mean() == 1.0


BAD = [
    ("rgb", dict(rgb=torch.zeros(8, 7, 3)), "rgb: expected"),
    ("rgb int", dict(rgb=torch.zeros(8, 8, 3, dtype=torch.int32)), "rgb: expected uint8"),
    ("rgb NaN", dict(rgb=torch.full((8, 8, 3), float("nan"))), "rgb: NaN"),
    ("depth shape", dict(depth=torch.ones(8)), r"depth: expected shape \(H, W\)"),
    ("depth NaN", dict(depth=torch.full((8, 8), float("nan"))), "depth: NaN"),
    ("depth negative", dict(depth=-torch.ones(8, 8)), "depth: negative"),
    ("K shape", dict(K=torch.eye(4)), r"K: expected shape \(3, 3\)"),
    ("K zero focal", dict(K=torch.tensor([[0.0, 0, 4], [0, 8, 4], [0, 0, 1]])), "K: focal"),
    ("K negative focal", dict(K=torch.tensor([[8.0, 0, 4], [0, -8, 4], [0, 0, 1]])), "K: focal"),
    ("K NaN", dict(K=torch.full((3, 3), float("nan"))), "K: NaN"),
    ("view", dict(world_to_camera=2 * torch.eye(4)), "world_to_camera: not a rigid"),
    ("view NaN", dict(world_to_camera=torch.full((4, 4), float("nan"))), "world_to_camera: NaN"),
    ("time", dict(time=float("nan")), "time: must be finite"),
]


@pytest.mark.parametrize("name,change,match", BAD, ids=[b[0] for b in BAD])
def test_bad_inputs_name_the_argument(name, change, match):
    args = dict(rgb=colour(1, 2, 3), depth=torch.ones(8, 8), K=K8, world_to_camera=at(), time=0.0) | change
    memory = SceneMemory()
    with pytest.raises(ValueError, match=match):
        memory.insert(**args)
    assert len(memory) == 0
    if name.startswith(("K", "view")):
        with pytest.raises(ValueError, match=match):
            memory.render(args["K"], args["world_to_camera"], 8, 8)
    with pytest.raises(ValueError, match="H: expected a positive integer"):
        memory.render(K8, at(), 0, 8)
    with pytest.raises(ValueError, match="max_points"):
        SceneMemoryConfig(max_points=0)
