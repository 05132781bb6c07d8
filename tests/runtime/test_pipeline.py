"""StreamPipeline: the same frames as RenderSession.step, in order, with prompt switches, resets,
bad frames and failures where a sequential stream has them."""

import threading

import numpy as np
import pytest

from alaya.runtime.pipeline import StreamPipeline
from test_session import frames, session  # noqa: F401  (frames is a fixture)


def piped(s, items, depth=2):
    """Submit ``items`` (frames, or callables run on the session between submissions) through a
    pipeline; the RGB of every frame, in order."""
    with StreamPipeline(s, depth=depth) as p:
        futures = [p.submit(x) if isinstance(x, dict) else x(s) for x in items]
        return np.stack([f.result() for f in futures if f is not None])


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_pipelined_frames_equal_the_sequential_ones(frames, backend):
    expected = session(backend=backend).run(frames)
    assert np.array_equal(piped(session(backend=backend), frames), expected)
    assert np.array_equal(piped(session(backend=backend), frames, depth=1), expected)
    assert np.array_equal(piped(session(backend=backend), frames, depth=5), expected)


def test_pipelined_frames_of_a_guided_decoder_equal_the_sequential_ones(frames):
    expected = session(guided=True).run(frames)
    assert np.array_equal(piped(session(guided=True), frames), expected)


@pytest.mark.parametrize("backend,depth", [("torch", 1), ("torch", 2), ("onnx", 2), ("onnx", 5)])
def test_prompt_switches_and_resets_keep_their_place_in_the_stream(frames, backend, depth):
    seq = session(backend=backend)
    expected = [*seq.run(frames[:2])]
    seq.set_prompt("a moonlit night")
    expected += [*seq.run(frames[2:4])]
    seq.reset()
    expected += [*seq.run(frames[4:6])]
    s = session(backend=backend)
    got = piped(s, [*frames[:2], lambda s: s.set_prompt("a moonlit night"), *frames[2:4],
                    lambda s: s.reset(), *frames[4:6]], depth=depth)
    assert np.array_equal(got, np.stack(expected))
    assert s.frame_index == 2 and s.pipeline is None         # handed back after the with block
    assert np.array_equal(s.step(frames[0]), seq.step(frames[0]))


def test_bad_frames_raise_at_submit_and_never_enter_the_stream(frames):
    expected = session().run(frames[:4])
    s = session()
    with StreamPipeline(s) as p:
        futures = [p.submit(frames[0]), p.submit(frames[1])]
        bad = dict(frames[2], depth=frames[2]["depth"].astype(np.float32))
        bad["depth"][1, 1] = np.nan
        with pytest.raises(ValueError, match="depth"):
            p.submit(bad)
        with pytest.raises(KeyError, match="motion"):
            p.submit({k: v for k, v in frames[2].items() if k != "motion"})
        futures += [p.submit(frames[2]), p.submit(frames[3])]
        assert np.array_equal(np.stack([f.result() for f in futures]), expected)


def test_a_failing_step_fails_its_frame_only(frames):
    """An error while sampling reaches that frame's future; the stream is as if it never came."""
    expected = session().run([frames[0], frames[2]])
    s = session()
    sample, calls = s.sample, []

    def flaky(prepared):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("out of memory, say")
        return sample(prepared)

    s.sample = flaky
    with StreamPipeline(s) as p:
        first, broken, third = p.submit(frames[0]), p.submit(frames[1]), p.submit(frames[2])
        with pytest.raises(RuntimeError, match="out of memory"):
            broken.result()
        assert np.array_equal(np.stack([first.result(), third.result()]), expected)


def test_the_session_is_the_pipelines_until_it_is_closed(frames):
    s = session()
    p = StreamPipeline(s)
    with pytest.raises(RuntimeError, match="StreamPipeline"):
        s.step(frames[0])
    with pytest.raises(RuntimeError, match="already"):
        StreamPipeline(s)
    with pytest.raises(ValueError, match="depth"):
        StreamPipeline(session(), depth=0)
    p.close()
    p.close()                                                 # closing twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        p.submit(frames[0])
    s.step(frames[0])


@pytest.mark.parametrize("depth", [1, 2])
def test_at_most_depth_frames_are_in_flight(frames, depth):
    s = session()
    gate, seen = threading.Event(), []
    sample = s.sample

    def slow(prepared):
        gate.wait(5)
        return sample(prepared)

    s.sample = slow
    with StreamPipeline(s, depth=depth) as p:
        for f in frames[:depth]:
            p.submit(f)
        t = threading.Thread(target=lambda: seen.append(p.submit(frames[depth])))
        t.start()
        t.join(0.5)
        assert t.is_alive() and not seen                      # the third waits for the first
        gate.set()
        t.join(5)
        assert seen and len(p._inflight) <= depth


def test_a_frame_alone_runs_on_the_solo_backend_with_the_same_pixels(frames):
    """A factory's ``solo_threads`` graphs take the frames that run alone (a caller that waits
    for each, while no other session's frame holds them); frames sent ahead run on the one-thread
    graphs; the pixels are the same."""
    from alaya.runtime import SessionFactory
    from tiny_models import tiny_flash_modules
    factory = SessionFactory(*tiny_flash_modules(), size=32, backend="onnx", threads=1, solo_threads=2)
    assert factory.solo_backend is not None and factory.solo_backend is not factory.backend
    used, outs = [], []
    for lockstep in (True, False):
        s = factory.new("a clear sunny noon")
        sample, gate = s.sample, threading.Event()

        def held(prepared, sample=sample, gate=gate):
            used.append(prepared.backend)
            gate.wait(5)                         # sent ahead: the first frame is still sampling
            return sample(prepared)

        s.sample = held
        with StreamPipeline(s, depth=5) as p:
            if lockstep:
                gate.set()
                outs.append(np.stack([p.submit(f).result() for f in frames[:4]]))
            else:
                futures = [p.submit(f) for f in frames[:4]]
                gate.set()
                outs.append(np.stack([f.result() for f in futures]))
    assert used == [factory.solo_backend] * 5 + [factory.backend] * 3       # streamed: only the first is alone
    assert np.array_equal(outs[0], outs[1])
    assert not factory.solo_backend.solo_lock.locked()                      # given back after each frame
    other = factory.new("a clear sunny noon")
    assert factory.new("x").claim_solo() and not other.claim_solo()        # one frame alone at a time
    other.release_solo()
    assert SessionFactory(*tiny_flash_modules(), size=32, backend="onnx", threads=1).solo_backend is None
