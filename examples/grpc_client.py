"""An engine streaming to ``alaya serve --grpc``: our own engine plays the game engine.

    alaya serve --grpc 50051 &
    python examples/grpc_client.py --target 127.0.0.1:50051 --frames 60 --out grpc_demo.gif

Each frame of ``EngineStream`` (physics + camera rig + G-buffer rasterizer) goes out as one
``GBufferFrame``; the prompt switches at ``--switch-at`` inside the stream, without
reconnecting. The returned frames are written to a GIF, and the per-frame times the server
reports are summarised. A real engine does the same with the buffers named in docs/serve.md.
"""

from __future__ import annotations

import argparse
import queue
import time
from collections import deque

import grpc
import numpy as np

from alaya.engine.stream import EngineStream, StreamConfig
from alaya.renderers.video import write_frames
from alaya.serve.grpc_client import RenderClient, frame_to_message, message_to_rgb


def engine_message(stream: EngineStream, i: int, args: argparse.Namespace):
    """Frame ``i`` of the engine as a GBufferFrame, with the prompt switch where it is due."""
    prompt = args.prompt if i == 0 else args.switch_prompt if i == args.switch_at else None
    return frame_to_message(stream.step(), prompt=prompt, frame_id=i, seed=args.seed,
                            encoding="jpeg" if args.jpeg else "raw")


def stream_engine(client: RenderClient, args: argparse.Namespace, size: int):
    """Stream ``args.frames`` engine frames; (RGB frames, round-trip ms, server render ms)."""
    # The engine (its GL context) lives on this thread; gRPC sends from its own thread, so
    # frames go through a queue. Up to --in-flight frames are rendered while the next is made.
    stream = EngineStream(args.seed, StreamConfig(size=size))
    requests: queue.Queue = queue.Queue()
    replies = client.render(iter(requests.get, None))       # None ends the stream
    sent: deque[float] = deque()
    frames, latency, render_ms = [], [], []

    def receive() -> None:
        reply = next(replies)
        latency.append((time.perf_counter() - sent.popleft()) * 1000.0)
        render_ms.append(reply.render_ms)
        frames.append(message_to_rgb(reply))

    try:
        for i in range(args.frames):
            requests.put(engine_message(stream, i, args))
            sent.append(time.perf_counter())
            if len(sent) >= args.in_flight:
                receive()
        requests.put(None)
        while sent:
            receive()
    finally:
        requests.put(None)
        stream.close()
    return frames, latency, render_ms


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default="127.0.0.1:50051", help="host:port of alaya serve --grpc")
    p.add_argument("--frames", type=int, default=60)
    p.add_argument("--prompt", default="a clear sunny noon")
    p.add_argument("--switch-prompt", default="a moonlit night")
    p.add_argument("--switch-at", type=int, default=30, help="frame index where the prompt switches")
    p.add_argument("--seed", type=int, default=0, help="engine scene and noise seed")
    p.add_argument("--jpeg", action="store_true", help="ask for JPEG replies instead of raw RGB")
    p.add_argument("--in-flight", type=int, default=2, help="frames sent before waiting for a reply")
    p.add_argument("--out", default="grpc_demo.gif")
    p.add_argument("--fps", type=float, default=15.0)
    args = p.parse_args()

    with RenderClient(args.target) as client:
        try:
            info = client.info()
            print(f"server: {info.model} ({info.backend}), {info.width}x{info.height}, "
                  f"{info.active_sessions}/{info.max_sessions} sessions busy")
            frames, latency, render_ms = stream_engine(client, args, info.width)
        except grpc.RpcError as err:
            raise SystemExit(f"server said {err.code().name}: {err.details()}") from None
    print(f"{len(frames)} frames; server render {np.median(render_ms):.1f} ms, "
          f"round trip {np.median(latency):.1f} ms (medians)")
    for path in write_frames(args.out, np.stack(frames), fps=args.fps):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
