"""Student contracts: shapes, input errors, context use, latent warping, teacher init."""

import dataclasses

import pytest
import torch

from alaya.models.student import Student, StudentConfig, latent_flow, push_context, warp_context, warp_latents
from alaya.models.teacher import Teacher, TeacherConfig

TINY = StudentConfig(latent_channels=4, gbuffer_channels=8, text_dim=6, widths=(16, 16), blocks=1,
                     emb_dim=16, context=2, sigma_data=0.0)


def randomised(cfg=TINY):
    torch.manual_seed(0)
    m = Student(cfg).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return m


def inputs(B=2, h=4, w=6, K=2):
    g = torch.Generator().manual_seed(1)
    return dict(z=torch.randn(B, 4, h, w, generator=g), r=torch.zeros(B), t=torch.rand(B, generator=g),
                gbuffer=torch.randn(B, 8, h, w, generator=g), text=torch.randn(B, 6, generator=g),
                context=torch.randn(B, K, 4, h, w, generator=g), context_valid=torch.ones(B, K, 1, h, w))


def test_shapes_zero_init_and_context_dependence():
    x = inputs()
    assert torch.count_nonzero(Student(TINY)(**x)) == 0
    m = randomised()
    u = m(**x)
    assert u.shape == x["z"].shape
    other = dict(x, context=x["context"] + 1)
    assert not torch.allclose(m(**other), u)
    masked = dict(x, context_valid=torch.zeros_like(x["context_valid"]))
    masked2 = dict(masked, context=x["context"] + 1)
    assert torch.allclose(m(**masked), m(**masked2))       # invalid context is ignored
    assert not torch.allclose(m(**dict(x, r=x["t"] * 0.5)), u)   # the interval matters


def test_batch_items_are_independent():
    m, x = randomised(), inputs()
    full = m(**x)
    one = m(**{k: v[:1] for k, v in x.items()})
    assert torch.allclose(full[:1], one, atol=1e-5)


def test_bad_inputs_are_named():
    m, x = randomised(), inputs()
    with pytest.raises(ValueError, match="context"):
        m(**dict(x, context=x["context"][:, :1]))
    with pytest.raises(ValueError, match="gbuffer"):
        m(**dict(x, gbuffer=x["gbuffer"][:, :3]))


def test_warp_latents_follows_motion():
    lat = torch.arange(16.0).reshape(1, 1, 4, 4).repeat(1, 2, 1, 1)
    motion = torch.zeros(1, 32, 32, 2)
    motion[..., 0] = -8.0                       # the surface at x was at x - 8 px = one latent pixel
    flow = latent_flow(motion)
    assert flow.shape == (1, 2, 4, 4) and torch.all(flow[:, 0] == -1)
    warped, valid = warp_latents(lat, flow)
    assert torch.allclose(warped[0, 0, :, 1:], lat[0, 0, :, :-1])
    assert not valid[0, 0, :, 0].any() and valid[0, 0, :, 1:].all()
    with pytest.raises(ValueError, match="flow"):
        warp_latents(lat, torch.zeros(1, 2, 3, 4))
    with pytest.raises(ValueError, match="multiple"):
        latent_flow(torch.zeros(1, 12, 16, 2))
    ctx, val = push_context(torch.zeros(1, 2, 2, 4, 4), torch.zeros(1, 2, 1, 4, 4), lat)
    assert torch.equal(ctx[:, 0], lat) and val[:, 0].all() and not val[:, 1].any()
    ctx2, val2 = warp_context(ctx, val, flow)
    assert torch.allclose(ctx2[0, 0, 0, :, 1:], lat[0, 0, :, :-1]) and not val2[0, 0, 0, :, 0].any()


@pytest.mark.parametrize("sigma_data", [0.0, 0.5])
def test_init_from_teacher_copies_matching_weights(sigma_data):
    tcfg = TeacherConfig(latent_channels=4, gbuffer_channels=8, text_dim=6, widths=(16, 16), blocks=1,
                         emb_dim=16, sigma_data=sigma_data)
    teacher = Teacher(tcfg)
    with torch.no_grad():
        for p in teacher.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    s = Student(dataclasses.replace(TINY, sigma_data=sigma_data))
    copied = s.init_from_teacher(teacher)
    assert "text_mlp.0.weight" in copied and "down0.0.conv1.weight" in copied
    assert torch.equal(s.stem.weight, teacher.stem.weight[:, :4])
    assert torch.equal(s.cond_stem.weight[:, :8], teacher.stem.weight[:, 4:])
    assert torch.count_nonzero(s.cond_stem.weight[:, 8:]) == 0
    # on a static scene with no context the student reproduces the teacher's velocity
    x = inputs(B=1)
    x["context_valid"].zero_()
    x["r"] = x["t"].clone()
    v_t = teacher(x["z"][:, None].repeat(1, 3, 1, 1, 1), x["t"], x["gbuffer"][:, None].repeat(1, 3, 1, 1, 1),
                  x["text"])[:, 1]
    assert torch.allclose(s(**x), v_t, atol=1e-4)


def test_single_frame_temporal_conv_fast_path_is_exact():
    from alaya.nn.conditioning import TemporalConv
    for causal in (False, True):
        tc = TemporalConv(6, 3, causal)
        with torch.no_grad():
            tc.conv.weight.normal_()
            tc.conv.bias.normal_()
        x = torch.randn(2, 6, 4, 5)
        seq = x.reshape(2, 6, 20).permute(0, 2, 1).reshape(-1, 6, 1)
        pad = (2, 0) if causal else (1, 1)
        slow = tc.conv(torch.nn.functional.pad(seq, pad, mode="replicate")).reshape(2, 20, 6).permute(0, 2, 1)
        assert torch.allclose(tc(x, 1), x + slow.reshape(2, 6, 4, 5), atol=1e-5)


def test_precomputed_condition_features_give_the_same_output():
    m, x = randomised(dataclasses.replace(TINY, sigma_data=0.5)), inputs()
    feats = m.condition(x["gbuffer"], x["context"], x["context_valid"])
    assert feats.shape == (2, 16, 4, 6)
    assert torch.allclose(m(**x, features=feats), m(**x), atol=1e-6)


def test_preconditioned_student_velocity_points_from_its_data_estimate():
    # an all-zero network under EDM preconditioning predicts x_hat = c_skip z: the velocity is
    # then (z - c_skip z) / t, the exact flow of data ~ N(0, sigma_data^2)
    from alaya.diffusion.flow import edm_coefficients
    m, x = Student(dataclasses.replace(TINY, sigma_data=0.5)), inputs()
    c_skip = edm_coefficients(x["t"], 0.5)[1].view(-1, 1, 1, 1)
    assert torch.allclose(m(**x), (x["z"] - c_skip * x["z"]) / x["t"].view(-1, 1, 1, 1), atol=1e-5)


def test_view_branch_comes_from_the_teacher_and_reads_the_camera():
    """A view student copies the teacher's view branch; its per-frame features change with the
    view input, and a zero view (camera unknown) is the same as none."""
    tcfg = TeacherConfig(latent_channels=4, gbuffer_channels=8, text_dim=6, widths=(16, 16), blocks=1,
                         emb_dim=16, view_channels=3)
    teacher = Teacher(tcfg)
    with torch.no_grad():
        for p in teacher.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    s = Student(dataclasses.replace(TINY, view_channels=3))
    assert "view.3.weight" in s.init_from_teacher(teacher)
    assert torch.equal(s.view[3].weight, teacher.view[3].weight)
    x = inputs()
    view = torch.randn(2, 3, 32, 48)
    assert not torch.allclose(s(**x, view=view), s(**x))
    assert torch.equal(s(**x, view=torch.zeros_like(view)), s(**x))
    with pytest.raises(ValueError, match="view"):
        s(**x, view=view[:, :2])
