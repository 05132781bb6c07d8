"""Runtime: streaming render sessions, their backends, a pipeline that runs a session's frames
side by side, and a factory for servers."""

from alaya.runtime.factory import SessionFactory
from alaya.runtime.pipeline import StreamPipeline
from alaya.runtime.session import RenderSession

__all__ = ["RenderSession", "SessionFactory", "StreamPipeline"]
