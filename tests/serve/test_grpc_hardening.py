"""gRPC service hardening: idle streams give their slot back, bytes that are not a message get
INVALID_ARGUMENT, every uint64 seed renders, a free-text prompt never stalls its stream, and a
frame's values are refused with the clip validator's own message."""

import time

import grpc
import numpy as np
import pytest
import torch

from alaya.runtime import SessionFactory
from alaya.serve.grpc_client import RenderClient, frame_to_message, message_to_rgb
from alaya.serve.grpc_server import GrpcConfig, start_grpc_server
from alaya.serve.proto import render_pb2
from alaya.text import PromptEncoder
from test_grpc import Requests, make_frames, wait_idle
from tiny_models import tiny_flash_modules

SIZE = 32
TIMEOUT = 30.0
LOAD_SECONDS = 2.0                      # the fake text model's load


class FakeTextModel:
    """SentenceTransformer's ``encode``: a unit vector per text, from its hash."""

    def encode(self, texts, **kwargs):
        out = torch.stack([torch.randn(384, generator=torch.Generator().manual_seed(hash(t) % 2**32)) for t in texts])
        return out / out.norm(dim=-1, keepdim=True)


def slow_loader():
    time.sleep(LOAD_SECONDS)
    return FakeTextModel()


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def factory():
    return SessionFactory(*tiny_flash_modules(), size=SIZE, backend="torch",
                          prompt_encoder=PromptEncoder(loader=slow_loader, known=True))


@pytest.fixture(scope="module")
def service(factory):
    svc = start_grpc_server(factory, GrpcConfig(port=0, max_sessions=8, backend="torch", idle_timeout=1.5))
    yield svc
    svc.stop(grace=None)


def test_idle_streams_are_ended_and_a_ninth_client_is_served(service):
    wait_idle(service)
    frame = frame_to_message(make_frames(1, seed=1)[0])
    idle = []
    with RenderClient(service.address) as c:
        for i in range(8):                       # half of them never send a frame, half stop after one
            requests = Requests()
            replies = c.render(requests, timeout=TIMEOUT)
            if i % 2:
                requests.send(frame)
                assert next(replies).frame_id == 0
            idle.append((requests, replies))
        while service.servicer.slots.active < 8:
            time.sleep(0.01)
        t0 = time.monotonic()
        with pytest.raises(grpc.RpcError) as err:
            list(c.render([frame], timeout=TIMEOUT))
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        served = None
        while served is None and time.monotonic() - t0 < 1.5 + 5.0:
            try:
                served = list(c.render([frame], timeout=TIMEOUT))
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                time.sleep(0.1)
        assert served is not None and len(served) == 1, "the ninth client was not served"
        for requests, replies in idle:
            with pytest.raises(grpc.RpcError) as err:
                list(replies)
            assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert "no frame for 1.5 s" in err.value.details() and "idle_timeout" in err.value.details()
            requests.end()
    wait_idle(service)


def test_a_stream_that_keeps_sending_is_never_idle(service):
    wait_idle(service)
    frames = make_frames(1, seed=2)
    with RenderClient(service.address) as c:
        requests = Requests()
        replies = c.render(requests, timeout=TIMEOUT)
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < 3.0:       # twice the idle timeout, a frame every 0.5 s
            requests.send(frame_to_message(frames[0], frame_id=n))
            assert next(replies).frame_id == n
            n += 1
            time.sleep(0.5)
        requests.end()
        assert list(replies) == []


def raw_render(address: str, payloads: list[bytes]):
    """A Render stream of raw bytes, as a fuzzing client sends them."""
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_stream("/alaya.v1.Renderer/Render", request_serializer=lambda b: b,
                                     response_deserializer=render_pb2.RGBFrame.FromString)
        got = []
        with pytest.raises(grpc.RpcError) as err:
            for reply in call(iter(payloads), timeout=TIMEOUT):
                got.append(reply.frame_id)
        return got, err.value


def _bad_utf8_prompt() -> bytes:
    msg = frame_to_message(make_frames(1, seed=3)[0], frame_id=5, prompt="café")
    data = msg.SerializeToString()
    return data.replace("é".encode(), b"\xff\xfe")


UNDECODABLE = {
    "garbage": (lambda good: b"\xff\xff\xff\xff\x0f garbage", "not a valid GBufferFrame"),
    "truncated": (lambda good: good[: len(good) // 2], "truncated or corrupt"),
    "bad utf-8 prompt": (lambda good: _bad_utf8_prompt(), "'prompt': not valid UTF-8"),
}


@pytest.mark.parametrize("case", list(UNDECODABLE))
def test_bytes_that_are_not_a_frame_get_invalid_argument(service, case):
    wait_idle(service)
    make, match = UNDECODABLE[case]
    good = frame_to_message(make_frames(1, seed=4)[0], frame_id=7).SerializeToString()
    got, err = raw_render(service.address, [good, make(good)])
    assert got == [7]                                        # the frame before it is answered
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
    assert err.details().startswith("message 2 of the stream: ") and match in err.details()
    wait_idle(service)


def test_an_undecodable_info_request_gets_invalid_argument(service):
    with grpc.insecure_channel(service.address) as channel:
        info = channel.unary_unary("/alaya.v1.Renderer/Info", request_serializer=lambda b: b,
                                   response_deserializer=render_pb2.InfoReply.FromString)
        with pytest.raises(grpc.RpcError) as err:
            info(b"\xff\xff\xff", timeout=TIMEOUT)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "not a valid InfoRequest" in err.value.details()
        assert info(b"", timeout=TIMEOUT).width == SIZE


@pytest.mark.parametrize("seed", [2**64 - 1, 2**63, 18_446_744_073_709 + 1, 10**19])
def test_every_uint64_seed_renders(service, factory, seed):
    wait_idle(service)
    frames = make_frames(2, seed=5)
    with RenderClient(service.address) as c:
        replies = list(c.render([frame_to_message(f, frame_id=i, seed=seed) for i, f in enumerate(frames)],
                                timeout=TIMEOUT))
    assert np.array_equal(np.stack([message_to_rgb(r) for r in replies]), factory.new("", seed=seed).run(frames))


def test_small_seeds_keep_their_noise(factory, monkeypatch):
    """Seeds that worked before draw the same noise (the reduction mod 2**64 leaves them alone)."""
    drawn, randn = [], torch.randn

    def recording(*args, generator=None, **kwargs):
        if generator is not None:
            drawn.append(generator.initial_seed())
        return randn(*args, generator=generator, **kwargs)
    monkeypatch.setattr(torch, "randn", recording)
    factory.new("", seed=12345).run(make_frames(2, seed=6))
    assert drawn == [12345 * 1_000_003, 12345 * 1_000_003 + 1]


@pytest.fixture()
def frozen_heap():
    """What is loaded is frozen, as ``alaya serve`` does (``play.freeze_loaded``): else a full
    garbage collection of the test process's heap can itself pause every thread for a second."""
    import gc
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def test_a_free_text_prompt_never_stalls_the_stream(service, factory, frozen_heap):
    """The text model takes LOAD_SECONDS to load: frames go on with the previous prompt, each
    answered within 0.5 s, and switch to the new one from the first frame after its embedding
    is ready (the stream equals a local session that switched there)."""
    wait_idle(service)
    prompt = "a lighthouse in a purple storm"
    assert factory.prompt_encoder.lookup(prompt) is None and factory.prompt_encoder._model is None
    frames = make_frames(4, seed=7)
    waits, live = [], []
    with RenderClient(service.address) as c:
        requests = Requests()
        replies = c.render(requests, timeout=TIMEOUT)
        t_end = time.monotonic() + LOAD_SECONDS + 1.5
        while time.monotonic() < t_end:
            i = len(live)
            msg = frame_to_message(frames[i % 4], frame_id=i, prompt="a clear sunny noon" if i == 0 else
                                   prompt if i == 3 else None)
            t0 = time.monotonic()
            requests.send(msg)
            reply = next(replies)
            waits.append(time.monotonic() - t0)
            assert reply.frame_id == i
            live.append(message_to_rgb(reply))
            time.sleep(0.02)
        requests.end()
        assert list(replies) == []
    assert max(waits) < 0.5, f"a frame waited {max(waits):.2f} s for the text model"
    old = factory.new("a clear sunny noon").run([frames[i % 4] for i in range(len(live))])
    switched = [i for i in range(len(live)) if not np.array_equal(live[i], old[i])]
    assert switched, "the stream never switched to the new prompt"
    k = switched[0]
    assert k > 3 and len(live) - k >= 2          # frame 3 (the request) kept the old prompt
    local = factory.new("a clear sunny noon")
    expected = [local.step(frames[i % 4]) for i in range(k)]
    local.set_prompt(prompt)
    expected += [local.step(frames[i % 4]) for i in range(k, len(live))]
    assert np.array_equal(np.stack(live), np.stack(expected))


def test_the_three_users_of_the_frame_checks_give_one_message(service, factory):
    """A negative depth through gRPC, a session and the clip validator: the same words."""
    from alaya.data.clipio import check_invariants
    wait_idle(service)
    bad = make_frames(1, seed=8)[0]
    bad["depth"][3, 4] = -2.0
    with RenderClient(service.address) as c:
        with pytest.raises(grpc.RpcError) as err:
            list(c.render([frame_to_message(bad, frame_id=9)], timeout=TIMEOUT))
    with pytest.raises(ValueError) as local:
        factory.new("").step(bad)
    clip_errors = check_invariants({k: v[None] for k, v in bad.items()}, path="clip.npz")
    words = "key 'depth': depth must be >= 0 (0: background) (1 values, first at"
    assert err.value.details().startswith(f"frame 9: {words} (3, 4))")
    assert str(local.value).startswith(f"{words} (3, 4))")
    assert clip_errors[0] == f"clip.npz: {words} (0, 3, 4))"
