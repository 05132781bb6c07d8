"""Every Flash distillation stage runs for a few steps on a tiny dataset, in order, each from the
previous stage's weights, and leaves a loadable student with the right sampling settings."""

import pytest
import torch

from alaya.codecs import Autoencoder, AutoencoderConfig, TinyGBufferEncoder, TinyGBufferEncoderConfig
from alaya.models.student import Student, StudentConfig
from alaya.models.student_training import STAGES, StudentTrainConfig, train_student
from alaya.models.teacher import Teacher, teacher_config
from alaya.train.loop import TrainConfig


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


def test_stage_errors(tiny_dataset, tiny_models, tmp_path):
    with pytest.raises(ValueError, match="unknown stage"):
        train_student(StudentTrainConfig(data=str(tiny_dataset), stage="bogus"))
    with pytest.raises(ValueError, match="--init"):
        train_student(StudentTrainConfig(data=str(tiny_dataset), stage="meanflow"))
