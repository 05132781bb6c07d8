"""Teacher contracts: shapes, bidirectional time mixing, conditioning, input errors."""

import pytest
import torch

from alaya.models.teacher import Teacher, TeacherConfig

TINY = TeacherConfig(latent_channels=4, gbuffer_channels=8, text_dim=6, widths=(16, 16),
                     blocks=1, emb_dim=16)


def randomised(cfg=TINY):
    torch.manual_seed(0)
    m = Teacher(cfg).eval()
    with torch.no_grad():            # zero-initialised outputs would hide every dependency
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return m


def inputs(B=2, T=3, h=4, w=6):
    return (torch.randn(B, T, 4, h, w), torch.rand(B), torch.randn(B, T, 8, h, w), torch.randn(B, 6))


def test_shapes_and_zero_init():
    z, t, g, txt = inputs()
    fresh = Teacher(TINY)
    assert torch.count_nonzero(fresh(z, t, g, txt)) == 0      # output layer starts at zero
    assert randomised()(z, t, g, txt).shape == z.shape


def test_frames_see_the_past_and_the_future():
    m = randomised()
    z, t, g, txt = inputs()
    base = m(z, t, g, txt)
    z2 = z.clone()
    z2[:, 2] += 1.0                                        # change the last frame
    out = m(z2, t, g, txt)
    assert not torch.allclose(out[:, 0], base[:, 0])       # the first frame notices (bidirectional)
    g2 = g.clone()
    g2[1] += 1.0
    out = m(z, t, g2, txt)
    assert torch.allclose(out[0], base[0]) and not torch.allclose(out[1], base[1])  # batch-independent


def test_text_and_time_condition_the_output():
    m = randomised()
    z, t, g, txt = inputs()
    base = m(z, t, g, txt)
    assert not torch.allclose(m(z, t, g, torch.zeros_like(txt)), base)
    assert not torch.allclose(m(z, t * 0.5, g, txt), base)


def test_bad_shapes():
    m = Teacher(TINY)
    z, t, g, txt = inputs()
    with pytest.raises(ValueError, match="z: expected"):
        m(z[:, :, :3], t, g, txt)
    with pytest.raises(ValueError, match="gbuffer"):
        m(z, t, g[:, :2], txt)
    with pytest.raises(ValueError, match="text"):
        m(z, t, g, txt[:, :3])


def test_edm_preconditioned_outputs_agree():
    from dataclasses import replace
    m = randomised(replace(TINY, sigma_data=0.75))
    z, t, g, txt = inputs()
    x_hat = m(z, t, g, txt, output="x")
    v = m(z, t, g, txt)
    assert torch.allclose(v, (z - x_hat) / t.view(-1, 1, 1, 1, 1), atol=1e-5)
    fresh = Teacher(replace(TINY, sigma_data=0.75))          # F = 0: x_hat is the best linear guess
    from alaya.diffusion.flow import edm_coefficients
    c_skip = edm_coefficients(t, 0.75)[1].view(-1, 1, 1, 1, 1)
    assert torch.allclose(fresh(z, t, g, txt, output="x"), c_skip * z, atol=1e-6)
    with pytest.raises(ValueError, match="output"):
        m(z, t, g, txt, output="eps")


def test_half_storage_halves_the_file_and_loads_back_as_float32(tmp_path):
    m = randomised()
    m.save_pretrained(tmp_path / "full")
    m.save_pretrained(tmp_path / "half", dtype=torch.float16)
    full, half = ((tmp_path / n / "model.safetensors").stat().st_size for n in ("full", "half"))
    assert half < 0.6 * full
    back = Teacher.from_pretrained(tmp_path / "half")
    assert all(p.dtype == torch.float32 for p in back.parameters())
    for (k, a), b in zip(m.state_dict().items(), back.state_dict().values()):
        assert torch.allclose(a, b, rtol=1e-3, atol=1e-4), k
    assert '"stored_dtype": "float16"' in (tmp_path / "half" / "config.json").read_text()


def test_model_card_names_the_stored_dtype_and_the_training_hardware(tmp_path):
    from alaya.nn.model_card import write_model_card
    randomised().save_pretrained(tmp_path / "gpu", dtype=torch.float16,
                                 trained={"steps": 7, "batch_size": 2, "hardware": "1 NVIDIA H200, bf16 autocast"})
    randomised().save_pretrained(tmp_path / "cpu", trained={"steps": 7, "batch_size": 2})
    gpu = write_model_card(tmp_path / "gpu", "t", "s", "u", "d").read_text()
    cpu = write_model_card(tmp_path / "cpu", "t", "s", "u", "d").read_text()
    assert "as float16 safetensors" in gpu and "- Hardware: 1 NVIDIA H200, bf16 autocast" in gpu
    assert "as float32 safetensors" in cpu and "CPU, PyTorch fp32, no GPU" in cpu
    assert "- Wall time: see the run folder" in cpu
    randomised().save_pretrained(tmp_path / "chunks", trained={"steps": 7, "wall_minutes": 404.0})
    assert "- Wall time: 404.0 min" in write_model_card(tmp_path / "chunks", "t", "s", "u", "d").read_text()


def test_view_branch_starts_at_zero_and_a_zero_view_means_none():
    """A teacher that gains the view branch computes what it did without it; once trained, the
    view changes the output, a zero view (camera unknown) still adds nothing, and a badly shaped
    view or a view for a model without the branch is an error."""
    cfg = TeacherConfig(**{**TINY.__dict__, "view_channels": 2})
    z, t, g, txt = inputs()
    view = torch.randn(2, 3, 2, 32, 48)
    m = randomised(cfg)
    with torch.no_grad():
        m.view[-1].weight.zero_()
    assert torch.equal(m(z, t, g, txt), m(z, t, g, txt, view=view))
    with torch.no_grad():
        m.view[-1].weight.normal_(0, 0.05)
    assert not torch.allclose(m(z, t, g, txt), m(z, t, g, txt, view=view))
    assert torch.equal(m(z, t, g, txt), m(z, t, g, txt, view=torch.zeros_like(view)))
    with pytest.raises(ValueError, match="view"):
        m(z, t, g, txt, view=view[..., :16, :])
    with pytest.raises(ValueError, match="no view branch"):
        randomised()(z, t, g, txt, view=view)


def test_per_pixel_view_features_keep_zero_in_zero_out():
    """With ``view_pixel`` the per-pixel MLP's features join the view input: a zero view still
    adds nothing, and a change in one pixel moves only the latent cell (and, through the 3x3
    convolutions, its neighbours) that holds it."""
    cfg = TeacherConfig(**{**TINY.__dict__, "view_channels": 3, "view_pixel": 4})
    z, t, g, txt = inputs()
    view = torch.randn(2, 3, 3, 32, 48)
    m = randomised(cfg)
    assert m.view[1].in_channels == 64 * (3 + 4)
    assert torch.equal(m(z, t, g, txt), m(z, t, g, txt, view=torch.zeros_like(view)))
    assert not torch.allclose(m(z, t, g, txt), m(z, t, g, txt, view=view))
    other = view.clone()
    other[0, 1, :, 0, 0] += 1.0                 # pixel (0, 0) of frame 1 of sample 0
    moved = (m(z, t, g, txt, view=other) - m(z, t, g, txt, view=view)).abs()
    assert moved[1].max() == 0                  # another sample does not see it
    assert moved[0, 1].amax(dim=0)[0, 0] > 0


def test_view_features_once_equal_the_view_every_step():
    """A sampler computes the view branch once per window: same output as passing the view."""
    cfg = TeacherConfig(**{**TINY.__dict__, "view_channels": 3, "view_pixel": 4})
    z, t, g, txt = inputs()
    view = torch.randn(2, 3, 3, 32, 48)
    m = randomised(cfg)
    features = m.view_features(view, z.shape)
    assert torch.allclose(m(z, t, g, txt, view=view), m(z, t, g, txt, view_features=features), atol=1e-6)
    with pytest.raises(ValueError, match="not both"):
        m(z, t, g, txt, view=view, view_features=features)
    with pytest.raises(ValueError, match="view_features"):
        m(z, t, g, txt, view_features=features[:, :8])


@pytest.mark.parametrize("pixel", [0, 4])
def test_strided_view_branch_computes_the_same_function(pixel):
    from alaya.nn.unet import apply_view, pixel_features, strided_view_branch, view_branch
    torch.manual_seed(0)
    branch = view_branch(8 + pixel, 16)
    for p in branch.parameters():
        p.data.normal_(0, 0.1)
    per_pixel = pixel_features(8, pixel) if pixel else None
    view = torch.randn(2, 8, 32, 48)
    expect = apply_view(branch, per_pixel, view)
    strided = strided_view_branch(branch)
    assert isinstance(strided[0], torch.nn.Conv2d) and strided[0].stride == (8, 8)
    assert torch.allclose(apply_view(strided, per_pixel, view), expect, atol=1e-5)
    with torch.no_grad():                      # a channel/offset mix-up would show: move one weight
        strided[0].weight[0, 0, 0, 1] += 1.0
    assert not torch.allclose(apply_view(strided, per_pixel, view), expect, atol=1e-3)
