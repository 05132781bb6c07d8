"""``alaya serve --grpc PORT``: render sessions for game engines over a gRPC stream.

``Render`` is one bidirectional stream per engine view: each ``GBufferFrame`` is checked
(``wire.decode_frame``), run through that stream's own ``RenderSession`` and answered with one
``RGBFrame``, in order. The session runs in a ``StreamPipeline``, so a client that sends frames
ahead of the replies has the next frame prepared while the last one renders. A frame can switch the prompt (from that frame on) or restart the
stream, so an engine never reconnects for either.

gRPC's synchronous server runs each stream on a worker thread for the stream's whole life, so
the pool has ``max_sessions`` threads plus a few spare ones: streams over the limit and ``Info``
calls are still answered (with RESOURCE_EXHAUSTED, with the info) while every session is busy.
A session slot is given back exactly once, whichever comes first: the stream ending, failing,
the client vanishing (``context.add_callback``), or no frame for ``idle_timeout`` seconds (the
stream ends with DEADLINE_EXCEEDED, so idle clients cannot hold every slot).

Requests are parsed by ``lenient``: bytes that are not a message (garbage, a truncated frame, a
prompt that is not UTF-8) reach the handler as ``Undecodable`` and get INVALID_ARGUMENT, where
gRPC's own parser would answer INTERNAL. A frame's values are checked by its session
(``RenderSession._check``: ``alaya.data.frame_checks``, the clip validator's rules). A new
free-text prompt never stalls a stream: its embedding is computed on the encoder's thread
(``PromptEncoder.encode_later``; the text model's first load takes seconds) and frames keep the
previous prompt until it is ready (``StreamPrompt``).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc
from google.protobuf.message import DecodeError

from alaya import __version__
from alaya.runtime import RenderSession, SessionFactory
from alaya.runtime.pipeline import StreamPipeline
from alaya.serve.proto import render_pb2, render_pb2_grpc
from alaya.serve.wire import FrameError, check_encoding, decode_frame, encode_rgb

MB = 1 << 20
READ_AHEAD = 3          # a stream's frames read from the network before the pipeline takes them


@dataclass
class GrpcConfig:
    port: int = 50051                # 0: any free port (``GrpcService.port`` tells which)
    host: str = "127.0.0.1"          # "0.0.0.0" or "[::]" to accept other machines
    max_sessions: int = 8            # concurrent Render streams
    max_message_mb: float = 16.0     # largest GBufferFrame; a 128x128 frame is 0.45 MB
    model_name: str = "student"      # reported by Info
    backend: str = "onnx"            # reported by Info (the factory already holds the backend)
    spare_workers: int = 4           # threads beyond max_sessions, for Info and refusals
    idle_timeout: float = 30.0       # seconds without a frame before a stream is ended (its slot freed)

    def __post_init__(self):
        if not self.idle_timeout > 0:
            raise ValueError(f"idle_timeout must be > 0 seconds, got {self.idle_timeout}")

    @property
    def max_message_bytes(self) -> int:
        return int(self.max_message_mb * MB)


class SessionSlots:
    """At most ``limit`` open streams; ``acquire`` returns a release function that works once."""

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError(f"max_sessions must be >= 1, got {limit}")
        self.limit, self.active = limit, 0
        self._lock = threading.Lock()

    def acquire(self) -> Callable[[], None] | None:
        with self._lock:
            if self.active >= self.limit:
                return None
            self.active += 1
        done = threading.Event()

        def release() -> None:
            with self._lock:
                if not done.is_set():
                    done.set()
                    self.active -= 1
        return release


@dataclass(frozen=True)
class Undecodable:
    """A request whose bytes are not a valid message; ``reason`` says why, naming the field when known."""
    reason: str


def lenient(message_type) -> Callable[[bytes], object]:
    """A request deserializer that returns ``Undecodable`` instead of raising (gRPC would answer
    INTERNAL "Exception deserializing request!")."""
    def deserialize(data: bytes):
        try:
            return message_type.FromString(data)
        except DecodeError as err:
            name = message_type.DESCRIPTOR.name
            if "UTF-8" in str(err):       # upb: "String field had bad UTF-8"; GBufferFrame's one string
                fields = [f.name for f in message_type.DESCRIPTOR.fields if f.type == f.TYPE_STRING]
                return Undecodable(f"{' or '.join(repr(f) for f in fields)}: not valid UTF-8 ({name}, {len(data)} bytes)")
            return Undecodable(f"not a valid {name}: {len(data)} bytes, truncated or corrupt ({err})")
    return deserialize


class StreamPrompt:
    """A stream's prompt changes: one that needs no model applies from its own frame on; a free
    text is embedded on the encoder's thread and applies from the first frame after it is ready
    (the frames between keep the previous prompt). The latest request wins."""

    def __init__(self, encoder):
        self.encoder = encoder
        self.pending: tuple[str, object] | None = None        # (prompt, future of its embedding)

    def ask(self, prompt: str) -> None:
        """Start on ``prompt`` (ValueError, TypeError for a bad one)."""
        self.pending = (prompt, self.encoder.encode_later(prompt))

    def take(self) -> str | None:
        """The requested prompt once its embedding is ready (then ``set_prompt`` is instant), else None.
        An encoding failure (ImportError: no text model) raises here."""
        if self.pending is None or not self.pending[1].done():
            return None
        prompt, future = self.pending
        self.pending = None
        future.result()
        return prompt


class RenderServicer(render_pb2_grpc.RendererServicer):
    def __init__(self, factory: SessionFactory, config: GrpcConfig):
        self.factory, self.config = factory, config
        self.slots = SessionSlots(config.max_sessions)

    def Info(self, request, context) -> render_pb2.InfoReply:
        if isinstance(request, Undecodable):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.reason)
        from alaya.engine.styles import STYLES          # plain data: names, phrasings
        styles = [render_pb2.Style(name=s.name, description=s.description, phrasings=s.phrasings)
                  for s in STYLES.values()]
        size = self.factory.size
        return render_pb2.InfoReply(
            model=self.config.model_name, backend=self.config.backend, width=size, height=size, styles=styles,
            max_sessions=self.slots.limit, active_sessions=self.slots.active,
            max_message_bytes=self.config.max_message_bytes,
            max_prompt_chars=self.factory.prompt_encoder.max_chars, version=__version__)

    def Render(self, request_iterator, context) -> Iterator[render_pb2.RGBFrame]:
        release = self.slots.acquire()
        if release is None:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"the server is at its limit of {self.slots.limit} concurrent sessions "
                          f"(max_sessions={self.slots.limit}); retry when a stream closes")
        if not context.add_callback(release):           # the RPC already ended
            release()
            return
        try:
            yield from self._render_stream(request_iterator, context)
        finally:
            release()

    def _render_stream(self, requests, context) -> Iterator[render_pb2.RGBFrame]:
        """The frames of one stream through its session in a ``StreamPipeline``: a client that
        sends ahead (``RenderClient.render`` does) has frame n + 1 checked and prepared while frame n
        is sampled and frame n - 1 decoded. Requests are read on a thread of their own and every
        reply goes out, in order, as soon as it is ready, so a client that waits for each reply
        before it sends the next frame is served as before."""
        events: queue.SimpleQueue = queue.SimpleQueue()
        room = threading.Semaphore(READ_AHEAD)           # frames read and not yet taken: memory stays bounded
        ended = threading.Event()
        threading.Thread(target=_read_requests, args=(requests, events, room, ended),
                         name="alaya-grpc-read", daemon=True).start()
        stream = _Stream(self.factory, StreamPrompt(self.factory.prompt_encoder))
        pending: deque = deque()                         # (msg, t0, t1, future of the RGB) in order
        done_at: dict = {}                               # future -> when its RGB was ready
        idle = self.config.idle_timeout
        last_frame, count = time.monotonic(), 0
        try:
            while True:
                while pending and pending[0][3].done():
                    yield self._reply(*pending.popleft(), done_at, context)
                try:                                     # frames in flight: waiting on us, not idle
                    kind, msg = events.get(timeout=None if pending else max(0.0, last_frame + idle - time.monotonic()))
                except queue.Empty:
                    context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                  f"no frame for {idle:g} s (the server's idle_timeout): the stream is closed "
                                  f"and its session slot freed; open a new stream to go on")
                if kind == "ready":
                    continue
                if kind == "end":
                    break
                room.release()
                last_frame, count = time.monotonic(), count + 1
                t0 = time.perf_counter()
                try:
                    if isinstance(msg, Undecodable):
                        raise FrameError(msg.reason)
                    frame = decode_frame(msg, self.factory.size)
                    check_encoding(msg)
                    if stream.session is None or msg.reset:
                        t_drain = time.perf_counter()
                        while pending:                   # the old stream's frames go out first
                            yield self._reply(*pending.popleft(), done_at, context)
                        t0 += time.perf_counter() - t_drain       # not this frame's time
                    stream.begin(msg)
                    t1 = time.perf_counter()
                    future = stream.pipeline.submit(frame)
                except (FrameError, KeyError, ValueError, TypeError, ImportError) as err:
                    while pending:                       # the frames before it are answered first
                        yield self._reply(*pending.popleft(), done_at, context)
                    where = (f"frame {msg.frame_id}" if not isinstance(msg, Undecodable)
                             else f"message {count} of the stream")
                    code = (grpc.StatusCode.FAILED_PRECONDITION if isinstance(err, ImportError)
                            else grpc.StatusCode.INVALID_ARGUMENT)
                    context.abort(code, f"{where}: {err}".replace("key 'K'", "'intrinsics' (key 'K')"))

                def ready(f, done_at=done_at):
                    done_at[f] = time.perf_counter()
                    events.put(("ready", None))
                future.add_done_callback(ready)
                pending.append((msg, t0, t1, future))
            while pending:
                yield self._reply(*pending.popleft(), done_at, context)
        finally:
            ended.set()
            room.release()                               # a reader waiting for room wakes and stops
            stream.close()

    @staticmethod
    def _reply(msg, t0: float, t1: float, future, done_at: dict, context) -> render_pb2.RGBFrame:
        """A rendered frame's RGBFrame (waiting for it). ``render_ms``: from its submission to its
        RGB, which includes the wait behind the frames before it in the pipeline."""
        try:
            rgb = future.result()
        except (KeyError, ValueError) as err:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"frame {msg.frame_id}: {err}")
        t2 = done_at.pop(future, None) or time.perf_counter()
        t3 = time.perf_counter()
        encoding, quality = check_encoding(msg)
        data = encode_rgb(rgb, encoding, quality)
        return render_pb2.RGBFrame(
            frame_id=msg.frame_id, width=rgb.shape[1], height=rgb.shape[0], encoding=encoding, data=data,
            decode_ms=(t1 - t0) * 1000.0, render_ms=(t2 - t1) * 1000.0,
            encode_ms=(time.perf_counter() - t3) * 1000.0)


def _read_requests(requests, events: queue.SimpleQueue, room: threading.Semaphore, ended: threading.Event) -> None:
    """A stream's reader thread: each request into ``events`` as it arrives, at most
    ``READ_AHEAD`` ahead of the handler, then ``("end", None)``."""
    frames = iter(requests)
    try:
        while True:
            room.acquire()
            if ended.is_set():
                return
            events.put(("frame", next(frames)))
    except StopIteration:
        pass
    except Exception:                                    # the RPC was cancelled or failed
        pass
    events.put(("end", None))


class _Stream:
    """One Render stream's session and pipeline, made on its first frame and again on a reset."""

    def __init__(self, factory: SessionFactory, prompts: StreamPrompt):
        self.factory, self.prompts = factory, prompts
        self.session: RenderSession | None = None
        self.pipeline: StreamPipeline | None = None

    def begin(self, msg) -> None:
        """Apply a frame's prompt and reset before it is submitted (the caller has sent the old
        stream's replies before a reset)."""
        if msg.HasField("prompt"):
            self.prompts.ask(msg.prompt)
        ready = self.prompts.take()
        if self.session is None or msg.reset:            # a new stream: frame index 0, this seed
            kept = self.session.prompt if self.session is not None else ""
            self.close()
            self.session = self.factory.new(kept if ready is None else ready, seed=msg.seed)
            self.pipeline = StreamPipeline(self.session)
        elif ready is not None:
            self.session.set_prompt(ready)               # from this frame on: it is prepared next

    def close(self) -> None:
        if self.pipeline is not None:
            self.pipeline.close()


@dataclass
class GrpcService:
    server: grpc.Server
    servicer: RenderServicer
    port: int

    @property
    def address(self) -> str:
        return f"{self.servicer.config.host}:{self.port}"

    def stop(self, grace: float | None = None) -> None:
        self.server.stop(grace).wait()


def start_grpc_server(factory: SessionFactory, config: GrpcConfig) -> GrpcService:
    """Bind ``config.host:config.port`` and start serving; returns at once (``server.wait_for_termination``)."""
    servicer = RenderServicer(factory, config)
    pool = ThreadPoolExecutor(config.max_sessions + config.spare_workers, thread_name_prefix="alaya-grpc")
    options = [("grpc.max_receive_message_length", config.max_message_bytes),
               ("grpc.max_send_message_length", -1),
               ("grpc.so_reuseport", 0)]                # a second server on the same port fails to bind
    server = grpc.server(pool, options=options)
    handlers = {
        "Render": grpc.stream_stream_rpc_method_handler(
            servicer.Render, request_deserializer=lenient(render_pb2.GBufferFrame),
            response_serializer=render_pb2.RGBFrame.SerializeToString),
        "Info": grpc.unary_unary_rpc_method_handler(
            servicer.Info, request_deserializer=lenient(render_pb2.InfoRequest),
            response_serializer=render_pb2.InfoReply.SerializeToString)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("alaya.v1.Renderer", handlers),))
    address = f"{config.host}:{config.port}"
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as err:
        raise ValueError(f"cannot listen on {address}: {err}") from err
    if port == 0:
        raise ValueError(f"cannot listen on {address}")
    server.start()
    return GrpcService(server, servicer, port)
