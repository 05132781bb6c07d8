"""A memory session's learned camera: it moves the view the memory is rendered from, its
intrinsics are used, and a walk stops at the surface the view shows ahead."""

import numpy as np
import pytest
import torch

from alaya.models.memory_conditioning import kinematic_view
from tiny_memory import TINY, still_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class _TurnLeft(torch.nn.Module):
    """A stand-in learned camera: every row turns the camera 5 degrees about the world's up and
    steps 0.1 m back, whatever the row (the session must follow it, not its own constants)."""

    def __init__(self, fov_y_degrees: float = 50.0):
        super().__init__()
        from alaya.models.camera_motion import CameraMotion, CameraMotionConfig
        self.motion = CameraMotion(CameraMotionConfig(fov_y_degrees=fov_y_degrees))
        self.turns = 0

    def eval(self):
        return self

    def initial_state(self, world_to_camera=None, **kw):
        self.start = world_to_camera.clone()
        return self.motion.initial_state(world_to_camera=world_to_camera)

    def step(self, row, state):
        from alaya.models.camera_geometry import twist_to_matrix, up_in_camera
        self.turns += 1
        up = up_in_camera(self.start[None])[0] if self.turns == 1 else state.up[0]
        twist = torch.cat([up * np.radians(5.0), torch.tensor([0.0, 0.0, -0.1])])[None]
        return twist_to_matrix(twist)[0], state

    def intrinsics(self, H, W):
        return self.motion.intrinsics(H, W)

    def stop_distance(self):
        return 0.3


def test_a_learned_camera_moves_the_memory_view_and_its_intrinsics_are_used():
    from alaya.models.view_warp import pinhole
    from alaya.runtime.world_session import WorldSession
    frame = np.random.default_rng(4).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    camera = _TurnLeft(fov_y_degrees=50.0)
    session = WorldSession(still_model(), size=32, backend="torch", camera_motion=camera)
    session.reset(frame, depth=np.full((32, 32), 3.0, np.float32))
    start = session.camera_view().clone()
    torch.testing.assert_close(session.K, camera.intrinsics(32, 32))
    assert not torch.allclose(session.K, pinhole(32, TINY.fov_y_degrees))
    for _ in range(4):
        session.step(np.zeros(8, np.float32))                 # no action: the kinematics would stand still
    view = session.camera_view()
    R = view[:3, :3] @ start[:3, :3].T                         # the rotation from the start camera
    angle = float(torch.rad2deg(torch.arccos(((torch.trace(R) - 1) / 2).clamp(-1, 1))))
    assert abs(angle - 20.0) < 0.1                             # four learned 5-degree turns
    centre, centre0 = -view[:3, :3].T @ view[:3, 3], -start[:3, :3].T @ start[:3, 3]
    assert abs(float((centre - centre0).norm()) - 0.4) < 0.05          # four 0.1 m steps along its axis
    assert torch.equal(session.pose, torch.zeros(1, 3))         # the fixed kinematics did not move
    assert 0 < float(session._covered.mean()) < 1                # the turned view sees part of the start


class _WalkForward(_TurnLeft):
    """A stand-in learned camera that steps 0.1 m forward per row, whatever the row."""

    def step(self, row, state):
        from alaya.models.camera_geometry import twist_to_matrix
        return twist_to_matrix(torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0, 0.1]]))[0], state


def test_the_learned_camera_walks_up_to_a_wall_and_not_through_it():
    from alaya.runtime.world_session import WorldSession
    frame = np.random.default_rng(5).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    session = WorldSession(still_model(), size=32, backend="torch", camera_motion=_WalkForward())
    session.reset(frame, depth=np.full((32, 32), 1.5, np.float32))       # a wall 1.5 m ahead
    start = session.camera_view().clone()
    walked = []
    for _ in range(20):
        session.step(np.zeros(8, np.float32))
        view = session.camera_view()
        walked.append(float((-view[:3, :3].T @ view[:3, 3] + start[:3, :3].T @ start[:3, 3]).norm()))
    assert walked[5] == pytest.approx(0.6, abs=1e-3)           # free walking: 0.1 m a frame
    assert walked[-1] == pytest.approx(1.5 - 0.3, abs=0.02)   # stopped 0.3 m (stop_distance) short of the wall
    assert max(walked) <= 1.2 + 0.02


def test_slide_at_surfaces_stops_each_world_axis_at_what_the_memory_holds():
    from alaya.models.camera_constraints import camera_centre, slide_at_surfaces
    view = torch.from_numpy(_looking_along_x(0.0, 0.0)).float()
    ys, zs = torch.meshgrid(torch.linspace(-3, 3, 301), torch.linspace(0.0, 2.5, 126), indexing="ij")   # 2 cm apart
    wall = torch.stack([torch.full_like(ys, 1.0), ys, zs]).reshape(3, -1)    # the plane x = 1, any height

    def moved(delta: torch.Tensor) -> torch.Tensor:
        return camera_centre(delta @ view) - camera_centre(view)

    def going(x: float, y: float, z: float = 0.0) -> torch.Tensor:    # a delta moving the centre by (x, y, z)
        delta = torch.eye(4)
        delta[:3, 3] = -view[:3, :3] @ torch.tensor([x, y, z])
        return delta

    slanted = slide_at_surfaces(going(1.0, 0.5, 0.2), view, wall, 0.4)      # into the wall at a slant
    torch.testing.assert_close(moved(slanted), torch.tensor([0.6, 0.5, 0.2]), atol=0.03, rtol=0)   # slides, rises
    away = going(-1.0, 0.5)
    torch.testing.assert_close(slide_at_surfaces(away, view, wall, 0.4), away)                  # walking away
    torch.testing.assert_close(slide_at_surfaces(going(0.5, 0.0), view, wall, 0.4), going(0.5, 0.0))   # room
    side = torch.stack([ys[:, 0] * 0 + 0.0, torch.full_like(ys[:, 0], 0.5), ys[:, 0] * 0 + 1.4]).repeat(1, 3)
    side[0] = torch.linspace(-1, 1, side.shape[1])                            # a wall on the left, at y = 0.5
    strafe = slide_at_surfaces(going(0.0, 0.3), view, side, 0.4)             # out of view, remembered: stops
    torch.testing.assert_close(moved(strafe), torch.tensor([0.0, 0.1, 0.0]), atol=1e-3, rtol=0)
    stray = wall[:, (wall[2] - 1.4).abs() < 0.05][:, :2]                     # two stray points are no wall
    for top, stops in ((1.35, True), (1.25, False)):                        # a low wall: the game's eye may
        low = wall[:, wall[2] <= top]                                       # be lower than this camera's
        out = moved(slide_at_surfaces(going(1.0, 0.0), view, low, 0.4))
        assert float(out[0]) == pytest.approx(0.6 if stops else 1.0, abs=0.03)
    torch.testing.assert_close(slide_at_surfaces(going(1.0, 0.0), view, stray, 0.4), going(1.0, 0.0))
    for off, stops in ((0.0, True), (0.06, False)):                         # a thin post (2 cm) ahead: the game's
        z = torch.linspace(0.0, 2.5, 126)                                   # ray, one line, misses one 6 cm aside
        post = torch.stack([torch.full_like(z, 1.0), torch.full_like(z, off), z]).repeat(1, 2)
        post[1, 126:] += 0.02
        out = moved(slide_at_surfaces(going(1.0, 0.0), view, post, 0.4))
        assert float(out[0]) == pytest.approx(0.6 if stops else 1.0, abs=0.03)
    near = torch.from_numpy(_looking_along_x(0.55, 0.0)).float()              # 0.45 m from the wall
    diagonal = going(0.1, 0.1)
    own = slide_at_surfaces(diagonal, near, wall, 0.4)                       # x: 0.05 m of room left
    torch.testing.assert_close(camera_centre(own @ near) - camera_centre(near), torch.tensor([0.05, 0.1, 0.0]),
                               atol=1e-4, rtol=0)
    r = 0.5 ** 0.5
    turned = torch.tensor([[r, r, 0.0], [-r, r, 0.0], [0.0, 0.0, 1.0]])    # a game whose axes run diagonally here
    torch.testing.assert_close(slide_at_surfaces(diagonal, near, wall, 0.4, axes=turned), diagonal)   # its ray: 0.64 m


def test_seen_surface_lifts_the_last_frame_and_keeps_what_lies_near():
    from alaya.models.camera_constraints import seen_surface
    from alaya.models.view_warp import pinhole
    view = torch.from_numpy(_looking_along_x(2.0, 3.0)).float()
    depth = torch.full((16, 16), 1.0)
    depth[:4] = 0.0                                                         # sky rows: no points
    remembered = torch.tensor([[2.5, 9.0], [3.2, 3.0], [1.4, 1.4]])         # one near, one 6 m off
    points = seen_surface(depth, pinhole(16, 60.0), view, remembered, 1.5)
    assert points.shape == (3, 1 + 12 * 16)
    torch.testing.assert_close(points[:, 0], remembered[:, 0].double())
    torch.testing.assert_close(points[0, 1:], torch.full((12 * 16,), 3.0, dtype=torch.float64))   # the plane 1 m ahead
    top = 1.4 + (8 - 4.5) / (8 / np.tan(np.radians(30.0)))                 # row 4's centre; rows 0-3 are sky
    assert float(points[2, 1:].max()) == pytest.approx(top)
    assert seen_surface(depth, pinhole(16, 60.0), view, remembered, 0.9).shape == (3, 1)   # 1 m ahead: too far


def _looking_along_x(x: float, y: float, eye: float = 1.4) -> np.ndarray:
    """world_to_camera (GL axes, z up) of a camera at (x, y, eye) looking along world +x."""
    R = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]])     # rows: right, up, back
    m = np.eye(4)
    m[:3, :3], m[:3, 3] = R, -R @ np.array([x, y, eye])
    return m


def test_a_start_view_in_a_walkable_region_keeps_the_camera_inside_it():
    from alaya.data.walkable_region import WalkableRegion
    from alaya.models.camera_constraints import camera_centre
    from alaya.runtime.world_session import WorldSession
    frame = np.random.default_rng(6).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    region = WalkableRegion(np.array([[-6.0, -6.0], [6.0, -6.0], [6.0, 6.0], [-6.0, 6.0]]))
    open_ground = np.zeros((32, 32), np.float32)                            # all sky: no surface stops it
    walked = {}
    for view in (None, _looking_along_x(5.0, 0.0)):
        session = WorldSession(still_model(), size=32, backend="torch", camera_motion=_WalkForward(), region=region)
        session.reset(frame, depth=open_ground, view=view)
        start = camera_centre(session.camera_view().double())
        for _ in range(20):
            session.step(np.zeros(8, np.float32))
        walked[view is None] = float((camera_centre(session.camera_view().double()) - start).norm())
    assert walked[True] == pytest.approx(2.0, abs=1e-3)     # no start view: free, 20 steps of 0.1 m
    assert walked[False] == pytest.approx(1.0, abs=1e-3)    # from x = 5 to the region's edge at x = 6
    with pytest.raises(ValueError, match="view"):
        session.reset(frame, depth=open_ground, view=np.full((4, 4), np.nan))


def test_a_reset_with_history_goes_on_with_a_jump_under_way():
    """The rows that led to a start frame warm the learned camera: a replay that starts mid-jump
    keeps flying (and the network sees those rows as the ones before its first step)."""
    from alaya.data.actions import ActionError, action_vector
    from alaya.models.camera_motion import CameraMotion, CameraMotionConfig
    from alaya.runtime.world_session import WorldSession
    frame = np.random.default_rng(5).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    depth = np.full((32, 32), 3.0, np.float32)
    camera = CameraMotion(CameraMotionConfig(level=True, still_without_navigation=True,
                                             flight_rise=0.13, flight_gravity=0.015))
    session = WorldSession(still_model(), size=32, backend="torch", camera_motion=camera)
    history = np.stack([action_vector(act="jump")] + [action_vector()] * 3)
    heights = []
    for rows in (None, history):
        session.reset(frame, depth=depth, history=rows)
        start = session.camera_view().clone()
        session.step(action_vector())
        view = session.camera_view()
        heights.append(float((-view[:3, :3].T @ view[:3, 3] + start[:3, :3].T @ start[:3, 3])[2]))
    assert heights[0] == pytest.approx(0.0, abs=1e-6)                    # from rest: it stands
    assert heights[1] == pytest.approx(0.13 - 0.015 * 4, abs=1e-4)       # mid-jump: the flight goes on
    seen = session.actions.shape[1] - 1                                   # rows before the first step's
    assert session.actions[0, 1:].tolist() == [history[-1].tolist(), history[-2].tolist()][:seen]
    with pytest.raises(ActionError, match="history"):
        session.reset(frame, depth=depth, history=np.full((3, 8), np.nan, np.float32))
