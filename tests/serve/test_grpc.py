"""gRPC render service: round trip equals a local session, inline prompts, every bad frame gets
its status code and leaves the server serving, the session limit, disconnects free slots."""

import io
import queue
import time

import grpc
import numpy as np
import pytest
from PIL import Image

from alaya.runtime import SessionFactory
from alaya.serve.grpc_client import RenderClient, frame_to_message, message_to_rgb
from alaya.serve.grpc_server import GrpcConfig, start_grpc_server
from alaya.serve.proto import render_pb2
from tiny_models import tiny_flash_modules

SIZE = 32
MAX_MESSAGE_MB = 0.0625          # 64 KiB: a 32x32 frame (29 KiB) fits, a 64x64 one does not
TIMEOUT = 30.0


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def factory():
    return SessionFactory(*tiny_flash_modules(), size=SIZE, backend="torch")


@pytest.fixture(scope="module")
def service(factory):
    svc = start_grpc_server(factory, GrpcConfig(port=0, max_sessions=2, max_message_mb=MAX_MESSAGE_MB,
                                                backend="torch", model_name="tiny"))
    yield svc
    svc.stop(grace=None)


@pytest.fixture()
def client(service):
    wait_idle(service)
    with RenderClient(service.address) as c:
        yield c


def make_frames(n: int, seed: int = 0, size: int = SIZE) -> list[dict[str, np.ndarray]]:
    """Random but contract-shaped frames (no GL needed)."""
    rng = np.random.default_rng(seed)
    frames = []
    for _ in range(n):
        normal = rng.normal(size=(size, size, 3)).astype(np.float32)
        frames.append({
            "depth": rng.uniform(0.5, 20.0, (size, size)).astype(np.float32),
            "normal": normal / np.linalg.norm(normal, axis=-1, keepdims=True),
            "albedo": rng.integers(0, 256, (size, size, 3), dtype=np.uint8),
            "roughness": rng.integers(0, 256, (size, size), dtype=np.uint8),
            "metallic": rng.integers(0, 256, (size, size), dtype=np.uint8),
            "motion": rng.normal(0, 1.5, (size, size, 2)).astype(np.float32),
        })
    return frames


def wait_idle(service, timeout: float = 10.0) -> None:
    """Session slots are given back by server threads; wait until none is held."""
    end = time.monotonic() + timeout
    while service.servicer.slots.active and time.monotonic() < end:
        time.sleep(0.01)
    assert service.servicer.slots.active == 0


def render_all(client, messages) -> list[np.ndarray]:
    return [message_to_rgb(r) for r in client.render(messages, timeout=TIMEOUT)]


class Requests:
    """A request stream fed one message at a time by the test; ``end()`` closes it."""

    def __init__(self):
        self.queue: queue.Queue = queue.Queue()

    def __iter__(self):
        while (msg := self.queue.get()) is not None:
            yield msg

    def send(self, msg) -> None:
        self.queue.put(msg)

    def end(self) -> None:
        self.queue.put(None)


def assert_serving(client) -> None:
    out = render_all(client, [frame_to_message(f, frame_id=i) for i, f in enumerate(make_frames(2, seed=9))])
    assert len(out) == 2 and out[0].shape == (SIZE, SIZE, 3)


def test_info_reports_size_styles_and_limits(client, factory):
    from alaya.engine.styles import STYLE_NAMES, get_style
    info = client.info()
    assert (info.width, info.height, info.model, info.backend) == (SIZE, SIZE, "tiny", "torch")
    assert [s.name for s in info.styles] == list(STYLE_NAMES)
    assert list(info.styles[0].phrasings) == list(get_style(STYLE_NAMES[0]).phrasings)
    assert (info.max_sessions, info.active_sessions) == (2, 0)
    assert info.max_message_bytes == 65536 and info.max_prompt_chars == factory.prompt_encoder.max_chars


def test_round_trip_of_100_frames_equals_a_local_session(client, factory):
    frames = make_frames(100)
    ids = [1000 + 7 * i for i in range(100)]
    messages = [frame_to_message(f, frame_id=k, seed=3, prompt="a clear sunny noon" if i == 0 else None)
                for i, (k, f) in enumerate(zip(ids, frames))]
    replies = list(client.render(messages, timeout=TIMEOUT))
    assert [r.frame_id for r in replies] == ids
    assert all((r.width, r.height, r.encoding) == (SIZE, SIZE, render_pb2.RAW_RGB8) for r in replies)
    assert all(r.render_ms > 0 and r.decode_ms >= 0 and r.encode_ms >= 0 for r in replies)
    expected = factory.new("a clear sunny noon", seed=3).run(frames)
    assert np.array_equal(np.stack([message_to_rgb(r) for r in replies]), expected)


def test_inline_prompt_switch_takes_effect_from_that_frame(client, factory):
    frames = make_frames(8, seed=1)

    def messages(switch_at: int | None):
        return [frame_to_message(f, frame_id=i, prompt="a clear sunny noon" if i == 0 else
                                 "a moonlit night" if i == switch_at else None) for i, f in enumerate(frames)]
    same, switched = render_all(client, messages(None)), render_all(client, messages(4))
    assert all(np.array_equal(a, b) for a, b in zip(same[:4], switched[:4]))
    assert not np.array_equal(same[4], switched[4])
    local = factory.new("a clear sunny noon")
    expected = [local.step(f) for f in frames[:4]]
    local.set_prompt("a moonlit night")
    expected += [local.step(f) for f in frames[4:]]
    assert np.array_equal(np.stack(switched), np.stack(expected))


def test_reset_restarts_the_stream_and_jpeg_replies(client):
    frames = make_frames(3, seed=2)
    raw = render_all(client, [frame_to_message(f, frame_id=i) for i, f in enumerate(frames)])
    again = render_all(client, [frame_to_message(f, frame_id=i, reset=i == 2)
                                for i, f in enumerate([frames[0], frames[1], frames[0]])])
    assert np.array_equal(again[2], raw[0])
    replies = list(client.render([frame_to_message(f, encoding="jpeg", jpeg_quality=95) for f in frames],
                                 timeout=TIMEOUT))
    assert all(r.encoding == render_pb2.JPEG and r.data[:2] == b"\xff\xd8" for r in replies)
    for reply, rgb in zip(replies, raw):                     # exactly Pillow's JPEG of the raw frame
        buf = io.BytesIO()
        Image.fromarray(rgb).save(buf, "JPEG", quality=95)
        assert np.array_equal(message_to_rgb(reply), np.asarray(Image.open(buf)))


def _nonfinite(key: str, value: float):
    def corrupt(msg):
        a = np.frombuffer(getattr(msg, key), "<f4").copy()
        a[5] = value
        setattr(msg, key, a.tobytes())
    return corrupt


def _set(**fields):
    def corrupt(msg):
        for k, v in fields.items():
            setattr(msg, k, v)
    return corrupt


def _camera(**fields):
    def corrupt(msg):
        for k, v in fields.items():
            getattr(msg, k)[:] = v
    return corrupt


def _small_frame(msg):
    msg.CopyFrom(frame_to_message(make_frames(1, size=16)[0], frame_id=msg.frame_id))


def _large_frame(msg):
    msg.CopyFrom(frame_to_message(make_frames(1, size=64)[0], frame_id=msg.frame_id))


def _empty(msg):
    msg.Clear()


def _resize(key, keep: float):
    def corrupt(msg):
        data = getattr(msg, key)
        setattr(msg, key, (data * 4)[:int(len(data) * keep)])
    return corrupt


def _half_float(key):
    def corrupt(msg):
        setattr(msg, key, np.frombuffer(getattr(msg, key), "<f4").astype("<f2").tobytes())
    return corrupt


INVALID, EXHAUSTED = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED
BAD_FRAMES = {
    "short depth": (_resize("depth", 0.5), INVALID, "'depth': expected 32x32x1 float32 = 4096 bytes, got 2048"),
    "missing motion": (_set(motion=b""), INVALID, "'motion'"),
    "albedo as float32": (_resize("albedo", 4), INVALID, "'albedo': expected 32x32x3 uint8 = 3072 bytes, got 12288"),
    "normal as float16": (_half_float("normal"), INVALID, "'normal': expected 32x32x3 float32"),
    "motion as float16": (_half_float("motion"), INVALID, "'motion'"),
    "wrong size": (_small_frame, INVALID, "frame size 16x16: this server renders 32x32"),
    "size says 32x16": (_set(height=16), INVALID, "frame size 32x16"),
    "zero width": (_set(width=0), INVALID, "positive"),
    "nan depth": (_nonfinite("depth", np.nan), INVALID, "key 'depth': NaN or inf (1 values, first at (0, 5))"),
    "inf depth": (_nonfinite("depth", np.inf), INVALID, "key 'depth': NaN or inf (1 values"),
    "nan normal": (_nonfinite("normal", np.nan), INVALID, "'normal'"),
    "inf normal": (_nonfinite("normal", -np.inf), INVALID, "'normal'"),
    "nan motion": (_nonfinite("motion", np.nan), INVALID, "'motion'"),
    "inf motion": (_nonfinite("motion", np.inf), INVALID, "'motion'"),
    "empty message": (_empty, INVALID, "empty GBufferFrame"),
    "long prompt": (_set(prompt="x" * 2000), INVALID, "limit is 1000"),
    "unknown encoding": (_set(encoding=9), INVALID, "unknown encoding 9"),
    "jpeg quality": (_set(encoding=render_pb2.JPEG, jpeg_quality=200), INVALID, "jpeg_quality"),
    "oversized message": (_large_frame, EXHAUSTED, ""),
    "short camera": (_camera(world_to_camera=[1.0] * 12), INVALID, "'world_to_camera': expected 16 floats"),
    "nan intrinsics": (_camera(intrinsics=[np.nan] + [1.0] * 8), INVALID, "'intrinsics' (key 'K'): NaN or inf"),
    # values the clip validator refuses (alaya.data.frame_checks), with its messages
    "zero camera": (_camera(world_to_camera=[0.0] * 16), INVALID,
                    "key 'world_to_camera': last row must be (0, 0, 0, 1)"),
    "huge rotation": (_camera(world_to_camera=[1e30] * 16), INVALID, "key 'world_to_camera': rotation part not orthonormal"),
    "huge translation": (_camera(world_to_camera=[1, 0, 0, 1e30, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]), INVALID,
                         "key 'world_to_camera': translation must be < 1e+06 m"),
    "negative depth": (_nonfinite("depth", -1.0), INVALID, "key 'depth': depth must be >= 0 (0: background)"),
    "huge normal": (_nonfinite("normal", 1e30), INVALID, "key 'normal': normals must be unit length where depth > 0"),
    "huge motion": (_nonfinite("motion", 1e6), INVALID, "key 'motion': |motion| must be < 128 pixels"),
    "bad intrinsics": (_camera(intrinsics=[30, 0, 16, 0, 30, 16, 0, 0, 2]), INVALID,
                       "'intrinsics' (key 'K'): last row must be (0, 0, 1)"),
}


def test_the_camera_travels_and_is_optional():
    from alaya.serve.wire import decode_frame
    frame = make_frames(1)[0]
    K, w2c = np.array([[30.0, 0, 16], [0, 30, 16], [0, 0, 1]]), np.arange(16.0).reshape(4, 4)
    got = decode_frame(frame_to_message({**frame, "K": K, "world_to_camera": w2c}), SIZE)
    assert np.array_equal(got["K"], K) and np.array_equal(got["world_to_camera"], w2c)
    assert got["K"].dtype == np.float32
    assert "K" not in decode_frame(frame_to_message(frame), SIZE)


@pytest.mark.parametrize("case", list(BAD_FRAMES))
def test_a_bad_frame_ends_its_stream_with_the_right_code_and_the_server_keeps_serving(client, service, case):
    corrupt, code, match = BAD_FRAMES[case]
    good, bad = (frame_to_message(f, frame_id=i) for i, f in enumerate(make_frames(2, seed=4)))
    corrupt(bad)
    replies = client.render([good, bad], timeout=TIMEOUT)
    if code == INVALID:           # our own checks answer the frames before a bad one first
        assert next(replies).frame_id == 0
    got = []
    with pytest.raises(grpc.RpcError) as err:
        # a message gRPC itself refuses (over the size limit) ends the call at once: the reply to
        # a frame sent just before it may or may not have gone out
        for r in replies:
            got.append(r.frame_id)
    assert got in ([], [0])
    assert err.value.code() == code, err.value.details()
    assert match in err.value.details()
    if code == INVALID:
        assert err.value.details().startswith(f"frame {bad.frame_id}: ")   # names the frame_id
    wait_idle(service)
    assert_serving(client)


def test_abrupt_disconnect_frees_the_session(service):
    wait_idle(service)
    frames = make_frames(2, seed=5)
    for close in ("cancel", "channel"):
        with RenderClient(service.address) as c:
            requests = Requests()
            replies = c.render(requests, timeout=TIMEOUT)
            requests.send(frame_to_message(frames[0]))
            assert next(replies).frame_id == 0
            assert service.servicer.slots.active == 1
            if close == "cancel":
                replies.cancel()
            else:
                c.close()                                     # the whole connection goes away
            with pytest.raises(grpc.RpcError) as err:
                next(replies)
            assert err.value.code() == grpc.StatusCode.CANCELLED
        wait_idle(service)
        wait_no_stream_threads()                          # its reader and pipeline threads end too
    with RenderClient(service.address) as c:
        assert_serving(c)


def wait_no_stream_threads(timeout: float = 10.0) -> None:
    import threading
    names = ("alaya-grpc-read", "alaya-sample", "alaya-decode")
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        alive = [t.name for t in threading.enumerate() if t.name.startswith(names)]
        if not alive:
            return
        time.sleep(0.05)
    raise AssertionError(f"stream threads still alive: {alive}")


def test_session_limit(client, service):
    frames = make_frames(1, seed=6)
    open_streams = []
    for _ in range(2):
        requests = Requests()
        replies = client.render(requests, timeout=TIMEOUT)
        requests.send(frame_to_message(frames[0]))
        assert next(replies).frame_id == 0                    # the server holds this slot now
        open_streams.append((requests, replies))
    assert client.info().active_sessions == 2
    third = client.render([frame_to_message(frames[0])], timeout=TIMEOUT)
    with pytest.raises(grpc.RpcError) as err:
        next(third)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "max_sessions=2" in err.value.details()
    requests, replies = open_streams.pop()
    requests.end()
    assert list(replies) == []                                # closed cleanly
    assert_serving(client)                                    # a new stream is accepted
    requests, replies = open_streams.pop()
    requests.end()
    list(replies)


def test_cli_serve_needs_a_service(capsys):
    from alaya.cli import build_parser, main
    assert main(["serve"]) == 2
    assert "--grpc" in capsys.readouterr().err
    a = build_parser().parse_args(["serve", "--grpc", "50051", "--max-sessions", "3", "--max-message-mb", "4"])
    assert (a.grpc, a.host, a.max_sessions, a.max_message_mb, a.size) == (50051, "127.0.0.1", 3, 4.0, 128)
    assert a.idle_timeout == 30.0
    assert build_parser().parse_args(["serve", "--grpc", "1", "--idle-timeout", "5"]).idle_timeout == 5.0
