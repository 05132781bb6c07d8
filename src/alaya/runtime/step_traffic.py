"""``StepTraffic``: which of two sets of the same graphs a session's step runs on. A step alone
may use a set with a thread per core (``solo_threads``); steps side by side share the
one-thread set, so they do not oversubscribe the cores (``WorldSessionFactory``).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

from alaya.runtime.backend_base import Backend


class StepTraffic:
    """How many of a factory's sessions are inside ``step`` now. A step that starts while no other
    runs takes the solo graphs (``WorldSessionFactory``'s ``solo_threads``: a thread per core);
    the others run on the shared one-thread graphs, so sessions side by side do not oversubscribe
    the cores and at most one step is on the solo graphs at a time."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running = 0

    @contextmanager
    def step(self, backend: Backend, solo_backend: Backend | None):
        """The graphs this step runs on, while it runs."""
        with self._lock:
            self._running += 1
            alone = self._running == 1
        try:
            yield solo_backend if alone and solo_backend is not None else backend
        finally:
            with self._lock:
                self._running -= 1
