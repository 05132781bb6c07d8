"""Play server hardening: the Host allow-list (DNS rebinding), refusals the page can explain,
the URL announced only once the port takes connections, and prompts that never stall frames."""

import contextlib
import json
import socket
import struct
import threading
import time

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from alaya.engine.interactive import InteractiveConfig, InteractiveStream
from alaya.runtime import SessionFactory
from alaya.serve.web import WebConfig, create_app, host_allowed, host_name
from alaya.text import PromptEncoder
from test_grpc_hardening import FakeTextModel, frozen_heap  # noqa: F401  (a fixture)
from test_play_web import SIZE, factory  # noqa: F401  (the module fixture)
from test_play_web import refused
from tiny_models import tiny_flash_modules

LOAD_SECONDS = 2.0


def client(factory, host="localhost:8000", **kw):  # noqa: F811
    cfg = WebConfig(**{"fps": 20.0, "stats_every": 2, **kw})
    return TestClient(create_app(factory, lambda: InteractiveStream(seed=0, config=InteractiveConfig(size=SIZE)), cfg),
                      headers={"host": host})


def test_host_names():
    assert [host_name(h) for h in ("LocalHost:8000", "127.0.0.1", "[::1]:80", "::1", "evil.example:8000")] == \
        ["localhost", "127.0.0.1", "[::1]", "[::1]", "evil.example"]
    assert all(host_allowed(h, ()) for h in ("localhost:8000", "127.0.0.1:1", "[::1]:8000", "localhost"))
    assert not host_allowed("evil.example:8000", ()) and not host_allowed(None, ())
    assert host_allowed("192.168.1.7:8000", ("192.168.1.7",)) and host_allowed("box.lan", ("BOX.lan:8000",))


def test_a_handshake_for_another_host_is_refused_with_its_reason(factory):  # noqa: F811
    """DNS rebinding: a page at evil.example whose name resolves to 127.0.0.1 sends its own Host
    and a matching Origin; the Origin check alone let it in."""
    evil = {"origin": "http://evil.example:8000"}
    with client(factory, host="evil.example:8000") as c, c.websocket_connect("/ws", headers=evil) as ws:
        message, code, reason = refused(ws)
    assert code == 1008 and reason == "host not allowed"
    assert "'evil.example:8000'" in message and "--allowed-host 'evil.example'" in message
    with client(factory, host="evil.example:8000", allowed_hosts=("evil.example",)) as c, \
            c.websocket_connect("/ws", headers=evil) as ws:
        assert struct.unpack_from("<Qd", ws.receive_bytes())[0] >= 0          # it plays
    for host in ("127.0.0.1:8000", "[::1]:8000"):
        with client(factory, host=host) as c, c.websocket_connect("/ws") as ws:
            assert len(ws.receive_bytes()) > 16


def test_play_options_reach_the_guards():
    from alaya.cli import build_parser
    from alaya.serve.play import config_from_args
    a = build_parser().parse_args(["play", "--host", "0.0.0.0", "--allowed-host", "box.lan", "--allowed-host", "10.0.0.2"])
    cfg = config_from_args(a)
    assert cfg.allowed_hosts == ("box.lan", "10.0.0.2") and cfg.host == "0.0.0.0"


def test_the_url_is_announced_only_once_the_port_takes_connections():
    from alaya.serve.play import app_server
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    connected = []

    def on_ready():
        with socket.create_connection(("127.0.0.1", port), timeout=5):   # refused if announced too early
            connected.append(True)
    @contextlib.asynccontextmanager
    async def slow_startup(app):               # a slow start (loading models): the port is not bound yet
        time.sleep(0.5)
        yield
    app = FastAPI(lifespan=slow_startup)
    server = app_server(app, "127.0.0.1", port, on_ready)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    end = time.monotonic() + 20
    while not connected and thread.is_alive() and time.monotonic() < end:
        time.sleep(0.02)
    server.should_exit = True
    thread.join(10)
    assert connected == [True]


@pytest.fixture(scope="module")
def slow_text_factory():
    def slow_loader():
        time.sleep(LOAD_SECONDS)
        return FakeTextModel()
    return SessionFactory(*tiny_flash_modules(), size=SIZE, backend="torch",
                          prompt_encoder=PromptEncoder(loader=slow_loader))


def test_a_free_text_prompt_never_stalls_the_frames(slow_text_factory, frozen_heap):  # noqa: F811
    """The text model takes LOAD_SECONDS to load: frames keep coming with the old prompt (no gap
    over 0.5 s), and the new one is used once its embedding is ready."""
    prompt = "a lighthouse in a purple storm"
    with client(slow_text_factory) as c, c.websocket_connect("/ws") as ws:
        ws.receive_bytes()
        ws.send_text(json.dumps({"type": "prompt", "text": prompt}))
        arrivals, prompts = [time.monotonic()], []
        while time.monotonic() - arrivals[0] < LOAD_SECONDS + 2.0:
            msg = ws.receive()
            if msg.get("bytes") is not None:
                arrivals.append(time.monotonic())
            elif msg.get("text") is not None:
                m = json.loads(msg["text"])
                assert m["type"] != "error", m
                prompts.append(m.get("prompt"))
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    assert max(gaps) < 0.5, f"frames stopped for {max(gaps):.2f} s at frame {gaps.index(max(gaps))} of {len(gaps)}"
    assert prompts[0] == "a clear sunny noon" and prompts[-1] == prompt


def test_play_freezes_what_it_loaded_before_serving(monkeypatch):
    """Full garbage collections over the loaded models paused every thread for 0.1-0.7 s: what
    is alive when the server starts is frozen (gc.freeze) before the first player."""
    import gc

    from alaya.serve import play
    seen = {}

    class Server:
        def run(self):
            seen["frozen"] = gc.get_freeze_count()
            seen["tracked"] = len(gc.get_objects())
    loaded = [[i] for i in range(100_000)]                      # stands for the models' objects
    monkeypatch.setattr(play, "build_app", lambda cfg: loaded)
    monkeypatch.setattr(play, "app_server", lambda app, host, port, on_ready: Server())
    try:
        play.serve(play.PlayConfig(port=1))
        assert seen["frozen"] > 100_000 and seen["tracked"] < 100_000
    finally:
        gc.unfreeze()


def wait_no_loop_threads(timeout: float = 10.0) -> list[str]:
    names = ("alaya-engine", "alaya-model", "alaya-sample", "alaya-decode")
    end = time.monotonic() + timeout
    while True:
        alive = [t.name for t in threading.enumerate() if t.name.startswith(names)]
        if not alive or time.monotonic() > end:
            return alive
        time.sleep(0.05)


def test_a_closed_session_leaves_no_threads(factory):  # noqa: F811
    """However the session's task ends (here the test client cancels it while it tears down),
    its engine, model and pipeline threads stop: a leaked session would go on drawing frames."""
    assert wait_no_loop_threads() == []
    for _ in range(3):
        with client(factory) as c, c.websocket_connect("/ws") as ws:
            ws.receive_bytes()
    assert wait_no_loop_threads() == []
