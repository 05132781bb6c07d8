"""Load on the real server (uvicorn on a socket, real WebSocket clients): 8 concurrent sessions
all keep receiving frames, a ninth over the limit of 8 is refused with a clear message, and
closing sessions frees their slots."""

import asyncio
import json
import time

import pytest
import websockets

from servers import running
from test_play_web import SIZE, factory  # noqa: F401  (the module fixture)


@pytest.fixture(scope="module")
def server(factory):  # noqa: F811
    import torch

    from alaya.engine.interactive import InteractiveConfig, InteractiveStream
    from alaya.serve.web import WebConfig, create_app
    threads = torch.get_num_threads()
    torch.set_num_threads(1)                             # as alaya play does (many sessions, few cores)
    factory.prompt_encoder.encode("a clear sunny noon")  # load the text model up front, as alaya play does
    app = create_app(factory, lambda: InteractiveStream(seed=0, config=InteractiveConfig(size=SIZE, warmup_frames=2)),
                     WebConfig(fps=10.0, max_sessions=8))
    try:
        with running(app) as port:
            yield f"ws://127.0.0.1:{port}/ws", f"http://127.0.0.1:{port}/health"
    finally:
        torch.set_num_threads(threads)


async def count_frames(url: str, seconds: float, ready: asyncio.Event) -> int:
    n = 0
    async with websockets.connect(url) as ws:
        ready.set()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            msg = await asyncio.wait_for(ws.recv(), timeout=60)
            n += isinstance(msg, bytes)
    return n


async def refused(url: str) -> tuple[str, int]:
    async with websockets.connect(url) as ws:
        text = await asyncio.wait_for(ws.recv(), timeout=30)
        with pytest.raises(websockets.ConnectionClosed) as err:
            await asyncio.wait_for(ws.recv(), timeout=30)
        return json.loads(text)["message"], err.value.rcvd.code


def test_eight_sessions_stream_and_a_ninth_is_refused(server):
    url, health = server

    async def main():
        ready = [asyncio.Event() for _ in range(8)]
        tasks = [asyncio.create_task(count_frames(url, 12.0, r)) for r in ready]
        for r in ready:
            await asyncio.wait_for(r.wait(), timeout=60)
        await asyncio.sleep(1.0)
        message, code = await refused(url)
        counts = await asyncio.gather(*tasks)
        return message, code, counts

    message, code, counts = asyncio.run(main())
    assert "all 8 session slots are in use" in message and code == 1013
    assert all(c >= 3 for c in counts), counts                  # every session kept receiving
    import urllib.request
    for _ in range(50):                                         # slots come back when they close
        if json.loads(urllib.request.urlopen(health).read())["sessions"] == 0:
            break
        time.sleep(0.2)
    assert json.loads(urllib.request.urlopen(health).read())["sessions"] == 0
