"""The memory-conditioned world model: its conditioning (shapes, what coverage does, the gate's
blend), standing still on a perfect memory, save/load, bad inputs, a session that keeps its
memory (its training: tests/train/test_world_memory_training.py)."""

import numpy as np
import pytest
import torch

from alaya.models.memory_conditioning import (as_context, composite, decode_depth, encode_depth, frame_image, gate_target,
                                              kinematic_view, memory_base, memory_latent, to_image, to_latent)
from alaya.models.world import WorldModel, WorldModelConfig
from tiny_memory import TINY, still_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

def test_depth_encoding_round_trips_and_keeps_the_sky_empty():
    d = torch.tensor([0.0, 0.3, 1.4, 10.0, 39.0, 45.0])
    u = encode_depth(d)
    assert u[0] == 0 and u[-1] == 0 and (u[1:-1] > 0).all() and (u[1:-1].diff() < 0).all()
    back = decode_depth(u)
    torch.testing.assert_close(back[1:-1], d[1:-1], rtol=1e-4, atol=1e-4)
    assert back[0] == 0 and back[-1] == 0


def test_latents_have_the_model_shapes_and_round_trip():
    rgb, depth = torch.rand(2, 3, 32, 32), torch.rand(2, 1, 32, 32) * 5
    img = frame_image(rgb, depth, torch.ones(2, 1, 32, 32))
    z = to_latent(img)
    assert img.shape == (2, 5, 32, 32) and z.shape == (2, 80, 8, 8)
    torch.testing.assert_close(to_image(z), img)
    assert torch.equal(z[:, :48], torch.nn.functional.pixel_unshuffle(rgb * 2 - 1, 4))   # rgb first: the patch codec's
    with pytest.raises(ValueError, match="depth"):
        frame_image(rgb, depth[:, :, :16])
    with pytest.raises(ValueError, match="rgb"):
        frame_image(rgb[:, :2])


def test_coverage_picks_the_memory_as_the_base_and_the_gate_blends():
    mem_rgb, ctx_rgb, gen_rgb = (torch.full((1, 3, 16, 16), v) for v in (0.8, 0.2, 0.5))
    cov = torch.zeros(1, 1, 16, 16)
    cov[..., :8] = 1                                   # left half covered
    memory = memory_latent(mem_rgb, cov, torch.full_like(cov, 2.0))
    newest = to_latent(frame_image(ctx_rgb, torch.full_like(cov, 4.0)))
    base = to_image(memory_base(memory, newest))
    torch.testing.assert_close(base[:, :3, :, :8], mem_rgb[..., :8])
    torch.testing.assert_close(base[:, :3, :, 8:], ctx_rgb[..., 8:])
    torch.testing.assert_close(base[:, 3:4, :, :8], encode_depth(torch.full((1, 1, 16, 8), 2.0)))
    torch.testing.assert_close(base[:, 4:5], cov)      # "show the memory where it covers" is the zero
    for g in (0.0, 1.0):
        shown = to_image(composite(to_latent(frame_image(gen_rgb, gate=torch.full_like(cov, g))), memory))
        torch.testing.assert_close(shown[:, :3, :, :8], mem_rgb[..., :8] if g else gen_rgb[..., :8])
        torch.testing.assert_close(shown[:, 3:4, :, :8], encode_depth(torch.full((1, 1, 16, 8), 2.0)) if g
                                   else torch.zeros(1, 1, 16, 8))       # the depth follows the colour
        torch.testing.assert_close(shown[:, :3, :, 8:], gen_rgb[..., 8:])   # uncovered: always generated
        torch.testing.assert_close(shown[:, 4:5], g * cov)                   # the gate it used, where covered
        context = to_image(as_context(composite(to_latent(frame_image(gen_rgb, gate=torch.full_like(cov, g))),
                                                memory)))
        torch.testing.assert_close(context[:, :4], shown[:, :4])
        assert (context[:, 4] == 0.5).all()                                  # a context frame carries no gate
    target = gate_target(mem_rgb, cov, mem_rgb + 0.01)
    assert torch.equal(target, cov)
    assert not gate_target(mem_rgb, cov, ctx_rgb).any()


def test_config_and_inputs_are_checked_by_name():
    with pytest.raises(ValueError, match="latent_channels"):
        WorldModelConfig(memory=True)
    with pytest.raises(ValueError, match="anchor"):
        WorldModelConfig(memory=True, latent_channels=80, view_warp=True, ground_warp=True, anchor_warp=True)
    model = WorldModel(TINY)
    with pytest.raises(ValueError, match="memory"):
        model.finish(torch.zeros(1, 80, 4, 4), torch.zeros(1, 80, 4, 4))
    assert WorldModel(WorldModelConfig()).config.image_channels == 3 and TINY.image_channels == 5


def test_the_memory_conditions_the_prediction_and_save_load_round_trips(tmp_path):
    torch.manual_seed(0)
    model = WorldModel(TINY).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    B, h = 1, 8
    z, ctx, valid = torch.randn(B, 80, h, h), torch.randn(B, 3, 80, h, h) * 0.3, torch.ones(B, 3, 1, h, h)
    style, rows, level, pitch = torch.zeros(B, 384), torch.zeros(B, 3, 8), torch.zeros(B), torch.zeros(B)
    full = memory_latent(torch.rand(B, 3, 32, 32), torch.ones(B, 1, 32, 32), torch.full((B, 1, 32, 32), 3.0))
    empty = memory_latent(torch.zeros(B, 3, 32, 32), torch.zeros(B, 1, 32, 32), torch.zeros(B, 1, 32, 32))
    a = model.sample(z, full, ctx, valid, style, rows, level, pitch=pitch)
    b = model.sample(z, empty, ctx, valid, style, rows, level, pitch=pitch)
    assert a.shape == (B, 80, h, h) and (a - b).abs().max() > 0.05
    model.save_pretrained(tmp_path / "m")
    loaded = WorldModel.from_pretrained(tmp_path / "m").eval()
    assert loaded.config == TINY
    torch.testing.assert_close(loaded.sample(z, full, ctx, valid, style, rows, level, pitch=pitch), a)


def test_kinematic_view_is_a_rigid_opengl_camera_at_eye_height():
    view = kinematic_view(torch.tensor([[1.0, 2.0, 0.3]]), -10.0, 1.4)
    R = view[:3, :3]
    torch.testing.assert_close(R @ R.T, torch.eye(3), atol=1e-5, rtol=0)
    centre = -R.T @ view[:3, 3]
    torch.testing.assert_close(centre, torch.tensor([1.0, 2.0, 1.4]), atol=1e-5, rtol=0)
    forward = -R[2]                                     # OpenGL: the camera looks down -z
    assert forward[2] < 0 and abs(float(torch.atan2(forward[1], forward[0])) - 0.3) < 1e-4


def test_standing_still_on_a_perfect_memory_is_exact():
    from alaya.runtime.world_session import WorldSession
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
    depth = np.full((32, 32), 3.0, np.float32)
    depth[:6] = 0                                          # sky rows: not in the memory
    session = WorldSession(still_model(), size=32, backend="torch")
    session.reset(frame, "a golden sunset", depth=depth)
    points = len(session.memory)
    assert points == int((depth > 0).sum())
    for _ in range(20):
        out = session.step(np.zeros(8, np.float32))
        np.testing.assert_array_equal(out[6:], frame[6:])   # covered: the memory, exactly
    assert len(session.memory) == points                    # standing still adds nothing


def test_session_memory_is_bounded_and_the_start_depth_is_predicted_or_checked():
    from alaya.data.actions import action_vector
    from alaya.runtime.world_session import WorldSession
    frame = np.random.default_rng(1).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    session = WorldSession(WorldModel(TINY), size=32, backend="torch")
    with pytest.raises(ValueError, match="depth"):
        session.reset(frame, depth=np.full((16, 16), 2.0))
    session.reset(frame)                                   # depth predicted by the model
    for k in range(30):
        session.step(action_vector(1.0, 0.0, 1.0, 0.0, None))
        assert len(session.memory) <= TINY.memory_max_points


def test_floor_depth_and_the_clamp():
    from alaya.models.memory_conditioning import clamp_to_floor, floor_depth
    from alaya.models.view_warp import pinhole
    K = pinhole(32, 70.0)
    pose = torch.tensor([[2.0, -1.0, 0.7]])
    floor = floor_depth(K, kinematic_view(pose, -30.0, 1.4), 32, 32)
    # the ray through the image centre looks 30 degrees down: 1.4 / sin(30) m along the view axis
    assert abs(float(floor[15:17, 15:17].mean()) - 2.8) < 0.15
    level = floor_depth(K, kinematic_view(pose, 0.0, 1.4), 32, 32)
    raised = floor_depth(K, kinematic_view(pose, -30.0, 2.8), 32, 32)       # twice as high: twice as far
    both = (floor > 0) & (raised > 0)                                       # (within MAX_DEPTH)
    assert both.float().mean() > 0.5
    torch.testing.assert_close(raised[both], 2 * floor[both], rtol=1e-4, atol=1e-4)
    assert (floor_depth(K, kinematic_view(pose, -30.0, 1.4), 32, 32, floor_z=2.0) == 0).all()   # floor above: unseen
    assert (level[:16] == 0).all() and (level[17:] > 0).all()           # looking level: the floor below the horizon
    assert (floor[-1] < floor[20]).all()                                                   # nearer at the bottom
    depth = torch.stack([floor[20] * 0.5, floor[20] * 2, torch.zeros(32)])
    out = clamp_to_floor(depth, floor[20].expand(3, 32))
    torch.testing.assert_close(out[0], floor[20] * 0.5)           # nearer than the floor: kept
    torch.testing.assert_close(out[1], floor[20])                 # farther: the floor
    torch.testing.assert_close(out[2], floor[20])                 # "sky" where the ray meets the floor
    assert torch.equal(clamp_to_floor(torch.full((2,), 5.0), torch.zeros(2)), torch.full((2,), 5.0))


def test_a_generated_frame_fills_only_the_memory_holes():
    from alaya.data.actions import action_vector
    from alaya.runtime.world_session import WorldSession
    frame = np.random.default_rng(2).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    session = WorldSession(still_model(), size=32, backend="torch")
    session.reset(frame, depth=np.full((32, 32), 3.0, np.float32))
    before = len(session.memory)
    holes = 0
    for _ in range(3):                                            # turn: a strip comes into view (and joins
        session.step(action_vector(0.0, 0.0, 1.0, 0.0, None))    # once a second frame confirms it)
        holes += int((session._covered == 0).sum())
    assert 0 < holes < 3 * 32 * 32 and before < len(session.memory) <= before + holes


def test_a_covered_pixel_goes_in_only_where_the_gate_replaced_the_memory():
    from alaya.models.memory_conditioning import generated_insert
    from alaya.models.view_warp import pinhole
    K, view = pinhole(16, 70.0), kinematic_view(torch.zeros(1, 3), 0.0, 1.4)
    image = torch.rand(5, 16, 16)
    image[3] = encode_depth(torch.full((16, 16), 3.0))
    image[4, :, :8] = 0.9                           # the gate kept the memory on the left ...
    image[4, :, 8:] = 0.1                           # ... and replaced it on the right
    covered = torch.zeros(16, 16)
    covered[:8] = 1                                 # the memory covered the top half
    rgb, depth, replaced = generated_insert(image, K, view, covered, False, 0.0, replace_below=0.5)
    assert rgb.dtype == torch.uint8 and rgb.shape == (16, 16, 3)
    assert (depth[:8, :8] == 0).all()               # covered and kept: the memory has it
    assert torch.allclose(depth[:8, 8:], torch.tensor(3.0), atol=1e-3)   # covered and replaced: goes in
    assert torch.allclose(depth[8:], torch.tensor(3.0), atol=1e-3)       # not covered: goes in
    assert replaced[:8, 8:].all() and replaced.sum() == 8 * 8            # only the replaced may see through
    _, holes, _ = generated_insert(image, K, view, covered, False, 0.0, replace_below=0.0)
    assert (holes[:8] == 0).all() and (holes[8:] > 0).all()             # 0: the holes only


def test_the_inpainted_hole_base_is_smooth_and_keeps_what_is_covered():
    from alaya.models.memory_hole_fill import inpaint
    image = torch.rand(2, 4, 32, 32)
    cov = torch.ones(2, 1, 32, 32)
    cov[:, :, :, :10] = 0                                     # a strip the view turned into
    out = inpaint(image, cov)
    torch.testing.assert_close(out[..., 10:], image[..., 10:])
    assert out.min() >= image.min() - 1e-6 and out.max() <= image.max() + 1e-6   # a mean of what it knows
    strip = out[..., :10]
    # no stripes: the fill varies along the rows no more than the known image does, and much less
    assert strip.diff(dim=-1).abs().mean() < 0.5 * image[..., 10:].diff(dim=-1).abs().mean()
    mem_rgb = torch.full((1, 3, 16, 16), 0.8)
    mcov = torch.zeros(1, 1, 16, 16)
    mcov[..., 4:] = 1
    memory = memory_latent(mem_rgb, mcov, torch.full_like(mcov, 2.0))
    newest = to_latent(frame_image(torch.full((1, 3, 16, 16), 0.2), torch.full_like(mcov, 4.0)))
    torch.testing.assert_close(to_image(memory_base(memory, newest, holes="inpaint"))[:, :3],
                               torch.full((1, 3, 16, 16), 0.8))      # the holes take the memory's colour
    torch.testing.assert_close(to_image(memory_base(memory_latent(mem_rgb, 0 * mcov, 0 * mcov), newest,
                                                    holes="inpaint"))[:, :3], torch.full((1, 3, 16, 16), 0.2))
    with pytest.raises(ValueError, match="holes"):
        memory_base(memory, newest, holes="zero")


def test_the_copied_noise_and_times_match_the_world_recipe():
    from alaya.train import world_latent_loss as W
    from alaya.train import world_memory_loss as M
    from alaya.train.world_config import WorldTrainConfig
    cfg = WorldTrainConfig(data="unused", one_step_t=0.3)
    ctx, valid = torch.randn(8, 3, 80, 4, 4), torch.ones(8, 3, 1, 4, 4)
    for a, b in zip(W.add_context_noise(ctx, valid, cfg, np.random.default_rng(0)),
                    M.add_context_noise(ctx, valid, cfg, np.random.default_rng(0))):
        assert torch.equal(a, b)
    assert torch.equal(W.training_times(16, cfg, np.random.default_rng(1)), M.training_times(16, cfg, np.random.default_rng(1)))


def test_the_sky_can_go_in_as_a_far_backdrop():
    import dataclasses
    from alaya.runtime.world_session import WorldSession
    frame = np.random.default_rng(3).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    depth = np.full((32, 32), 3.0, np.float32)
    depth[:6] = 0
    model = still_model()
    model.config = dataclasses.replace(model.config, memory_sky_depth=25.0)
    session = WorldSession(model, size=32, backend="torch")
    session.reset(frame, depth=depth)
    assert len(session.memory) == 32 * 32                 # the sky rows too, 25 m away (its corners within max_distance)
    for _ in range(5):
        out = session.step(np.zeros(8, np.float32))
    np.testing.assert_array_equal(out, frame)             # standing still: every pixel from the memory


def test_clean_depth_takes_out_grain_and_outliers_and_keeps_a_surface():
    from alaya.models.memory_conditioning import clean_depth
    ramp = torch.linspace(2.0, 6.0, 32)[:, None].expand(32, 32).clone()     # a floor receding row by row
    noisy = ramp * (1 + 0.02 * torch.randn(32, 32, generator=torch.Generator().manual_seed(0)))
    noisy[10, 10] = 0.5                                                      # a floating speck
    noisy[:4] = 0                                                            # sky
    out = clean_depth(noisy, 5, 0.1)
    assert out[10, 10] == 0                                                  # the speck does not go in
    assert (out[:4] == 0).all()                                              # nor the sky
    inner = (slice(6, 30), slice(2, 30))
    kept = out[inner] > 0
    assert kept.float().mean() > 0.95
    err_in, err_out = (noisy[inner] - ramp[inner]).abs(), (out[inner] - ramp[inner]).abs()
    assert err_out[kept].mean() < 0.6 * err_in[kept].mean()                 # grain smoothed, surface kept
    where = torch.zeros(32, 32, dtype=torch.bool)
    where[20:] = True
    part = clean_depth(noisy, 5, 0.1, where=where)
    assert (part[:20] == 0).all() and torch.equal(part[20:], out[20:])        # only where asked, the same
    assert torch.equal(clean_depth(noisy, 0, 0.1), noisy)
    with pytest.raises(ValueError, match="odd"):
        clean_depth(noisy, 4, 0.1)


def test_memory_depth_median_is_checked():
    from alaya.models.world import WorldModelConfig
    with pytest.raises(ValueError, match="memory_depth_median"):
        WorldModelConfig(memory_depth_median=4)
    with pytest.raises(ValueError, match="memory_depth_outlier"):
        WorldModelConfig(memory_depth_outlier=0.0)
