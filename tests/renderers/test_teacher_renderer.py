"""The teacher renderer and ``alaya render``: shapes, determinism, prompt dependence, windows,
output formats and clear errors."""

import numpy as np
import pytest
import torch
from PIL import Image

from alaya.cli import main
from alaya.codecs import Autoencoder, AutoencoderConfig
from alaya.data.dataset import ClipDataset
from alaya.models.teacher import Teacher, teacher_config
from alaya.renderers import SamplerConfig, TeacherRenderer, write_frames


@pytest.fixture(scope="module")
def tiny_weights(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_teacher")
    torch.manual_seed(0)
    Autoencoder(AutoencoderConfig(latent_channels=4, channels=(8, 8, 8))).save_pretrained(root / "ae")
    teacher = Teacher(teacher_config("tiny", latent_channels=4, gbuffer_channels=20, widths=(8, 16)))
    with torch.no_grad():                 # zero-initialised outputs would hide the prompt
        for p in teacher.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    teacher.save_pretrained(root / "teacher")
    return root


def clip_of(ds_root):
    ds = ClipDataset(ds_root)
    return ds.load(ds.ids()[0])


def renderer(root, **kw):
    return TeacherRenderer.from_pretrained(root / "teacher", root / "ae", sampler=SamplerConfig(steps=3, **kw))


def test_render_shapes_determinism_and_prompt(tiny_weights, tiny_dataset):
    clip = clip_of(tiny_dataset)
    r = renderer(tiny_weights)
    a = r.render(clip, "a clear sunny noon", seed=1)
    T, H, W = clip["depth"].shape
    assert a.shape == (T, H, W, 3) and a.dtype == np.uint8
    assert np.array_equal(a, r.render(clip, "a clear sunny noon", seed=1))
    assert not np.array_equal(a, r.render(clip, "a moonlit night", seed=1))
    assert not np.array_equal(a, r.render(clip, "a clear sunny noon", seed=2))


def test_noise_scale_zero_removes_the_seed_and_bad_scales_are_refused(tiny_weights, tiny_dataset):
    """A zero starting noise makes the sample a function of the G-buffer and the prompt alone."""
    clip = clip_of(tiny_dataset)
    r = renderer(tiny_weights, noise_scale=0.0)
    assert np.array_equal(r.render(clip, "toon", seed=1), r.render(clip, "toon", seed=2))
    half = renderer(tiny_weights, noise_scale=0.5)
    assert not np.array_equal(half.render(clip, "toon", seed=1), half.render(clip, "toon", seed=2))
    with pytest.raises(ValueError, match="noise_scale"):
        SamplerConfig(noise_scale=1.5)


def test_bf16_precision_runs_the_network_in_bf16_and_stays_close(tiny_weights, tiny_dataset):
    """bf16 autocast changes the teacher's arithmetic (the latents differ from fp32's), not its
    result (close to fp32's); the sampler's state stays fp32; other precisions are refused."""
    clip = clip_of(tiny_dataset)
    fp32, bf16 = renderer(tiny_weights), renderer(tiny_weights, precision="bf16")
    seen = {}

    def record(name):
        def hook(module, inputs, output):        # returns None: the output is left as it is
            seen.setdefault(name, output.dtype)
        return hook
    for name, r in (("fp32", fp32), ("bf16", bf16)):
        r.teacher.stem.register_forward_hook(record(name))
    g = fp32.gbuffer_latents(clip)
    text = fp32.prompt_encoder.encode("toon")[0]
    a, b = fp32.sample_latents(g, text, seed=3), bf16.sample_latents(g, text, seed=3)
    assert seen == {"fp32": torch.float32, "bf16": torch.bfloat16}     # the network itself ran in bf16
    T, _, h, w = g.shape
    z = torch.randn(1, T, bf16.teacher.config.latent_channels, h, w)
    cond = {"gbuffer": g[None], "text": text[None]}
    assert bf16._call(z, torch.full((1,), 0.5), **cond).dtype == torch.float32   # velocities come back fp32
    assert a.dtype == b.dtype == torch.float32
    assert not torch.equal(a, b)
    assert (a - b).abs().max() < 0.05 * a.abs().max()
    with pytest.raises(ValueError, match="precision"):
        SamplerConfig(precision="fp16")


def test_windows_cover_every_frame(tiny_weights, tiny_dataset):
    clip = clip_of(tiny_dataset)
    out = renderer(tiny_weights, window=2).render(clip, "toon", seed=0)
    assert out.shape[0] == clip["depth"].shape[0]


def test_bad_gbuffers_are_named(tiny_weights, tiny_dataset):
    clip = clip_of(tiny_dataset)
    r = renderer(tiny_weights)
    with pytest.raises(KeyError, match="normal"):
        r.render({k: v for k, v in clip.items() if k != "normal"}, "x")
    with pytest.raises(ValueError, match="multiples of 16"):
        r.render({k: v[:, :24, :24] if v.ndim >= 3 and k != "rgb" else v for k, v in clip.items()}, "x")
    bad = dict(clip, depth=clip["depth"].copy())
    bad["depth"][0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        r.render(bad, "x")
    with pytest.raises(ValueError, match="sampler"):
        SamplerConfig(sampler="ddim")


def test_write_frames_formats(tmp_path):
    frames = np.random.default_rng(0).integers(0, 256, (4, 32, 48, 3), dtype=np.uint8)
    (gif,) = write_frames(tmp_path / "a.gif", frames)
    assert Image.open(gif).n_frames == 4
    pngs = write_frames(tmp_path / "b.png", frames)
    assert len(pngs) == 4 and np.array_equal(np.asarray(Image.open(pngs[2])), frames[2])
    (mp4,) = write_frames(tmp_path / "c.mp4", frames)
    import imageio.v2 as imageio
    assert len(imageio.mimread(mp4)) == 4
    with pytest.raises(ValueError, match="unsupported"):
        write_frames(tmp_path / "d.avi", frames)
    with pytest.raises(ValueError, match="uint8"):
        write_frames(tmp_path / "e.gif", frames.astype(np.float32))


def test_render_cli(tiny_weights, tiny_dataset, tmp_path):
    clip_path = ClipDataset(tiny_dataset).path(ClipDataset(tiny_dataset).ids()[0])
    out = tmp_path / "out.gif"
    rc = main(["render", "--clip", str(clip_path), "--prompt", "a golden sunset", "--out", str(out),
               "--weights", str(tiny_weights / "teacher"), "--autoencoder", str(tiny_weights / "ae"),
               "--steps", "2"])
    assert rc == 0 and Image.open(out).n_frames == 3
    rc = main(["render", "--clip", str(tmp_path / "missing.npz"), "--prompt", "x", "--out", str(out),
               "--weights", str(tiny_weights / "teacher"), "--autoencoder", str(tiny_weights / "ae")])
    assert rc == 2


def test_render_cli_from_a_gbuffer_folder(tiny_weights, tmp_path):
    """Engine exports without any RGB: per-frame depth (NPY) and albedo (PNG) + gbuffers.json."""
    import json
    src = tmp_path / "export"
    rng = np.random.default_rng(0)
    for key in ("depth", "albedo"):
        (src / key).mkdir(parents=True)
    for t in range(3):
        np.save(src / "depth" / f"{t:04d}.npy", rng.uniform(2, 9, (32, 32)).astype(np.float32))
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(src / "albedo" / f"{t:04d}.png")
    (src / "gbuffers.json").write_text(json.dumps({
        "fps": 30, "width": 32, "height": 32, "camera": {"fov_y_degrees": 60},
        "channels": {"depth": {"dir": "depth"}, "albedo": {"dir": "albedo"}}}))
    out = tmp_path / "frames"
    rc = main(["render", "--gbuffers", str(src), "--prompt", "a foggy morning", "--out", str(out),
               "--weights", str(tiny_weights / "teacher"), "--autoencoder", str(tiny_weights / "ae"),
               "--steps", "2"])
    assert rc == 0 and len(list(out.glob("frame_*.png"))) == 3


def test_alaya_render_shows_the_teachers_progress(tiny_weights, tiny_dataset, tmp_path, capsys):
    """``make showcase`` renders a clip with the teacher for minutes: a bar of its steps on stderr."""
    clip_path = sorted((tiny_dataset / "clips").glob("*.npz"))[0]
    out = tmp_path / "t.gif"
    assert main(["render", "--clip", str(clip_path), "--weights", str(tiny_weights / "teacher"), "--autoencoder",
                 str(tiny_weights / "ae"), "--steps", "3", "--window", "2", "--prompt", "toon", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    T = ClipDataset(tiny_dataset).load(clip_path.stem)["depth"].shape[0]
    windows = -(-T // 2)
    assert "teacher" in err and f"{3 * windows}/{3 * windows}" in err and out.exists()
