"""Renderers: G-buffer frames + a prompt -> RGB frames (the teacher and the Flash student)."""

from alaya.renderers.student import StudentRenderer
from alaya.renderers.teacher import SamplerConfig, TeacherRenderer
from alaya.renderers.video import write_frames

__all__ = ["SamplerConfig", "StudentRenderer", "TeacherRenderer", "write_frames"]
