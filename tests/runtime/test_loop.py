"""RealtimeLoop: engine and model threads hand over every G-buffer frame in order, commands land
on the right thread, bad commands are reported without stopping the world, and stop() ends it."""

import threading
import time

import numpy as np
import pytest

from alaya.engine.stream import EngineStream, StreamConfig
from alaya.runtime.loop import LoopConfig, RealtimeLoop
from test_session import session


def run_loop(seconds=3.0, fps=20.0, setup=None, pipelined=True):
    got, errors, closed = [], [], []

    class Stream(EngineStream):
        def close(self):
            closed.append(threading.current_thread().name)
            super().close()

    loop = RealtimeLoop(lambda: Stream(3, StreamConfig(size=32)), session(), got.append, LoopConfig(fps=fps, pipelined=pipelined),
                        on_error=errors.append)
    loop.start()
    if setup:
        setup(loop)
    time.sleep(seconds)
    loop.stop()
    return loop, got, errors, closed


@pytest.mark.parametrize("pipelined", [True, False])
def test_frames_arrive_in_order_paced_and_the_loop_stops(pipelined):
    loop, got, errors, closed = run_loop(seconds=3.0, fps=20.0, pipelined=pipelined)
    assert not errors and len(got) >= 5
    assert [f.index for f in got] == list(range(len(got)))           # no G-buffer frame skipped
    assert len(got) <= 20 * 3 + 3                                     # paced to the target
    assert got[0].rgb.shape == (32, 32, 3) and got[0].rgb.dtype == np.uint8
    assert {"engine_ms", "model_ms", "latency_ms"} <= set(got[-1].timings)
    assert closed == ["alaya-engine"] and not loop.running
    assert loop.stats()["frames"] == len(got)


def test_commands_run_on_their_threads_and_errors_do_not_stop_it():
    seen = {}

    def setup(loop):
        loop.engine_command(lambda s: seen.setdefault("engine", threading.current_thread().name))
        loop.model_command(lambda s: seen.setdefault("model", threading.current_thread().name))
        loop.engine_command(lambda s: 1 / 0)
        loop.model_command(lambda s: s.set_prompt("a neon-lit night"))
        loop.side_view(lambda s, f: f["albedo"])

    loop, got, errors, _ = run_loop(seconds=3.0, setup=setup)
    assert seen == {"engine": "alaya-engine", "model": "alaya-model"}
    assert len(errors) == 1 and isinstance(errors[0], ZeroDivisionError)
    assert got[-1].side is not None and got[-1].side.shape == (32, 32, 3)
    n = len(got)
    assert n >= 5 and [f.index for f in got] == list(range(n))       # it went on after the error


def test_a_stream_that_fails_to_start_is_reported():
    def broken():
        raise RuntimeError("no GPU today")
    loop = RealtimeLoop(broken, session(), lambda f: None)
    with pytest.raises(RuntimeError, match="no GPU today"):
        loop.start()
    with pytest.raises(ValueError, match="fps"):
        RealtimeLoop(broken, session(), lambda f: None, LoopConfig(fps=0))


def test_the_pipelined_loop_renders_what_a_sequential_stream_does():
    """The loop runs a render session in a StreamPipeline: the frames it delivers are the ones
    ``RenderSession.step`` gives for the same engine frames, in order."""
    loop, got, errors, _ = run_loop(seconds=2.0, fps=30.0)
    assert not errors and len(got) >= 5
    stream, s = EngineStream(3, StreamConfig(size=32)), session()
    try:
        expected = [s.step(stream.step()) for _ in range(len(got))]
    finally:
        stream.close()
    assert all(np.array_equal(f.rgb, e) for f, e in zip(got, expected))


def test_a_frame_that_fails_in_the_pipeline_is_reported_and_stops_the_loop():
    """An error while sampling (on the pipeline's threads) reaches ``on_error`` and stops the loop."""
    def setup(loop):
        def broken(prepared):
            raise RuntimeError("the model fell over")
        loop.session.sample = broken
    loop, got, errors, _ = run_loop(seconds=2.0, setup=setup)
    assert errors and isinstance(errors[0], RuntimeError) and "fell over" in str(errors[0])
    assert not loop.running
