"""The play server over real WebSockets (Starlette's test client, the real app, engine and a tiny
student): frames with headers, live prompt/view/action events, clear errors for bad input that
leave the session running, and the token, Origin and session-limit guards."""

import io
import json
import struct

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image
from starlette.websockets import WebSocketDisconnect

from alaya.engine.interactive import InteractiveConfig, InteractiveStream
from alaya.runtime import SessionFactory
from alaya.serve.web import WebConfig, create_app
from tiny_models import tiny_flash_modules

SIZE = 32


@pytest.fixture(scope="module")
def factory():
    return SessionFactory(*tiny_flash_modules(), size=SIZE, backend="torch")


def client(factory, **kw):
    cfg = WebConfig(**{"fps": 20.0, "stats_every": 2, **kw})
    return TestClient(create_app(factory, lambda: InteractiveStream(seed=0, config=InteractiveConfig(size=SIZE)), cfg),
                      headers={"host": "localhost:8000"})            # a loopback name: the Host guard lets it in


def frames(ws, n):
    """The next n frames as (index, image); text messages (stats, errors) are collected."""
    out, texts = [], []
    while len(out) < n:
        msg = ws.receive()
        if msg.get("bytes") is not None:
            index, _ = struct.unpack_from("<Qd", msg["bytes"])
            out.append((index, np.asarray(Image.open(io.BytesIO(msg["bytes"][16:])).convert("RGB"))))
        elif msg.get("text") is not None:
            texts.append(json.loads(msg["text"]))
    return out, texts


def test_page_health_and_schema(factory):
    with client(factory) as c:
        assert "<canvas" in c.get("/").text and "WebSocket" in c.get("/play.js").text
        assert c.get("/health").json() == {"status": "ok", "sessions": 0, "max_sessions": 8}
        schema = c.get("/schema").json()
        assert schema["size"] == SIZE and "toon" in schema["styles"] and "depth" in schema["channels"]


def test_a_session_streams_frames_and_takes_events(factory):
    with client(factory) as c, c.websocket_connect("/ws") as ws:
        got, texts = frames(ws, 4)
        assert [i for i, _ in got] == sorted(i for i, _ in got) and got[0][1].shape == (SIZE, SIZE, 3)
        assert any(t["type"] == "stats" and "model_ms" in t for t in texts)
        before = frames(ws, 1)[0][0][1]
        ws.send_text(json.dumps({"type": "style", "name": "neon_night"}))
        ws.send_text(json.dumps({"type": "move", "forward": 1.0}))
        ws.send_text(json.dumps({"type": "action", "name": "push"}))
        after = frames(ws, 6)[0][-1][1]
        assert np.abs(after.astype(int) - before.astype(int)).mean() > 1       # the view changed
        ws.send_text(json.dumps({"type": "view", "channel": "depth"}))
        wide = frames(ws, 4)[0][-1][1]
        assert wide.shape == (SIZE, 2 * SIZE, 3)                                 # the G-buffer beside it


def test_bad_input_gets_an_error_and_the_session_goes_on(factory):
    with client(factory, max_message_bytes=512) as c, c.websocket_connect("/ws") as ws:
        frames(ws, 1)
        for bad, needle in [("not json", "Invalid JSON"), ('{"type": "move", "forward": 5}', "forward"),
                            ('{"type": "teleport"}', "teleport"), ('{"type": "style", "name": "sepia"}', "name"),
                            (json.dumps({"type": "prompt", "text": "x" * 300}), "text"),
                            ("x" * 1000, "limit is 512")]:
            ws.send_text(bad)
            errors = []
            while not errors:
                msg = ws.receive()
                if msg.get("text"):
                    m = json.loads(msg["text"])
                    if m["type"] == "error":
                        errors.append(m["message"])
            assert needle in errors[0], (bad, errors)
        assert len(frames(ws, 3)[0]) == 3                                         # still streaming


def refused(ws) -> tuple[str, int, str]:
    """A refused socket: the JSON error's message, then the close code and reason."""
    msg = json.loads(ws.receive_text())
    assert msg["type"] == "error"
    with pytest.raises(WebSocketDisconnect) as err:
        ws.receive_text()
    return msg["message"], err.value.code, err.value.reason


def test_token_origin_and_session_limit(factory):
    with client(factory, token="s3cret") as c:
        with c.websocket_connect("/ws?token=wrong") as ws:
            message, code, reason = refused(ws)
        assert code == 1008 and reason == "a valid token is required" and "?token=" in message
        with c.websocket_connect("/ws?token=s3cret") as ws:
            assert len(frames(ws, 1)[0]) == 1
    with client(factory) as c:
        with c.websocket_connect("/ws", headers={"origin": "http://evil.example"}) as ws:
            message, code, reason = refused(ws)
        assert code == 1008 and reason == "origin not allowed" and "'http://evil.example'" in message
    with client(factory, max_sessions=1) as c, c.websocket_connect("/ws") as first:
        frames(first, 1)
        with c.websocket_connect("/ws") as second:
            msg = json.loads(second.receive_text())
            assert msg["type"] == "error" and "all 1 session slots are in use" in msg["message"]
            with pytest.raises(WebSocketDisconnect) as err:
                second.receive_text()
            assert err.value.code == 1013
        assert c.get("/health").json()["sessions"] == 1
        assert len(frames(first, 2)[0]) == 2                                      # the first one goes on
