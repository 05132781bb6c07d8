"""``alaya play --world`` over real WebSockets with a tiny random world model: frames with
headers, moves that change the frames (against the same seed standing still), text actions that
resolve or get an error, bad events that get an error while the session goes on; and the page
in Chromium, in world mode."""

import json
import shutil
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient

from alaya.runtime.world_factory import WorldSessionFactory
from alaya.runtime.world_folder import load_start_frames
from alaya.serve.web import WebConfig
from alaya.serve.world_web import ActionStream, create_world_app
from servers import running
from test_play_web import frames
from tiny_world import SIZE, one_thread, tiny_world_folder  # noqa: F401  (one_thread: a fixture)

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if shutil.os.path.exists("/usr/bin/chromium") else None)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tiny_world_folder(tmp_path_factory.mktemp("world") / "model")
    return WorldSessionFactory.from_pretrained(str(folder), backend="torch"), load_start_frames(folder, SIZE)


def client(world, **kw):
    return TestClient(create_world_app(*world, WebConfig(**{"fps": 20.0, "stats_every": 2, **kw})),
                      headers={"host": "127.0.0.1:8000"})            # a loopback name: the Host guard lets it in


def until(ws, index: int, events=()) -> tuple[dict, list]:
    """Sends ``events``, then reads frames up to frame ``index``: ({index: image}, text messages)."""
    for e in events:
        ws.send_text(json.dumps(e))
    got, texts = {}, []
    while max(got, default=-1) < index:
        out, more = frames(ws, 1)
        got.update(out)
        texts += more
    return got, texts


def reply(ws, kind: str) -> dict:
    while True:
        msg = ws.receive()
        if msg.get("text") and json.loads(msg["text"])["type"] == kind:
            return json.loads(msg["text"])


def test_schema_says_world_mode(world):
    with client(world) as c:
        schema = c.get("/schema").json()
        assert schema["mode"] == "world" and schema["size"] == SIZE and schema["channels"] == []
        assert schema["actions"] == ["jump", "attack", "spell", "summon"] and "toon" in schema["styles"]
        assert c.get("/health").json() == {"status": "ok", "sessions": 0, "max_sessions": 8}


def test_frames_follow_the_actions(world):
    with client(world) as c:
        runs = []
        for events in ([], [], [{"type": "move", "forward": 1.0, "turn": 1.0}]):
            with c.websocket_connect("/ws") as ws:
                runs.append(until(ws, 8, events))
        (still, texts), (again, _), (moved, _) = runs
        assert all(img.shape == (SIZE, SIZE, 3) for img in still.values())
        assert any(t["type"] == "stats" and "model_ms" in t and t["prompt"] == "a clear sunny noon" for t in texts)
        common = sorted(set(still) & set(again) & set(moved))[-3:]
        assert len(common) == 3
        for i in common:
            assert np.array_equal(still[i], again[i])                              # same seed, same actions
            assert np.abs(still[i].astype(int) - moved[i]).mean() > 1              # moving changes the world


def test_text_actions_prompts_and_bad_events(world):
    with client(world, max_message_bytes=512) as c, c.websocket_connect("/ws") as ws:
        until(ws, 0)
        ws.send_text(json.dumps({"type": "do", "text": "cast a fireball"}))
        assert reply(ws, "do") == {"type": "do", "text": "cast a fireball", "action": "spell"}
        ws.send_text(json.dumps({"type": "do", "text": "the quarterly tax report"}))
        assert "matches no action" in reply(ws, "error")["message"]
        for bad, needle in [('{"type": "move", "up": 1}', "move.up"), ('{"type": "move", "turn": 2}', "move.turn"),
                            ('{"type": "view", "channel": "depth"}', "view"),
                            ('{"type": "action", "name": "push"}', "action.name"),
                            ('{"type": "do", "text": ""}', "do.text"), ("x" * 1000, "limit is 512")]:
            ws.send_text(bad)
            assert needle in reply(ws, "error")["message"], bad
        events = [{"type": "action", "name": "jump"}, {"type": "look", "turn": -0.5, "pitch": 0.2},
                  {"type": "style", "name": "neon_night"}, {"type": "reset"}, {"type": "prompt", "text": "a foggy moor"}]
        start, texts = max(until(ws, 0)[0]), []
        for e in events:
            ws.send_text(json.dumps(e))
        deadline = time.monotonic() + 60.0                  # the embedding is made on the encoder's thread
        while not any(t.get("prompt") == "a foggy moor" for t in texts):
            assert time.monotonic() < deadline, f"the prompt never switched; stats said {texts[-3:]}"
            got, more = until(ws, start + 2)
            start, texts = max(got), texts + more
        got, more = until(ws, start + 8)                                            # still streaming
        assert not [t for t in texts + more if t["type"] == "error"]


def test_token_guard(world):
    from starlette.websockets import WebSocketDisconnect
    with client(world, token="s3cret") as c, c.websocket_connect("/ws") as ws:
        assert "?token=" in json.loads(ws.receive_text())["message"]
        with pytest.raises(WebSocketDisconnect) as err:
            ws.receive_text()
        assert err.value.code == 1008 and err.value.reason == "a valid token is required"


def test_action_stream_rows():
    s = ActionStream()
    s.hold(1, -1, 0.5, 0)
    s.look(0.75, -0.5)
    s.act("attack")
    s.act("jump")
    assert s.step().tolist() == [1, -1, 1, -0.5, 0, 1, 0, 0]                      # look: one tick, clipped
    assert s.step().tolist() == [1, -1, 0.5, 0, 1, 0, 0, 0]                       # one one-shot per tick
    assert s.step().tolist() == [1, -1, 0.5, 0, 0, 0, 0, 0]


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (make test installs it as root)")
def test_world_page_in_chromium(world):
    from playwright.sync_api import sync_playwright
    app = create_world_app(*world, WebConfig(fps=15.0, stats_every=2))
    with running(app) as port, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            page = browser.new_page()
            page.add_init_script("""window.sent = []; const send = WebSocket.prototype.send;
                WebSocket.prototype.send = function (m) { window.sent.push(JSON.parse(m)); return send.call(this, m); };""")
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_function("window.alaya.mode === 'world' && window.alaya.frames >= 3", timeout=30000)
            assert page.is_visible("#doForm") and not page.is_visible("#channel")      # no G-buffer view
            assert "world model" in page.inner_text("#mode") and page.is_visible("#summon")
            page.locator("#screen").click()
            page.keyboard.down("w")
            page.keyboard.down("ArrowLeft")
            page.keyboard.press("t")
            page.wait_for_function("window.alaya.frames >= 6", timeout=30000)
            page.keyboard.up("w")
            sent = page.evaluate("window.sent")
            assert {"type": "move", "forward": 1, "strafe": 0, "turn": 1, "pitch": 0} in sent
            assert {"type": "action", "name": "spell"} in sent
            page.fill("#do", "swing the sword")
            page.press("#do", "Enter")
            page.wait_for_function("window.alaya.lastDo !== null", timeout=30000)
            assert page.evaluate("window.alaya.lastDo.action") == "attack"
            assert page.inner_text("#doResult") == "→ attack" and page.evaluate("window.alaya.lastError") == ""
        finally:
            browser.close()
