"""The U-Net core the teacher and the student share (``alaya.nn.unet``)."""

import torch

from alaya.models.student import Student, StudentConfig
from alaya.models.teacher import Teacher, TeacherConfig
from alaya.nn.unet import UNetCore

CORE = ("down0", "down", "mid", "up", "up0", "out_norm", "out")


def perturbed(model):
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model.eval()


def test_the_teacher_and_the_student_run_one_core():
    """Both are a ``UNetCore``; with the teacher's weights a student's core computes, on one
    frame, what the teacher's computes (a temporal convolution over one frame is a 1x1 map)."""
    kw = dict(latent_channels=4, gbuffer_channels=6, text_dim=5, widths=(8, 16), blocks=1, emb_dim=8)
    teacher = perturbed(Teacher(TeacherConfig(**kw)))
    student = Student(StudentConfig(**kw)).eval()
    assert isinstance(teacher, UNetCore) and isinstance(student, UNetCore)
    student.init_from_teacher(teacher)
    g = torch.Generator().manual_seed(1)
    x, emb = torch.randn(2, 8, 4, 6, generator=g), torch.randn(2, 8, generator=g)
    with torch.no_grad():
        assert torch.equal(student.run_core(x, emb, 1), teacher.run_core(x, emb, 1))


def test_the_core_keeps_the_state_dict_names_of_the_shipped_weights():
    """The core's modules are the model's own attributes: no ``core.`` prefix in the keys, so
    weights saved before the core was shared load strictly (``from_pretrained``; the shipped
    ones are loaded in tests/models/test_shipped_outputs.py)."""
    student = Student(StudentConfig(latent_channels=4, gbuffer_channels=6, widths=(8, 16), emb_dim=8))
    keys = set(student.state_dict())
    for name in CORE:
        assert any(k.startswith(f"{name}.") for k in keys), name
    assert "down0.0.temporal.conv.weight" in keys and "up0.0.skip.weight" in keys
    assert not any(k.startswith("core.") for k in keys)
