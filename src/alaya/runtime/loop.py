"""The real-time loop: engine on one thread, the generative renderer on another.

::

    engine thread                        model thread
    ─────────────                        ────────────
    apply input events                   apply prompt changes
    physics step + G-buffer raster  ──►  RenderSession.step(G-buffer)  ──►  on_frame(FrameOut)
    (+ reference / channel view)    [1]  (student + tiny decoder)

A render session runs in a ``StreamPipeline`` of depth 1 (``LoopConfig.pipelined``): the model
thread prepares frame n + 1 while the pipeline's threads sample and decode frame n, the engine
starts frame n + 2 once frame n + 1 has gone to the sampler, and ``on_frame`` is called from the
decoding thread, in frame order.

The hand-over between them ([1]) holds one frame, and the engine starts a frame only once the
model has taken the previous one: the engine works on frame n+1 while the model renders frame
n, and no frame waits in line, so latency is about one engine step plus one model step. G-buffer
frames are never dropped there — each frame's motion vectors point at the frame before, and the
student warps its memory by them, so a skipped frame would corrupt the warp. Staleness is
handled downstream instead: ``on_frame`` consumers (a WebSocket) keep only the newest output.
The engine paces itself to ``fps`` when the model is faster. Per-stage timings travel with each
frame and are averaged in ``stats()``.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass
class FrameOut:
    index: int
    rgb: np.ndarray                       # uint8 (H, W, 3): the generative renderer's frame
    side: np.ndarray | None               # uint8 (H, W, 3): the chosen side view, if any
    engine_start: float                   # time.time() when the engine began this frame
    timings: dict[str, float] = field(default_factory=dict)   # ms per stage


@dataclass
class LoopConfig:
    fps: float = 30.0                     # target; the engine never runs faster than this
    stats_window: int = 60                # frames averaged in stats()
    pipelined: bool = True                # a render session runs in a StreamPipeline (frame n + 1 prepared
                                          # while frame n is sampled and frame n - 1 decoded)


class RealtimeLoop:
    """Runs ``make_stream()`` (created on the engine thread, which owns its GL context) and
    ``session`` until ``stop()``.

    - ``engine_command(fn)``: ``fn(stream)`` runs on the engine thread before the next step
      (movement, actions); exceptions are reported through ``on_error`` and the loop goes on.
    - ``model_command(fn)``: ``fn(session)`` runs on the model thread between frames (prompts).
    - ``side_view(fn)``: ``fn(stream, frame) -> uint8 image | None`` on the engine thread for
      each frame (a G-buffer channel or the reference render, shown beside the output).
    """

    def __init__(self, make_stream: Callable[[], object], session, on_frame: Callable[[FrameOut], None],
                 config: LoopConfig | None = None, on_error: Callable[[BaseException], None] | None = None):
        self.config = config or LoopConfig()
        if not self.config.fps > 0:
            raise ValueError(f"fps must be > 0, got {self.config.fps}")
        self.make_stream, self.session, self.on_frame = make_stream, session, on_frame
        self.on_error = on_error or (lambda err: None)
        self._frames: queue.Queue = queue.Queue(maxsize=1)
        self._slot = threading.Semaphore(1)            # free when the model has taken the last frame
        self._engine_cmds: queue.SimpleQueue = queue.SimpleQueue()
        self._model_cmds: queue.SimpleQueue = queue.SimpleQueue()
        self._side: Callable | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._timings: deque = deque(maxlen=self.config.stats_window)
        self._delivered: deque = deque(maxlen=self.config.stats_window)
        self._threads = [threading.Thread(target=self._engine_loop, name="alaya-engine", daemon=True),
                         threading.Thread(target=self._model_loop, name="alaya-model", daemon=True)]
        self.frames_out = 0

    # -- control -------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> "RealtimeLoop":
        for t in self._threads:
            t.start()
        if not self._ready.wait(timeout):
            self.stop()
            raise TimeoutError("the engine did not start in time")
        if self._failed is not None:
            self.stop()
            raise RuntimeError(f"the engine failed to start: {self._failed}") from self._failed
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        for t in self._threads:
            if t.is_alive() and t is not threading.current_thread():
                t.join(timeout)

    @property
    def running(self) -> bool:
        return not self._stop.is_set() and all(t.is_alive() for t in self._threads)

    def engine_command(self, fn: Callable[[object], object]) -> None:
        self._engine_cmds.put(fn)

    def model_command(self, fn: Callable[[object], object]) -> None:
        self._model_cmds.put(fn)

    def side_view(self, fn: Callable | None) -> None:
        self._side = fn

    def stats(self) -> dict[str, float]:
        """Mean ms per stage, delivered FPS and mean latency (engine start -> output) recently."""
        rows = list(self._timings)
        out = {k: float(np.mean([r[k] for r in rows if k in r])) for k in (rows[0] if rows else {})}
        times = list(self._delivered)
        out["fps"] = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0
        out["frames"] = self.frames_out
        return out

    # -- threads -------------------------------------------------------------------------
    def _drain(self, commands: queue.SimpleQueue, target) -> None:
        while True:
            try:
                fn = commands.get_nowait()
            except queue.Empty:
                return
            try:
                fn(target)
            except Exception as err:               # a bad command must not stop the world
                self.on_error(err)

    def _engine_loop(self) -> None:
        try:
            stream = self.make_stream()
        except BaseException as err:
            self._failed = err
            self._ready.set()
            self._stop.set()
            return
        self._ready.set()
        period = 1.0 / self.config.fps
        next_tick = time.perf_counter()
        index = 0
        try:
            while not self._stop.is_set():
                while not self._slot.acquire(timeout=0.1):   # the model has not taken the last one
                    if self._stop.is_set():
                        return
                wait = next_tick - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                next_tick = max(next_tick + period, time.perf_counter() - period)
                start_wall, t0 = time.time(), time.perf_counter()
                self._drain(self._engine_cmds, stream)
                frame = stream.step()
                t1 = time.perf_counter()
                side = None
                if self._side is not None:
                    try:
                        side = self._side(stream, frame)
                    except Exception as err:
                        self.on_error(err)
                        self._side = None
                item = (index, frame, side, start_wall, {"engine_ms": (t1 - t0) * 1e3,
                                                          "side_ms": (time.perf_counter() - t1) * 1e3})
                while not self._stop.is_set():
                    try:
                        self._frames.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                index += 1
        except BaseException as err:
            self.on_error(err)
            self._stop.set()
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    def _model_loop(self) -> None:
        pipeline = None
        try:
            if self.config.pipelined and hasattr(self.session, "prepare"):
                from alaya.runtime.pipeline import StreamPipeline
                pipeline = StreamPipeline(self.session, depth=1)
        except Exception as err:
            self.on_error(err)
            self._stop.set()
            return
        try:
            while not self._stop.is_set():
                try:
                    index, frame, side, start_wall, timings = self._frames.get(timeout=0.1)
                except queue.Empty:
                    continue
                if pipeline is None:
                    self._slot.release()         # the engine makes frame n + 1 while this one renders
                try:
                    self._drain(self._model_cmds, self.session)
                    t0 = time.perf_counter()
                    if pipeline is None:
                        self._emit(index, side, start_wall, timings, t0, self.session.step(frame))
                    else:   # prepared here; sampled, decoded and emitted on the pipeline's threads
                        future = pipeline.submit(frame)
                        # model_ms: from the frame going to the sampler to its RGB (its preparing,
                        # which overlapped the frame before, is prepare_ms)
                        timings["prepare_ms"] = (time.perf_counter() - t0) * 1e3
                        future.add_done_callback(
                            lambda f, args=(index, side, start_wall, timings, time.perf_counter()):
                            self._emit_future(f, *args))
                except Exception as err:
                    self.on_error(err)
                    self._stop.set()
                    return
                finally:
                    if pipeline is not None:
                        # once the frame is in the sampler: the engine makes frame n + 1 while
                        # frame n is sampled, and no frame waits longer than one model step
                        self._slot.release()
        finally:
            if pipeline is not None:
                pipeline.close()

    def _emit_future(self, future, *args) -> None:
        if future.exception() is not None:
            self.on_error(future.exception())
            self._stop.set()
            return
        try:
            self._emit(*args, future.result())
        except Exception as err:
            self.on_error(err)
            self._stop.set()

    def _emit(self, index: int, side, start_wall: float, timings: dict, t0: float, rgb) -> None:
        if self._stop.is_set():
            return
        timings["model_ms"] = (time.perf_counter() - t0) * 1e3
        timings["latency_ms"] = (time.time() - start_wall) * 1e3
        self.on_frame(FrameOut(index, rgb, side, start_wall, timings))
        self.frames_out += 1
        self._timings.append(timings)
        self._delivered.append(time.perf_counter())
