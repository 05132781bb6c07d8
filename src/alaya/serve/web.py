"""The browser side of ``alaya play``: HTTP for the page, health and schema; one WebSocket per
player carrying JPEG frames out and validated input events in.

Per WebSocket session: an interactive engine world (``make_stream``) and a render session from
the shared ``SessionFactory``, run by a :class:`~alaya.runtime.loop.RealtimeLoop`. Outgoing
frames go through a one-slot mailbox, so a slow client gets the newest frame, never a backlog
(memory per session is bounded). Each binary message is a 16-byte header — frame index
(uint64) and the engine's wall-clock start time of that frame (float64 seconds), both
little-endian — then the JPEG bytes; every ``stats_every`` frames a JSON text message carries
FPS, latency and per-stage timings.

Guards, in this order: the ``Host`` header must name this server (a loopback name, or one of
``allowed_hosts``: a page elsewhere that reaches us through DNS rebinding sends its own name);
the ``Origin`` must be the page's own host or listed in ``allowed_origins``; an optional token
(``?token=``); at most ``max_sessions`` sessions (code 1013). A refused socket is accepted and then
closed with a code and a short reason, after a JSON error with the whole story, so the page can
say why (a handshake refused with HTTP 403 reaches a page only as "1006"). Inbound messages over
``max_message_bytes`` and malformed events get an error message and the session goes on.

A prompt never stalls a session: its embedding is computed on the prompt encoder's thread (the
text model's first load takes seconds) and the model thread switches once it is ready
(``PromptSwitch``).

The server is the same for every kind of play: a :class:`Game` names its mode (the page adapts
to it, from ``GET /schema``), parses events and makes one :class:`Player` per WebSocket. This
module's ``create_app`` is the engine mode; ``alaya.serve.world_web`` the world model's.
"""

from __future__ import annotations

import asyncio
import io
import json
import secrets
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from urllib.parse import urlparse

import numpy as np
from fastapi import FastAPI, WebSocket, WebSocketDisconnect
from fastapi.responses import HTMLResponse, JSONResponse, Response
from PIL import Image

from alaya.data import visualize as V
from alaya.engine.styles import get_style
from alaya.runtime.loop import FrameOut, LoopConfig, RealtimeLoop
from alaya.serve.events import Action, Look, Move, Prompt, Reset, Style, View, parse_event, schema

HEADER = struct.Struct("<Qd")
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")


@dataclass
class WebConfig:
    max_sessions: int = 8
    token: str | None = None
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()          # Host names besides LOOPBACK_HOSTS (alaya play: --host, --allowed-host)
    fps: float = 30.0
    jpeg_quality: int = 85
    max_message_bytes: int = 4096
    stats_every: int = 10
    prompt: str = "a clear sunny noon"
    seed: int = 0
    extra_info: dict = field(default_factory=dict)


def encode_jpeg(rgb: np.ndarray, quality: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def channel_view(frame: dict, channel: str) -> np.ndarray:
    """One G-buffer channel of a single frame as uint8 RGB."""
    one = {k: np.asarray(v)[None] for k, v in frame.items()}
    if channel == "depth":
        img = V.depth_image(one["depth"], one["mask"])
    elif channel == "normal":
        img = V.normal_image(one["normal"])
    elif channel == "albedo":
        img = one["albedo"]
    elif channel in ("roughness", "metallic"):
        img = V.grey_image(one[channel])
    elif channel in ("material", "instance"):
        img = V.id_image(one[channel])
    elif channel == "motion":
        img = V.flow_image(one["motion"])
    else:
        raise ValueError(f"unknown channel '{channel}'")
    return np.ascontiguousarray(img[0])


def _call_soon(loop: asyncio.AbstractEventLoop, fn, *args) -> None:
    """``fn(*args)`` on ``loop`` from another thread; nothing if the loop has closed (the server
    is shutting down and the session with it)."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        pass


class _Mailbox:
    """Newest-only hand-over from the model thread to the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop, self.item, self.event = loop, None, asyncio.Event()
        self.dropped = 0

    def put(self, item) -> None:                           # model thread
        _call_soon(self.loop, self._put, item)

    def _put(self, item) -> None:
        if self.item is not None:
            self.dropped += 1
        self.item = item
        self.event.set()

    async def get(self):
        await self.event.wait()
        self.event.clear()
        item, self.item = self.item, None
        return item


def host_name(host: str) -> str:
    """The name in a Host header or a --host value, without the port, lowercased; IPv6 in brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[:host.index("]") + 1] if "]" in host else host
    if host.count(":") > 1:                                # a bare IPv6 address
        return f"[{host}]"
    return host.split(":")[0]


def host_allowed(host: str | None, allowed: tuple[str, ...]) -> bool:
    """Whether a request's Host header names this server (a loopback name or one of ``allowed``)."""
    return host is not None and host_name(host) in {host_name(h) for h in (*LOOPBACK_HOSTS, *allowed)}


def refusal(ws: WebSocket, cfg: WebConfig) -> tuple[int, str, str] | None:
    """Why a WebSocket may not play, as (close code, short close reason, message), or None."""
    host, origin = ws.headers.get("host"), ws.headers.get("origin")
    if not host_allowed(host, cfg.allowed_hosts):
        names = ", ".join((*LOOPBACK_HOSTS, *cfg.allowed_hosts))
        return 1008, "host not allowed", (f"host {host!r} is not allowed: this server answers to {names}; "
                                          f"start alaya play with --allowed-host {host_name(host or '')!r} to add it")
    if not origin_allowed(origin, host, cfg.allowed_origins):
        return 1008, "origin not allowed", (f"origin {origin!r} is not allowed: only pages served by this server "
                                            f"({host}) or given with --allow-origin may play")
    if cfg.token is not None and not secrets.compare_digest(ws.query_params.get("token", ""), cfg.token):
        return 1008, "a valid token is required", ("a valid ?token= is required: open the URL alaya play printed, "
                                                   "which carries it")
    return None


class PromptSwitch:
    """A player's prompt changes without stalling its frames: the embedding is computed on the
    prompt encoder's thread (``encode_later``; the text model's first load takes seconds) and the
    model thread switches to it once it is ready, keeping the previous prompt until then. The
    latest request wins; a failure (no text model) is reported through the loop's ``on_error``."""

    def __init__(self, encoder):
        self.encoder, self.latest = encoder, 0

    def request(self, text: str, rt: RealtimeLoop) -> None:
        future = self.encoder.encode_later(text)          # a prompt over the limit raises here
        self.latest += 1
        ticket = self.latest

        def ready(f) -> None:
            if ticket != self.latest:
                return
            if f.exception() is not None:
                rt.on_error(f.exception())
            else:
                rt.model_command(lambda s: s.set_prompt(text))     # now a cache hit: instant
        future.add_done_callback(ready)


def origin_allowed(origin: str | None, host: str | None, allowed: tuple[str, ...]) -> bool:
    if origin is None:                                     # not a browser (a script, a bench)
        return True
    if origin in allowed:
        return True
    parsed = urlparse(origin)
    return host is not None and parsed.netloc == host


@dataclass
class Player:
    """One WebSocket's game, made when it connects: the model-side ``session`` (``step(x)`` ->
    uint8 RGB, ``prompt``), ``make_stream()`` for the loop's input thread, and ``handle(event,
    loop)``, which applies one parsed event and may return a JSON reply (ValueError: an error
    message for the page, and the session goes on)."""
    session: object
    make_stream: Callable[[], object]
    handle: Callable[[object, RealtimeLoop], dict | None]


@dataclass
class Game:
    """What one kind of play plugs into the server."""
    mode: str                                       # "engine" or "world": the page adapts to it
    size: int
    schema: dict                                    # served at /schema, with mode, size, fps, header
    parse: Callable[[str | bytes], object]          # raw message -> event, or ValueError
    new_player: Callable[[], Player]                # blocking (loads, encodes): runs in an executor


def prompt_text(event: Prompt | Style) -> str:
    """The prompt a prompt or style event asks for."""
    return event.text if isinstance(event, Prompt) else get_style(event.name).phrasings[0]


def create_app(factory, make_stream: Callable[[], object], config: WebConfig | None = None) -> FastAPI:
    """The engine mode: ``factory`` is a :class:`~alaya.runtime.SessionFactory`;
    ``make_stream()`` builds one interactive engine world (called on each session's engine
    thread)."""
    cfg = config or WebConfig()

    def new_player() -> Player:
        session = factory.new(cfg.prompt, cfg.seed)
        state = {"style": "clear_noon", "prompts": PromptSwitch(session.prompt_encoder)}
        return Player(session, make_stream, lambda event, rt: _engine_event(event, rt, state))

    return create_game_app(Game("engine", factory.size, schema(), parse_event, new_player), cfg)


def _engine_event(event, rt: RealtimeLoop, state: dict) -> None:
    if isinstance(event, Move):
        rt.engine_command(lambda s: s.set_movement(event.forward, event.strafe, event.up))
    elif isinstance(event, Look):
        rt.engine_command(lambda s: s.look(event.dyaw, event.dpitch))
    elif isinstance(event, Action):
        rt.engine_command(lambda s: s.act(event.name))
    elif isinstance(event, (Prompt, Style)):
        if isinstance(event, Style):
            state["style"] = event.name
        state["prompts"].request(prompt_text(event), rt)
    elif isinstance(event, View):
        if event.channel == "none":
            rt.side_view(None)
        elif event.channel == "reference":
            rt.side_view(lambda s, f: s.render_style(state["style"]))
        else:
            rt.side_view(lambda s, f, c=event.channel: channel_view(f, c))
    elif isinstance(event, Reset):
        rt.engine_command(lambda s: s.reset())
        rt.model_command(lambda s: s.reset())


def create_game_app(game: Game, cfg: WebConfig) -> FastAPI:
    """The page, ``/health``, ``/schema`` and the guarded ``/ws`` for any :class:`Game`."""
    app = FastAPI(title="alaya play", docs_url=None, redoc_url=None)
    slots = threading.BoundedSemaphore(cfg.max_sessions)
    active = {"n": 0}

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        return resources.files("alaya.serve").joinpath("static/play.html").read_text()

    @app.get("/play.js")
    def script() -> Response:
        text = resources.files("alaya.serve").joinpath("static/play.js").read_text()
        return Response(text, media_type="application/javascript")

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", "sessions": active["n"], "max_sessions": cfg.max_sessions}

    @app.get("/schema")
    def get_schema() -> JSONResponse:
        return JSONResponse({**game.schema, "mode": game.mode, "size": game.size, "fps": cfg.fps,
                             "header": "<Qd: frame index, engine start time (s)", **cfg.extra_info})

    @app.websocket("/ws")
    async def play(ws: WebSocket) -> None:
        refused = refusal(ws, cfg)
        await ws.accept()                          # then closed with a reason the page can show
        if refused is not None:
            code, reason, message = refused
            await ws.send_text(json.dumps({"type": "error", "message": message}))
            await ws.close(code=code, reason=reason)
            return
        if not slots.acquire(blocking=False):
            await ws.send_text(json.dumps({"type": "error", "message":
                                           f"server full: all {cfg.max_sessions} session slots are in use, try again later"}))
            await ws.close(code=1013, reason=f"server full ({cfg.max_sessions} sessions)")
            return
        active["n"] += 1
        try:
            await _run_session(ws, game, cfg)
        finally:
            active["n"] -= 1
            slots.release()

    return app


async def _run_session(ws: WebSocket, game: Game, cfg: WebConfig) -> None:
    loop = asyncio.get_running_loop()
    box = _Mailbox(loop)
    errors: asyncio.Queue = asyncio.Queue(maxsize=8)

    def report(err: BaseException) -> None:
        _call_soon(loop, lambda: errors.full() or errors.put_nowait(str(err)))

    player = await loop.run_in_executor(None, game.new_player)
    rt = RealtimeLoop(player.make_stream, player.session, box.put, LoopConfig(fps=cfg.fps), on_error=report)
    sender = None
    try:
        await loop.run_in_executor(None, rt.start)
        sender = asyncio.create_task(_send_frames(ws, box, errors, rt, player, cfg))
        await _receive_events(ws, game, player, rt, cfg)
    except WebSocketDisconnect:
        pass
    finally:
        # this task may be cancelled (a client gone, the server stopping) at any await here, even
        # in this block: the loop's threads are told to stop first, without waiting, then awaited
        if sender is not None:
            sender.cancel()
        rt.stop(timeout=0)
        await loop.run_in_executor(None, rt.stop)


async def _send_frames(ws: WebSocket, box: _Mailbox, errors: asyncio.Queue, rt: RealtimeLoop, player: Player,
                       cfg: WebConfig) -> None:
    """The newest frame, as it comes (JPEG in an executor), and the stats and errors between."""
    loop = asyncio.get_running_loop()
    while True:
        out: FrameOut = await box.get()
        img = out.rgb if out.side is None else np.concatenate([out.rgb, out.side], 1)
        data = await loop.run_in_executor(None, encode_jpeg, img, cfg.jpeg_quality)
        await ws.send_bytes(HEADER.pack(out.index, out.engine_start) + data)
        if out.index % cfg.stats_every == 0:
            await ws.send_text(json.dumps({"type": "stats", **rt.stats(), **out.timings,
                                           "dropped": box.dropped, "prompt": player.session.prompt}))
        while not errors.empty():
            await ws.send_text(json.dumps({"type": "error", "message": errors.get_nowait()}))


async def _receive_events(ws: WebSocket, game: Game, player: Player, rt: RealtimeLoop, cfg: WebConfig) -> None:
    """The player's events until the socket closes: each parsed and handled (in an executor); a
    bad one gets an error message and the session goes on."""
    loop = asyncio.get_running_loop()
    while rt.running:
        msg = await ws.receive()
        if msg["type"] == "websocket.disconnect":
            return
        raw = msg.get("text") if msg.get("text") is not None else msg.get("bytes")
        if raw is None:
            continue
        if len(raw) > cfg.max_message_bytes:
            await ws.send_text(json.dumps({"type": "error", "message":
                                           f"message of {len(raw)} bytes; the limit is {cfg.max_message_bytes}"}))
            continue
        try:
            reply = await loop.run_in_executor(None, player.handle, game.parse(raw), rt)
        except ValueError as err:
            reply = {"type": "error", "message": str(err)}
        if reply is not None:
            await ws.send_text(json.dumps(reply))
