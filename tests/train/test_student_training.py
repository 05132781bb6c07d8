"""Every Flash distillation stage runs for a few steps on a tiny dataset, in order, each from the
previous stage's weights, and leaves a loadable student with the right sampling settings."""

import pytest
import torch

from alaya.codecs import Autoencoder, AutoencoderConfig, TinyGBufferEncoder, TinyGBufferEncoderConfig
from alaya.models.student import Student, StudentConfig
from alaya.models.teacher import Teacher, teacher_config
from alaya.train.loop import TrainConfig
from alaya.train.student import STAGES, StudentTrainConfig, train_student


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("student_models")
    torch.manual_seed(0)
    Autoencoder(AutoencoderConfig(latent_channels=4, channels=(8, 8, 8))).save_pretrained(root / "ae")
    TinyGBufferEncoder(TinyGBufferEncoderConfig(latent_channels=4, width=4)).save_pretrained(root / "enc")
    teacher = Teacher(teacher_config("tiny", latent_channels=4, gbuffer_channels=20, widths=(8, 16)))
    with torch.no_grad():
        for p in teacher.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    teacher.save_pretrained(root / "teacher")
    return root


def test_stages_in_order(tiny_dataset, tiny_models, tmp_path):
    init = None
    for stage in STAGES:
        cfg = StudentTrainConfig(
            data=str(tiny_dataset), stage=stage, teacher=str(tiny_models / "teacher"),
            autoencoder=str(tiny_models / "ae"), tiny_encoder=str(tiny_models / "enc"), init=init,
            out=str(tmp_path / stage), teacher_window=2, sample_steps=8, rollout=1,
            noise="fixed" if stage == "tiny" else None,
            student=StudentConfig(latent_channels=4, gbuffer_channels=20, text_dim=384, widths=(8, 16),
                                  emb_dim=8, context=1),
            train=TrainConfig(run_dir=str(tmp_path / f"run_{stage}"), steps=2, batch_size=2, log_every=1,
                              ckpt_every=2, progress=False, warmup=1, lr=1e-3))
        before = Student.from_pretrained(init) if init else None
        train_student(cfg)
        s = Student.from_pretrained(tmp_path / stage)
        if before is not None:
            assert any(not torch.equal(a, b) for a, b in zip(before.state_dict().values(),
                                                              s.state_dict().values())), stage
        init = str(tmp_path / stage)
    final = Student.from_pretrained(init)
    assert final.config.steps == 4 and final.config.average_velocity
    assert final.config.noise == "fixed" and Student.from_pretrained(tmp_path / "steps").config.noise == "frame"


def test_stage_errors(tiny_dataset, tiny_models, tmp_path):
    with pytest.raises(ValueError, match="unknown stage"):
        train_student(StudentTrainConfig(data=str(tiny_dataset), stage="bogus"))
    with pytest.raises(ValueError, match="--init"):
        train_student(StudentTrainConfig(data=str(tiny_dataset), stage="meanflow"))
    with pytest.raises(ValueError, match="meanflow_max_frequency"):
        train_student(StudentTrainConfig(data=str(tiny_dataset), stage="meanflow", init="x", meanflow_max_frequency=0.0))


@pytest.mark.parametrize("max_frequency", [64.0, None])
def test_meanflow_takes_its_derivative_under_the_band_limit(tiny_dataset, tiny_models, tmp_path, monkeypatch,
                                                            max_frequency):
    """The 'meanflow' stage's JVP runs with the time embedding's fast phases held constant
    (``smooth_time_derivative``), or exactly with ``meanflow_max_frequency=None``."""
    import alaya.models.student as student_module
    import alaya.train.student as st
    from alaya.nn import conditioning
    seen, in_loss, real_loss, real_embedding = [], [], st.meanflow_loss, student_module.timestep_embedding

    def spy(*args, **kwargs):                    # the embeddings computed within the loss (not the rollout's)
        in_loss.append(True)
        try:
            return real_loss(*args, **kwargs)
        finally:
            in_loss.clear()

    def embedding(*args, **kwargs):
        if in_loss:
            seen.append(getattr(conditioning._band, "max_frequency", None))
        return real_embedding(*args, **kwargs)

    common = dict(data=str(tiny_dataset), teacher=str(tiny_models / "teacher"), autoencoder=str(tiny_models / "ae"),
                  tiny_encoder=str(tiny_models / "enc"), teacher_window=2, rollout=1,
                  student=StudentConfig(latent_channels=4, gbuffer_channels=20, text_dim=384, widths=(8, 16),
                                        emb_dim=8, context=1))
    train = dict(steps=1, batch_size=2, log_every=1, ckpt_every=1, progress=False, warmup=1, lr=1e-3)
    train_student(StudentTrainConfig(**common, stage="ar", out=str(tmp_path / "ar"),
                                     train=TrainConfig(run_dir=str(tmp_path / "run_ar"), **train)))
    monkeypatch.setattr(st, "meanflow_loss", spy)
    monkeypatch.setattr(student_module, "timestep_embedding", embedding)
    train_student(StudentTrainConfig(**common, stage="meanflow", init=str(tmp_path / "ar"), out=str(tmp_path / "mf"),
                                     meanflow_max_frequency=max_frequency,
                                     train=TrainConfig(run_dir=str(tmp_path / "run_mf"), **train)))
    assert seen and all(s == max_frequency for s in seen)          # the JVP's call and the plain one
    assert getattr(conditioning._band, "max_frequency", None) is None


def test_data_only_ar_never_calls_the_teacher(tiny_dataset, tiny_models, tmp_path, monkeypatch):
    """teacher_weight 0: the 'ar' stage fits the data alone and the teacher is never run; it
    needs data_weight > 0."""
    import alaya.train.student as st

    def no_teacher(*args, **kwargs):
        raise AssertionError("teacher called with teacher_weight 0")

    monkeypatch.setattr(st, "teacher_velocity", no_teacher)
    common = dict(data=str(tiny_dataset), stage="ar", teacher=str(tiny_models / "teacher"),
                  autoencoder=str(tiny_models / "ae"), tiny_encoder=str(tiny_models / "enc"),
                  out=str(tmp_path / "ar"), teacher_window=2, teacher_weight=0.0,
                  student=StudentConfig(latent_channels=4, gbuffer_channels=20, text_dim=384, widths=(8, 16),
                                        emb_dim=8, context=1),
                  train=TrainConfig(run_dir=str(tmp_path / "run"), steps=3, batch_size=2, log_every=1,
                                    ckpt_every=3, progress=False, warmup=1, lr=1e-3))
    with pytest.raises(ValueError, match="data_weight"):
        train_student(StudentTrainConfig(**common))
    train_student(StudentTrainConfig(**common, data_weight=1.0))
    assert Student.from_pretrained(tmp_path / "ar").config.steps == 4
    # the same on contexts the student rolls out itself
    calls = []
    real_sample = st.sample_student
    monkeypatch.setattr(st, "sample_student", lambda *a, **k: calls.append(1) or real_sample(*a, **k))
    train_student(StudentTrainConfig(**{**common, "train": TrainConfig(
        run_dir=str(tmp_path / "run_self"), steps=2, batch_size=2, log_every=1, ckpt_every=2, progress=False,
        warmup=1, lr=1e-3)}, data_weight=1.0, self_context=1.0, rollout=1))
    assert len(calls) == 2                       # one rolled-out frame per step
    with pytest.raises(ValueError, match=">= 0"):
        train_student(StudentTrainConfig(**{**common, "teacher_weight": -1.0}, data_weight=1.0))


def test_new_student_takes_the_teachers_shape(tiny_models):
    """--student-widths/--student-blocks set to the teacher's: every teacher tensor is copied."""
    from alaya.train.student import build_student
    teacher = Teacher.from_pretrained(tiny_models / "teacher")
    tc = teacher.config
    cfg = StudentTrainConfig(data="unused", widths=tuple(tc.widths), blocks=tc.blocks)
    student = build_student(cfg, teacher)
    assert student.config.blocks == tc.blocks and tuple(student.config.widths) == tuple(tc.widths)
    own, theirs = student.state_dict(), teacher.state_dict()
    shared = [k for k in own if k in theirs and own[k].shape == theirs[k].shape]
    assert len(shared) > 0.8 * len(own)              # all but the interval MLP and the context stem
    assert all(torch.equal(own[k], theirs[k]) for k in shared)


@pytest.mark.parametrize("channels, pixel", [(8, 0), (17, 4)])
def test_stages_with_a_view_teacher(tiny_dataset, tiny_models, tmp_path, channels, pixel):
    """A teacher with a view branch gives the student one (copied), and the stages that call the
    teacher, roll the student out or match a frozen copy feed both the clips' cameras (and, with
    17 channels, their G-buffers at pixel resolution)."""
    torch.manual_seed(0)
    teacher = Teacher(teacher_config("tiny", latent_channels=4, gbuffer_channels=20, widths=(8, 16),
                                     view_channels=channels, view_pixel=pixel))
    with torch.no_grad():
        for p in teacher.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    teacher.save_pretrained(tmp_path / "teacher")
    init = None
    for stage in ("ar", "meanflow", "tiny"):
        train_student(StudentTrainConfig(
            data=str(tiny_dataset), stage=stage, teacher=str(tmp_path / "teacher"),
            autoencoder=str(tiny_models / "ae"), tiny_encoder=str(tiny_models / "enc"), init=init,
            out=str(tmp_path / stage), teacher_window=2, rollout=1, view_dropout=0.5,
            student=StudentConfig(latent_channels=4, gbuffer_channels=20, text_dim=384, widths=(8, 16),
                                  emb_dim=8, context=1),
            train=TrainConfig(run_dir=str(tmp_path / f"run_{stage}"), steps=2, batch_size=2, log_every=1,
                              ckpt_every=2, progress=False, warmup=1, lr=1e-3)))
        init = str(tmp_path / stage)
        s = Student.from_pretrained(init)
        assert s.config.view_channels == channels and s.config.view_pixel == pixel and s.view is not None
        assert (s.view_pixel is not None) == (pixel > 0)
    first = Student.from_pretrained(tmp_path / "ar")
    assert not torch.equal(first.view[3].weight, teacher.view[3].weight)   # trained, from the teacher's


def _as_identity(student, names):
    """Make the blocks ``names`` of ``student`` identities (their residual branch and temporal mix zero)."""
    with torch.no_grad():
        for name in names:
            block = student.get_submodule(name)
            for p in (block.conv2.weight, block.conv2.bias, block.temporal.conv.weight, block.temporal.conv.bias):
                p.zero_()


def _finished_student(seed=0):
    torch.manual_seed(seed)
    big = Student(StudentConfig(latent_channels=4, gbuffer_channels=20, text_dim=384, widths=(8, 16), emb_dim=8,
                                context=1, blocks=2, noise="fixed"))
    with torch.no_grad():
        for p in big.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return big.eval()


def test_compressed_student_takes_the_finished_students_steps():
    """With fewer blocks the compressed student keeps the first of each level; when the dropped
    blocks are identities it computes the same function, so at every point of the finished
    student's own trajectory (``trajectory_targets``) it takes the same step — and it does not
    when a dropped block does something."""
    import numpy as np

    from alaya.models.student import integrate_student
    from alaya.train.student import compressed_student, trajectory_targets
    big = _finished_student()
    _as_identity(big, ["down0.1", "mid.2", "mid.3", "up0.1"])
    small = compressed_student(big, None, 1).eval()
    assert small.config.blocks == 1 and len(small.mid) == 2
    assert (small.config.steps, small.config.noise, small.config.widths) == (big.config.steps, "fixed", (8, 16))
    assert torch.equal(small.mid[1].conv1.weight, big.mid[1].conv1.weight)
    B = 6
    g, text = torch.randn(B, 20, 4, 4), torch.randn(B, 384)
    ctx, valid, eps = torch.randn(B, 1, 4, 4, 4), torch.ones(B, 1, 1, 4, 4), torch.randn(B, 4, 4, 4)
    z, r, t, target = trajectory_targets(big, eps, g, text, ctx, valid, None, np.random.default_rng(3))
    k = np.random.default_rng(3).integers(big.config.steps, size=B)      # the steps drawn
    ts = torch.linspace(1, 0, big.config.steps + 1)
    assert torch.equal(t, ts[k]) and torch.equal(r, t)                   # a velocity student: r = t
    for i in range(B):                                                    # z: k of the student's own steps
        own = integrate_student(big, eps[i:i + 1], ts[:k[i] + 1], g[i:i + 1], text[i:i + 1], ctx[i:i + 1],
                                valid[i:i + 1])
        assert torch.allclose(z[i:i + 1], own, atol=1e-5)
    with torch.no_grad():
        assert torch.allclose(small(z, r, t, g, text, ctx, valid), target, atol=1e-5)
        big.mid[3].conv2.weight.normal_(0, 0.1)
        _, _, _, moved = trajectory_targets(big, eps, g, text, ctx, valid, None, np.random.default_rng(3))
        assert (small(z, r, t, g, text, ctx, valid) - moved).abs().max() > 1e-3
    with pytest.raises(ValueError, match="widths and/or blocks"):
        compressed_student(big, None, None)
    with pytest.raises(ValueError, match="own"):
        compressed_student(big, (8, 16), 2)


def test_compress_stage_trains_a_smaller_student(tiny_dataset, tiny_models, tmp_path):
    _finished_student().save_pretrained(tmp_path / "big")
    train_student(StudentTrainConfig(
        data=str(tiny_dataset), stage="compress", teacher=str(tiny_models / "teacher"),
        autoencoder=str(tiny_models / "ae"), tiny_encoder=str(tiny_models / "enc"), init=str(tmp_path / "big"),
        blocks=1, out=str(tmp_path / "small"),
        train=TrainConfig(run_dir=str(tmp_path / "run"), steps=2, batch_size=2, log_every=1, ckpt_every=2,
                          progress=False, warmup=1, lr=1e-3)))
    big, small = Student.from_pretrained(tmp_path / "big"), Student.from_pretrained(tmp_path / "small")
    assert small.config.blocks == 1 and small.config.noise == "fixed" and small.config.steps == big.config.steps
    assert not torch.equal(small.mid[0].conv1.weight, big.mid[0].conv1.weight)        # trained from the copy
    with pytest.raises(ValueError, match="widths and/or blocks"):
        train_student(StudentTrainConfig(data=str(tiny_dataset), stage="compress", teacher=str(tiny_models / "teacher"),
                                         autoencoder=str(tiny_models / "ae"), tiny_encoder=str(tiny_models / "enc"),
                                         init=str(tmp_path / "big")))
