"""Runtime: streaming render sessions, their backends, and a factory for servers."""

from alaya.runtime.factory import SessionFactory
from alaya.runtime.session import RenderSession

__all__ = ["RenderSession", "SessionFactory"]
