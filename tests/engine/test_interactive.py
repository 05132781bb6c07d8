"""The interactive first-person stream: movement, look, actions, motion vectors, bounds, errors."""

import math

import numpy as np
import pytest

from alaya.data.geometry import reproject_flow
from alaya.engine.interactive import InteractiveConfig, InteractiveStream, terrain_height_smooth
from alaya.engine.scene import SceneConfig, generate_scene

SEED = 3


@pytest.fixture
def make(gl_context):
    streams = []

    def build(seed=SEED, **overrides):
        stream = InteractiveStream(seed, InteractiveConfig(**{"size": 32, **overrides}), gl_context)
        streams.append(stream)
        return stream
    yield build
    for s in streams:
        s.close()


def static_pixels(stream, frame):
    return np.isin(frame["instance"], list(stream.world.static_instances())) & frame["mask"].astype(bool)


def body_pos(stream, name):
    return stream.world.data.body(name).xpos.copy()


def aim_at(stream, point):
    """Turn the camera so its centre ray points at ``point``."""
    d = np.asarray(point) - stream.camera_position
    yaw = math.atan2(d[1], d[0])
    pitch = math.atan2(d[2], math.hypot(d[0], d[1]))
    stream.look(dyaw=math.remainder(yaw - stream.yaw, 2 * math.pi), dpitch=pitch - stream.pitch)


def test_pool_leaves_existing_scenes_unchanged():
    for seed in range(4):
        plain = generate_scene(seed)
        assert plain.xml == generate_scene(seed, SceneConfig(spawn_pool=0)).xml and plain.pool == []
        pooled = generate_scene(seed, SceneConfig(spawn_pool=5))
        assert pooled.geoms[: len(plain.geoms)] == plain.geoms
        assert len(pooled.geoms) == len(plain.geoms) + 5 and len(pooled.pool) == 5
        new_ids = {g.instance for g in pooled.geoms[len(plain.geoms):]}
        assert len(new_ids) == 5 and not new_ids & set(plain.instances)


def test_moving_forward_follows_the_view(make):
    stream = make(smoothing=0.0)   # no easing: each input's direction shows on its own
    first = stream.step()
    start, yaw = stream.camera_position, stream.yaw
    stream.set_movement(forward=1.0)
    for _ in range(10):
        frame = stream.step()
    moved = stream.camera_position - start
    assert np.linalg.norm(moved[:2]) > 0.5 and abs(moved[2]) < 0.3
    heading = moved[:2] / np.linalg.norm(moved[:2])
    assert heading @ [math.cos(yaw), math.sin(yaw)] > 0.99
    assert np.abs(frame["depth"] - first["depth"]).mean() > 0.01
    # strafe goes right of the heading, up goes up
    stream.set_movement(strafe=1.0)
    here = stream.camera_position
    for _ in range(5):
        stream.step()
    side = stream.camera_position - here
    assert side[:2] @ [math.sin(yaw), -math.cos(yaw)] > 0.9 * np.linalg.norm(side[:2]) > 0
    stream.set_movement(up=1.0)
    here = stream.camera_position
    stream.step()
    stream.step()
    assert stream.camera_position[2] > here[2] + 0.05


def test_movement_is_frame_rate_independent(make):
    travelled = []
    for fps in (30.0, 60.0):
        stream = make(fps=fps, collide=False)
        start = stream.camera_position
        stream.set_movement(forward=1.0)
        for _ in range(int(fps * 0.5)):
            stream.step()
        travelled.append(np.linalg.norm(stream.camera_position[:2] - start[:2]))
    assert travelled[0] > 0.8 and abs(travelled[0] - travelled[1]) < 0.05 * travelled[0]


def test_look_turns_the_view_and_clamps_pitch(make):
    stream = make()
    before = stream.step()
    yaw = stream.yaw
    stream.look(dyaw=0.4)
    assert stream.yaw == pytest.approx(math.remainder(yaw + 0.4, 2 * math.pi))
    after = stream.step()
    assert not np.allclose(after["world_to_camera"], before["world_to_camera"])
    assert (after["instance"] != before["instance"]).mean() > 0.05
    for _ in range(3):
        stream.look(dpitch=1.0)
    assert stream.pitch == pytest.approx(math.radians(80.0))
    stream.look(dpitch=-3.0)
    assert stream.pitch == pytest.approx(-math.radians(80.0))


def test_motion_vectors_of_camera_motion_and_of_a_still_camera(make):
    stream = make(size=64)
    frames = [stream.step() for _ in range(3)]
    assert not frames[0]["motion"].any(), "the first frame has zero motion"
    still = static_pixels(stream, frames[-1])
    assert still.sum() > 300
    assert np.abs(frames[-1]["motion"].astype(np.float32)[still]).max() < 0.05
    # a look turns at once; movement eases in over a few frames
    for change, steps in ((lambda: stream.look(dyaw=0.08), 1), (lambda: stream.set_movement(forward=1.0), 3)):
        change()
        frames += [stream.step() for _ in range(steps)]
        prev, cur = frames[-2], frames[-1]
        keep = static_pixels(stream, cur)
        motion = cur["motion"].astype(np.float32)
        flow = reproject_flow(cur["depth"], stream.K, cur["world_to_camera"], prev["world_to_camera"])
        keep &= np.isfinite(flow).all(-1)
        assert np.median(np.linalg.norm(motion[keep], axis=-1)) > 0.3
        assert np.median(np.linalg.norm(motion[keep] - flow[keep], axis=-1)) < 0.5
    stream.reset()
    assert not stream.step()["motion"].any(), "after reset the first frame has zero motion"


def aim_at_visible_dynamic_object(stream):
    """Aim at the nearest dynamic object the centre ray reaches; return its body name."""
    for name in sorted(stream.world.dynamic_bodies,
                       key=lambda n: np.linalg.norm(body_pos(stream, n) - stream.camera_position)):
        aim_at(stream, body_pos(stream, name))
        _, hit = stream.world.ray_body(stream.camera_position, stream.view_direction)
        if hit == stream.world.model.body(name).id:
            return name
    pytest.fail("no dynamic object in sight")


def test_push_shoves_the_object_under_the_crosshair(make):
    # same seed and calls, except the push; no sweeper shoving things around meanwhile
    pushed, control = (make(scene=SceneConfig(sweeper=False)) for _ in range(2))
    for stream in (pushed, control):
        stream.step()
        name = aim_at_visible_dynamic_object(stream)
    v0 = pushed.world.data.joint(f"{name}_free").qvel.copy()
    assert pushed.act("push") is True
    dv = pushed.world.data.joint(f"{name}_free").qvel - v0
    assert np.linalg.norm(dv[:2]) == pytest.approx(pushed.config.push_speed)
    for _ in range(6):
        pushed.step()
        control.step()
    shove = body_pos(pushed, name) - body_pos(control, name)
    away = pushed.view_direction[:2] / np.linalg.norm(pushed.view_direction[:2])
    assert shove[:2] @ away > 0.3, f"pushed object moved {shove} relative to the unpushed replay"
    # aiming at the sky hits nothing
    pushed.look(dpitch=3.0)
    assert pushed.act("push") is False


def test_spawn_appears_and_falls(make):
    stream = make(size=64)
    before = stream.step()
    pool_ids = {i for i, d in stream.scene.instances.items() if d.startswith("pool")}
    assert not pool_ids & set(np.unique(before["instance"]).tolist())
    assert stream.act("spawn") is True
    name = stream.scene.pool[0]
    heights, seen = [], set()
    for _ in range(4):
        frame = stream.step()
        heights.append(body_pos(stream, name)[2])
        seen |= pool_ids & set(np.unique(frame["instance"]).tolist())
        if seen and len(heights) == 1:
            # appearing is not a jump from the parking spot: motion stays frame-sized
            on = np.isin(frame["instance"], list(seen))
            assert np.abs(frame["motion"].astype(np.float32)[on]).max() < 8
    assert len(seen) == 1, "the spawned object shows in the instance buffer"
    assert np.all(np.diff(heights) < 0), f"it falls: {heights}"
    ahead = body_pos(stream, name)[:2] - stream.camera_position[:2]
    assert ahead @ [math.cos(stream.yaw), math.sin(stream.yaw)] > 0.5


def test_throw_follows_the_view(make):
    stream = make()
    stream.step()
    stream.look(dpitch=0.2)
    d, eye = stream.view_direction, stream.camera_position
    assert stream.act("throw") is True
    stream.step()
    stream.step()
    offset = body_pos(stream, stream.scene.pool[0]) - eye
    along = offset @ d
    assert along > 0.5, f"thrown {offset}"
    assert np.linalg.norm(offset - along * d) < 0.25 * along + 0.2
    assert np.linalg.norm(stream.world.data.body(stream.scene.pool[0]).cvel[3:]) > 5.0


def test_the_pool_recycles_and_can_be_empty(make):
    stream = make(pool_size=2)
    assert all(stream.act("spawn") for _ in range(3))    # the third reuses the first body
    stream.step()
    assert all(body_pos(stream, n)[2] > -1.0 for n in stream.scene.pool), "both in the arena"
    assert make(pool_size=0).act("throw") is False


def test_bodies_that_leave_the_arena_are_parked_again(make):
    stream = make(pool_size=1)
    park = body_pos(stream, "pool0")
    stream.act("spawn")
    stream.step()
    jnt = stream.world.model.joint("pool0_free")
    stream.world.data.qpos[jnt.qposadr[0] + 2] = -30.0     # as if it had flown over a wall
    for _ in range(3):
        stream.step()
    assert np.allclose(body_pos(stream, "pool0"), park, atol=1e-6)


def test_camera_stays_inside_the_arena(make):
    for collide in (True, False):
        stream = make(move_speed=30.0, collide=collide)
        A = stream.scene.config.arena
        for turn, movement in ((0.0, dict(forward=1.0)), (1.3, dict(forward=1.0, strafe=1.0)),
                               (2.0, dict(up=1.0)), (0.0, dict(forward=-1.0, up=-1.0))):
            stream.look(dyaw=turn)
            stream.set_movement(**movement)
            for _ in range(20):
                stream.step()
                x, y, z = stream.camera_position
                assert max(abs(x), abs(y)) <= A - stream.config.margin + 1e-9
                assert terrain_height_smooth(stream.scene, x, y) + stream.config.min_height - 1e-9 <= z
                assert z <= stream.config.max_height + 1e-9


def test_bad_inputs_raise_clear_errors(make):
    stream = make()
    for kwargs, name in ((dict(forward=1.5), "forward"), (dict(strafe=float("nan")), "strafe"),
                         (dict(up="1"), "up"), (dict(forward=True), "forward")):
        with pytest.raises(ValueError, match=name):
            stream.set_movement(**kwargs)
    with pytest.raises(ValueError, match="dyaw"):
        stream.look(dyaw=float("inf"))
    with pytest.raises(ValueError, match="dpitch"):
        stream.look(dpitch=10.0)
    with pytest.raises(ValueError, match="'jump'.*push, throw, spawn"):
        stream.act("jump")
    with pytest.raises(RuntimeError, match="step"):
        stream.render_style("toon")
    with pytest.raises(ValueError, match="pool_size"):
        InteractiveConfig(pool_size=-1)


def play(stream):
    out = [stream.step()]
    stream.set_movement(forward=0.7, strafe=-0.3)
    stream.look(dyaw=0.1, dpitch=-0.05)
    stream.act("spawn")
    out.append(stream.step())
    stream.act("throw")
    stream.act("push")
    out += [stream.step() for _ in range(3)]
    return out, stream.camera_position


def test_same_seed_and_calls_replay_exactly_and_reset_restarts(make):
    a, b = make(), make()
    start = a.camera_position
    (fa, pa), (fb, pb) = play(a), play(b)
    assert np.array_equal(pa, pb)
    for x, y in zip(fa, fb):
        for key in ("depth", "instance", "motion", "world_to_camera"):
            assert np.array_equal(x[key], y[key]), key
    rgb = a.render_style("toon")
    assert rgb.shape == (32, 32, 3) and rgb.dtype == np.uint8
    a.reset()
    assert np.array_equal(a.camera_position, start)
    fr, pr = play(a)
    assert np.array_equal(pr, pa) and np.array_equal(fr[-1]["depth"], fa[-1]["depth"])
    a.reset(seed=SEED + 1)
    assert not np.array_equal(a.step()["depth"], fa[0]["depth"])
