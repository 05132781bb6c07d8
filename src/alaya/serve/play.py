"""``alaya play``: the playable world in a browser — engine physics, drawn live by the student.

Loads the shipped student and tiny codecs once (``SessionFactory``), then serves the page and
one WebSocket per player (``alaya.serve.web``) with uvicorn on 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass


@dataclass
class PlayConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    weights: str = "weights/student"
    gbuffer_encoder: str = "weights/tiny_gbuffer_encoder"
    decoder: str = "weights/tiny_decoder"
    backend: str = "onnx"
    size: int = 128
    fps: float = 30.0
    max_sessions: int = 8
    token: str | None = None
    allowed_origins: tuple[str, ...] = ()
    seed: int = 0
    prompt: str = "a clear sunny noon"
    threads: int | None = None


def build_app(cfg: PlayConfig):
    from alaya.engine.interactive import InteractiveConfig, InteractiveStream
    from alaya.runtime import SessionFactory
    from alaya.serve.web import WebConfig, create_app

    factory = SessionFactory.from_pretrained(cfg.weights, cfg.gbuffer_encoder, cfg.decoder, size=cfg.size,
                                             backend=cfg.backend, threads=cfg.threads)
    factory.encoder.encode(cfg.prompt)                       # load the text model before the first player

    def make_stream():
        return InteractiveStream(seed=cfg.seed, config=InteractiveConfig(size=cfg.size, fps=cfg.fps))

    web = WebConfig(max_sessions=cfg.max_sessions, token=cfg.token, allowed_origins=cfg.allowed_origins,
                    fps=cfg.fps, prompt=cfg.prompt, seed=cfg.seed, extra_info={"weights": cfg.weights})
    return create_app(factory, make_stream, web)


def serve(cfg: PlayConfig) -> None:
    import torch
    import uvicorn
    # Many sessions call torch from their own threads; each would start its own OpenMP team
    # and they would spin against each other on a few cores (measured: a 32x32 frame took
    # seconds with 8 sessions). The torch work per frame is small; the networks run in
    # onnxruntime's own pool.
    torch.set_num_threads(1)
    if cfg.host not in ("127.0.0.1", "localhost", "::1") and cfg.token is None:
        print(f"warning: serving on {cfg.host} without --token: anyone who can reach it can play")
    app = build_app(cfg)
    query = f"?token={cfg.token}" if cfg.token else ""
    print(f"alaya play: open http://{cfg.host}:{cfg.port}/{query}  (Ctrl+C stops)", flush=True)
    uvicorn.run(app, host=cfg.host, port=cfg.port, log_level="warning", ws_max_size=1 << 16)


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = PlayConfig()
    p.add_argument("--host", default=d.host, help="address to bind (default: this machine only)")
    p.add_argument("--port", type=int, default=d.port)
    p.add_argument("--weights", default=d.weights, help="the student (save_pretrained folder)")
    p.add_argument("--backend", default=d.backend, choices=["onnx", "torch"])
    p.add_argument("--size", type=int, default=d.size, help="frame size (square, a multiple of 16)")
    p.add_argument("--fps", type=float, default=d.fps, help="target frame rate of the engine")
    p.add_argument("--max-sessions", type=int, default=d.max_sessions)
    p.add_argument("--token", default=os.environ.get("ALAYA_TOKEN"), help="require ?token=... (or $ALAYA_TOKEN)")
    p.add_argument("--allow-origin", action="append", default=[], help="extra allowed Origin (repeatable)")
    p.add_argument("--seed", type=int, default=d.seed, help="the world's scene seed")
    p.add_argument("--prompt", default=d.prompt, help="the look at the start")


def config_from_args(a: argparse.Namespace) -> PlayConfig:
    return PlayConfig(host=a.host, port=a.port, weights=a.weights, backend=a.backend, size=a.size, fps=a.fps,
                      max_sessions=a.max_sessions, token=a.token, allowed_origins=tuple(a.allow_origin),
                      seed=a.seed, prompt=a.prompt)
