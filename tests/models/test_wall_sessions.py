"""Sessions with the region's border drawn as walls (``memory_wall_margin``): a border the start
frame never showed is drawn when turned to, a session keeps its network's guesses on a drawn wall
out of its memory, and a far-seen wall walked up to is drawn over its magnified points."""

import math

import numpy as np
import torch

from alaya.data.walkable_region import WalkableRegion
from alaya.models.view_warp import pinhole
from wall_views import EYE, checker, level_view


class _Turn(torch.nn.Module):
    """A stand-in learned camera: every row turns the camera 10 degrees about the world's up."""

    def __init__(self):
        super().__init__()
        from alaya.models.camera_motion import CameraMotion, CameraMotionConfig
        self.motion = CameraMotion(CameraMotionConfig(fov_y_degrees=50.0))

    def initial_state(self, world_to_camera=None, **kw):
        self.up = world_to_camera[:3, 2].clone()                 # world z in camera axes
        return self.motion.initial_state(world_to_camera=world_to_camera)

    def step(self, row, state):
        from alaya.models.camera_geometry import twist_to_matrix
        return twist_to_matrix(torch.cat([self.up * math.radians(10.0), torch.zeros(3)])[None])[0], state

    def intrinsics(self, H, W):
        return self.motion.intrinsics(H, W)

    def stop_distance(self):
        return self.motion.stop_distance()


def wall_ahead(x: float, distance: float, sky_rows: int):
    """A 32 x 32 start for a session in the 12 x 12 m region (walls 0.5 m beyond it): the camera at
    (x, 0) facing +x, its frame the red and blue checker of a wall ``distance`` ahead below
    ``sky_rows`` rows of sky: (region, start view, frame, depth)."""
    region = WalkableRegion(np.array([[-6.0, -6.0], [6.0, -6.0], [6.0, 6.0], [-6.0, 6.0]]))
    start = level_view(0.0)
    start[:3, 3] = -start[:3, :3] @ torch.tensor([x, 0.0, EYE], dtype=torch.float64)
    depth = np.full((32, 32), distance, np.float32)
    depth[:sky_rows] = 0
    K = pinhole(32, 50.0).numpy()
    v, u = np.meshgrid(np.arange(32) + 0.5, np.arange(32) + 0.5, indexing="ij")
    frame = checker((-distance * (u - K[0, 2]) / K[0, 0]).ravel(), (EYE - distance * (v - K[1, 2]) / K[1, 1]).ravel())
    frame = frame.reshape(32, 32, 3)
    frame[:sky_rows] = 220
    return region, start, frame, depth


def test_a_session_turned_to_a_border_it_never_saw_shows_a_wall():
    """``memory_wall_margin``: a session whose start frame shows the border wall 1.5 m ahead,
    turned round to the far border it never saw, shows a wall where that border stands (a band at
    the horizon at its depth, 11.5 m away, in the seen wall's colours); with the margin 0 the
    start frame's stale 1.5 m stays there."""
    import dataclasses

    from alaya.runtime.world_session import WorldSession
    from tiny_memory import still_model
    region, start, frame, depth = wall_ahead(5.0, 1.5, 8)        # the border wall 1.5 m ahead
    shown, far = {}, {}
    for margin in (0.5, 0.0):
        model = still_model()
        model.config = dataclasses.replace(model.config, memory_wall_margin=margin)
        session = WorldSession(model, size=32, backend="torch", camera_motion=_Turn(), region=region)
        session.reset(frame, depth=depth, view=start.numpy(), pitch=0.0)
        for _ in range(18):
            out = session.step(np.zeros(8, np.float32))
        shown[margin] = out.astype(np.float32)
        far[margin] = session._depth.numpy()                      # the shown frame's depth (metres)
    assert np.abs(shown[0.5][16:19] - shown[0.0][16:19]).mean() > 30
    assert np.abs(far[0.5][16:19] / 11.5 - 1).max() < 0.1          # the wall's depth, 11.5 m along the view axis
    assert (np.abs(far[0.0][16:19] / 11.5 - 1) > 0.5).all()        # without: the stale start frame's 1.5 m


def test_a_session_keeps_what_its_network_replaced_on_a_drawn_wall_out_of_its_memory():
    """A network whose gate replaces everything the memory shows (every generated pixel may go
    into the memory), turned round past the walls: none of the points its frames add lie on a
    drawn wall (a point stored there would hide it from then on); with the session's drawn depth
    withheld, many do."""
    import dataclasses

    from alaya.runtime.world_session import WorldSession
    from tiny_memory import still_model
    region, start, frame, depth = wall_ahead(5.0, 1.5, 8)
    on_wall = {}
    for withheld in (False, True):
        model = still_model()
        with torch.no_grad():
            model.core.out.bias[64:] = -1e6                  # the gate replaces the memory everywhere
        model.config = dataclasses.replace(model.config, memory_wall_margin=0.5, memory_floor=False)
        session = WorldSession(model, size=32, backend="torch", camera_motion=_Turn(), region=region)
        session.reset(frame, depth=depth, view=start.numpy(), pitch=0.0)
        if withheld:
            session._shell.drawn_depth = lambda *a: None
        walls, start_points = session._shell.walls, session.memory.xyz.clone()
        for _ in range(36):
            session.step(np.zeros(8, np.float32))
        added = torch.cdist(session.memory.xyz.T, start_points.T).min(1).values > 0.01   # (frames remove, merge start points)
        R = session._to_region.double()
        xyz = (R[:3, :3] @ session.memory.xyz[:, added].double() + R[:3, 3:]).numpy()
        beyond = np.abs(walls.out @ xyz[:2] - walls.offset[:, None]).min(0)     # metres from the nearest wall plane
        on_wall[withheld] = int(((beyond < 0.1) & (xyz[2] > 0.3) & (xyz[2] < walls.walls[0].top - 0.1)).sum())
    assert on_wall[False] == 0 and on_wall[True] > 50


class _Walk(_Turn):
    """A stand-in learned camera: every row walks the camera 0.4 m forward."""

    def step(self, row, state):
        from alaya.models.camera_geometry import twist_to_matrix
        return twist_to_matrix(torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0, 0.4]]))[0], state


def test_a_session_walking_up_to_a_far_seen_wall_draws_it_over_its_magnified_points():
    """``memory_shell_coarse``: a session whose start frame shows the far border 11.5 m ahead,
    walked 8 m up to it (its points now span about 3.3 pixels), draws the wall over them; with the
    option 0 (a model saved before it) it never does."""
    import dataclasses

    from alaya.runtime.world_session import WorldSession
    from tiny_memory import still_model
    region, start, frame, depth = wall_ahead(-5.0, 11.5, 14)     # the far border 11.5 m ahead
    drawn_over = {}
    for above in (3.0, 0.0):
        model = still_model()
        model.config = dataclasses.replace(model.config, memory_wall_margin=0.5, memory_shell_coarse=above)
        session = WorldSession(model, size=32, backend="torch", camera_motion=_Walk(), region=region)
        session.reset(frame, depth=depth, view=start.numpy(), pitch=0.0)
        draw, seen = session._shell.draw, []
        session._shell.draw = lambda *a: seen.append(a[5]) or draw(*a)
        for _ in range(20):
            session.step(np.zeros(8, np.float32))
        drawn_over[above] = [0 if c is None else int(c.sum()) for c in seen]
    assert drawn_over[0.0] == [0] * 20
    assert drawn_over[3.0][0] == 0 and drawn_over[3.0][-1] > 100     # none at first, the wall's pixels at last


def test_one_seed_draws_each_world_its_own_walls_and_a_world_replayed_the_same():
    """The seed a session's shell draws its unseen borders' materials from mixes the session's
    seed with its start frame (``world_seed``): one seed played from different worlds does not give
    every world the same borders, and the same world and seed give the same ones again."""
    import dataclasses

    from alaya.runtime.world_session import WorldSession, world_seed
    from tiny_memory import still_model
    frames = [wall_ahead(5.0, distance, rows) for distance, rows in ((1.5, 8), (2.0, 8), (1.5, 10))]
    assert world_seed(3, frames[0][2]) == world_seed(3, frames[0][2].copy())
    assert len({world_seed(3, f[2]) for f in frames} | {world_seed(4, frames[0][2])}) == 4
    model = still_model()
    model.config = dataclasses.replace(model.config, memory_wall_margin=0.5)
    seeds = []
    for region, start, frame, depth in frames + frames[:1]:
        session = WorldSession(model, size=32, backend="torch", camera_motion=_Turn(), region=region, seed=3)
        session.reset(frame, depth=depth, view=start.numpy(), pitch=0.0)
        seeds.append(session._shell.walls.seed)
    assert len(set(seeds[:3])) == 3 and seeds[3] == seeds[0]
    assert seeds[0] == world_seed(3, frames[0][2]) % 2 ** 63
