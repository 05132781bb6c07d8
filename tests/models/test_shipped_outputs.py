"""The shipped weights give the numbers they gave when these literals were recorded (before issue
31's refactor of the U-Net core, the sampling step and the backends): forward passes of the
teacher and the student, the student's steps, and the frames of a render session and a world
session on a fixed synthetic clip. Checked as checksums with a small tolerance, so that another
CPU's float rounding passes while any change of the computation fails."""

import numpy as np
import pytest
import torch

from alaya.models.student import Student, sample_student
from alaya.models.teacher import Teacher

WEIGHTS = "weights"


def checksums(x: torch.Tensor) -> tuple[float, float, float]:
    """(sum, abs sum, sum weighted by a fixed random tensor): order- and sign-sensitive."""
    x = x.detach().double().flatten()
    w = torch.randn(x.numel(), generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    return float(x.sum()), float(x.abs().sum()), float((x * w).sum())


def assert_checksums(x: torch.Tensor, expected: tuple[float, float, float], rel: float = 1e-5):
    got = checksums(x)
    scale = abs(expected[1])                     # errors of a sum scale with the values' magnitude
    for g, e in zip(got, expected):
        assert g == pytest.approx(e, abs=rel * scale), (got, expected)


@pytest.fixture(scope="module")
def teacher():
    return Teacher.from_pretrained(f"{WEIGHTS}/teacher").eval()       # strict load: every key


@pytest.fixture(scope="module")
def student():
    return Student.from_pretrained(f"{WEIGHTS}/student").eval()


def student_inputs(h: int = 8):
    g = torch.Generator().manual_seed(32)
    return dict(z=torch.randn(1, 32, h, h, generator=g), gbuffer=torch.randn(1, 160, h, h, generator=g),
                text=torch.randn(1, 384, generator=g), context=torch.randn(1, 2, 32, h, h, generator=g),
                context_valid=(torch.rand(1, 2, 1, h, h, generator=g) > 0.3).float(),
                view=torch.randn(1, 8, 8 * h, 8 * h, generator=g))


@torch.no_grad()
def test_teacher_forward_is_unchanged(teacher):
    g = torch.Generator().manual_seed(31)
    B, T, h = 1, 3, 8
    z = torch.randn(B, T, 32, h, h, generator=g)
    gbuffer = torch.randn(B, T, 160, h, h, generator=g)
    text = torch.randn(B, 384, generator=g)
    view = torch.randn(B, T, 8, 8 * h, 8 * h, generator=g)
    assert_checksums(teacher(z, torch.tensor([0.7]), gbuffer, text, view=view), EXPECTED["teacher_v"])
    assert_checksums(teacher(z, torch.tensor([0.2]), gbuffer, text, output="x"), EXPECTED["teacher_x"])


@torch.no_grad()
def test_student_forward_and_steps_are_unchanged(student):
    x = student_inputs()
    u = student(x["z"], torch.tensor([0.5]), torch.tensor([0.75]), x["gbuffer"], x["text"], x["context"],
                x["context_valid"], view=x["view"])
    assert_checksums(u, EXPECTED["student_u"])
    ts = torch.linspace(1.0, 0.0, 5)
    z = sample_student(student, x["z"], ts, x["gbuffer"], x["text"], x["context"], x["context_valid"], x["view"])
    assert_checksums(z, EXPECTED["student_euler"])
    student.config.average_velocity = True              # MeanFlow steps: r the next grid time
    try:
        z = sample_student(student, x["z"], ts, x["gbuffer"], x["text"], x["context"], x["context_valid"],
                           x["view"])
    finally:
        student.config.average_velocity = False
    assert_checksums(z, EXPECTED["student_meanflow"])


def synthetic_clip(T: int = 4, S: int = 32, seed: int = 0) -> list[dict]:
    """A fixed G-buffer clip with a camera (the shipped student reads it), no engine needed."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:S, 0:S] / S
    frames = []
    for i in range(T):
        n = np.stack([np.sin(3 * x + i * 0.1), np.cos(2 * y), np.ones_like(x)], -1)
        n = n / np.linalg.norm(n, axis=-1, keepdims=True)
        w2c = np.eye(4, dtype=np.float32)
        w2c[0, 3] = 0.1 * i
        frames.append({"depth": (2 + 3 * y + 0.1 * i).astype(np.float32), "normal": n.astype(np.float32),
                       "albedo": np.clip(rng.random((S, S, 3)) * 0.3 + np.stack([x, y, 1 - x], -1) * 0.7,
                                         0, 1).astype(np.float32),
                       "roughness": (0.5 + 0.4 * x).astype(np.float32), "metallic": (y > 0.7).astype(np.float32),
                       "motion": np.full((S, S, 2), 0.5 * i, np.float32),
                       "K": np.array([[S, 0, S / 2], [0, S, S / 2], [0, 0, 1]], np.float32),
                       "world_to_camera": w2c})
    return frames


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_render_session_frames_are_unchanged(student, backend):
    from alaya.codecs.tiny import TinyDecoder, TinyGBufferEncoder
    from alaya.runtime import RenderSession
    from alaya.runtime.backends import make_backend
    session = RenderSession(make_backend(backend, student,
                                         TinyGBufferEncoder.from_pretrained(f"{WEIGHTS}/tiny_gbuffer_encoder"),
                                         TinyDecoder.from_pretrained(f"{WEIGHTS}/tiny_decoder")),
                            prompt="a clear sunny noon", seed=3)
    clip = synthetic_clip()
    latents = [session.step_latent(f) for f in clip]
    assert_checksums(torch.cat(latents), EXPECTED["session_latents"], rel=1e-4)
    session.reset()
    frames = session.run(clip).astype(np.int64)
    sums = frames.reshape(len(clip), -1).sum(1)
    # uint8 rounding may flip a few values by one grey level on another CPU
    assert np.abs(sums - np.array(EXPECTED["session_frame_sums"])).max() <= 16, sums.tolist()


def test_world_session_frames_are_unchanged():
    """The shipped memory model at its play size: a walk, a strafe and a stand from a start frame
    with its recorded depth and camera (the camera from its learned camera_motion/)."""
    from alaya.runtime.world_factory import WorldSessionFactory
    from alaya.runtime.world_folder import load_start_depths, load_start_frames, load_start_views
    factory = WorldSessionFactory.from_pretrained(f"{WEIGHTS}/world_model", size=128, backend="torch")
    session = factory.new("a golden sunset", seed=5)
    session.reset(load_start_frames(f"{WEIGHTS}/world_model", size=128)[0],
                  depth=load_start_depths(f"{WEIGHTS}/world_model", size=128)[0],
                  view=load_start_views(f"{WEIGHTS}/world_model")[0])
    actions = [np.array([1, 0, 0.5, 0.2, 0, 0, 0, 0], np.float32), np.array([0.5, 0.3, -0.4, 0, 0, 0, 0, 0], np.float32),
               np.zeros(8, np.float32)]
    latents = [session.step_latent(a) for a in actions]
    assert_checksums(torch.cat(latents), EXPECTED["world_latents"], rel=1e-4)


# Recorded from the weights as shipped, before the refactor (torch 2.x on x86-64, fp32).
EXPECTED = {
    "teacher_v": (300.9892652990238, 9699.53991919299, 305.4296421295844),
    "teacher_x": (99.66071464959532, 5018.743786309846, 91.47803077450845),
    "student_u": (-63.63363513816148, 2532.203047890216, -28.988920066537908),
    "student_euler": (94.93728359602392, 1527.9220664929599, 76.1903277592909),
    "student_meanflow": (95.60166473966092, 1527.532995940186, 76.26401062715246),
    "session_latents": (-42.708421994931996, 493.18379192147404, -20.739340650481523),
    "session_frame_sums": (242805, 241457, 238765, 238715),
    "world_latents": (-22584.29597532749, 97520.74037444592, -457.93434428197725),   # the memory model at 128² (runs/wm_g fine-tune), the camera with a learned jump flight, the extended sky dome (10 degrees past the horizon with the floor drawn: 2026-12-07, thirtieth), the region's floor and seen walls (their haze out), recorded 2026-12-06 (twenty-third)
}
