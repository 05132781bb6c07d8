"""Renderers: G-buffer frames + a prompt -> RGB frames (the teacher now; the Flash student next)."""

from alaya.renderers.teacher import SamplerConfig, TeacherRenderer
from alaya.renderers.video import write_frames

__all__ = ["SamplerConfig", "TeacherRenderer", "write_frames"]
