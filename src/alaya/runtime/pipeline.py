"""``StreamPipeline``: one render session's frames on both cores at once.

A frame's work is three parts (``RenderSession.prepare``, ``sample``, ``decode``), and only the
middle one depends on the frame before: the context that frame n + 1 warps is frame n's output
latents. So frame n + 1 can be prepared (checks, G-buffer encoder, its own features, on the
caller's thread, which also owns the engine's GL context) and frame n - 1 decoded while frame
n is being sampled::

    caller   │ engine n+1 │ prepare n+1 │ ...          │ engine n+2 │ prepare n+2 │
    sampler  │ context + 4 steps, frame n      │ context + 4 steps, frame n+1    │
    decoder  │ decode n-1 │                   │ decode n │                       │

Each onnxruntime graph runs nearly as fast on one thread as on two (docs/flash.md, "The
pipeline"), so a sequential loop leaves one core of two mostly idle; the pipeline fills it.
The frames come out exactly as ``RenderSession.step`` gives them (the same graphs on the same
inputs, in the same order; tested) — only later: a frame's output is ready one stage after the
sequential loop would have returned it.

Order and errors: frames are sampled and decoded in the order they were submitted. A bad frame
raises in ``submit`` (naming the key at fault) and never enters the stream, as with ``step``.
``set_prompt`` on the session applies from the next frame submitted; ``reset`` goes through the
pipeline, between the frames submitted before and after it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np


class StreamPipeline:
    """Drives ``session`` until ``close`` (or the end of a ``with`` block); meanwhile the session's
    own ``step`` refuses and its ``reset`` goes through the pipeline, so that nothing runs out of
    order. ``depth``: the most frames in flight (submitted, not yet decoded); ``submit`` prepares
    its frame, then waits for the oldest beyond it. A caller faster than the sampler (a benchmark
    that does not pace its engine) thus waits in ``submit``, with up to ``depth`` frames queued.
    With 2 (the default) the sampler never waits for a decode: the most frames a second; with 1
    it idles while a frame decodes, for one queued frame less of latency (``RealtimeLoop``'s
    choice: it is paced, and with many sessions on a few cores queued frames only add latency)."""

    def __init__(self, session, depth: int = 2):
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        session.set_pipeline(self)                      # refuses a session another pipeline drives
        self.session, self.depth = session, depth
        self._sampler = ThreadPoolExecutor(1, thread_name_prefix="alaya-sample")
        self._decoder = ThreadPoolExecutor(1, thread_name_prefix="alaya-decode")
        self._inflight: deque[Future] = deque()
        self._local = threading.local()                 # marks this pipeline's decoding thread

    def submit(self, frame: Mapping[str, np.ndarray]) -> Future:
        """Prepare ``frame`` on this thread, then sample and decode it on the pipeline's threads;
        a future of its uint8 (H, W, 3) RGB."""
        if self._sampler is None:
            raise RuntimeError("the pipeline is closed")
        while self._inflight and self._inflight[0].done():
            self._inflight.popleft()
        # alone (a caller that waits for each frame, and no other session's frame running alone),
        # on the session's solo graphs, which may use every core
        solo = not self._inflight and self.session.claim_solo()
        try:
            prepared = self.session.prepare(frame, solo=solo)   # while the frames in flight are sampled
        except BaseException:
            if solo:
                self.session.release_solo()
            raise
        while len(self._inflight) >= self.depth:
            self._wait(self._inflight.popleft())
        sampled = self._sampler.submit(self.session.sample, prepared)

        def decode():
            self._local.decoding = True
            try:
                return self.session.decode(prepared.backend, *sampled.result(), prepared.guide)
            finally:
                if solo:
                    self.session.release_solo()

        rgb = self._decoder.submit(decode)
        self._inflight.append(rgb)
        return rgb

    def reset(self) -> None:
        """The next frame submitted starts a new stream (``RenderSession.reset``)."""
        if self._sampler is None:
            raise RuntimeError("the pipeline is closed")
        self._sampler.submit(self.session.reset_stream)

    @staticmethod
    def _wait(future: Future) -> None:
        """Wait for a frame in flight; its error belongs to whoever holds its future."""
        try:
            future.result()
        except Exception:
            pass

    def close(self) -> None:
        """Finish the frames in flight and hand the session back. From a frame's done-callback
        (on the pipeline's own decoding thread) it does not wait: the frames queued behind that
        callback finish after it, and the threads end then."""
        if self._sampler is None:
            return
        own_thread = getattr(self._local, "decoding", False)
        while self._inflight and not own_thread:
            self._wait(self._inflight.popleft())
        self._sampler.shutdown(wait=not own_thread)
        self._decoder.shutdown(wait=not own_thread)
        self._sampler = self._decoder = None
        self.session.set_pipeline(None)

    def __enter__(self) -> "StreamPipeline":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
