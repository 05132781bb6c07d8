"""Runtime: streaming render sessions (and, next, the real-time loop)."""

from alaya.runtime.session import RenderSession

__all__ = ["RenderSession"]
