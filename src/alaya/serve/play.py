"""``alaya play``: the playable world in a browser — engine physics, drawn live by the student.

Loads the shipped student and tiny codecs once (``SessionFactory``), then serves the page and
one WebSocket per player (``alaya.serve.web``) with uvicorn on 127.0.0.1 unless told otherwise.
``alaya play --world``: no engine; the world model predicts every frame from the player's
actions (``WorldSessionFactory``, ``alaya.serve.world_web``).
"""

from __future__ import annotations

import argparse
import gc
import os
from concurrent.futures import Future
from dataclasses import dataclass

from alaya.paths import default_weights


@dataclass
class PlayConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    weights: str = default_weights("student")
    gbuffer_encoder: str = default_weights("tiny_gbuffer_encoder")
    decoder: str = default_weights("guided_decoder")       # the Flash student's
    world_decoder: str = default_weights("tiny_decoder")
    backend: str | None = None                              # None: onnx-int8, or onnx with world
    size: int | None = None                                 # None: 128, or with world the size of its start frames
    fps: float = 30.0
    max_sessions: int = 8
    token: str | None = None
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()                    # Host names besides loopback and host
    seed: int = 0
    prompt: str | None = None                               # None: the mode's default below
    threads: int | None = None
    world: bool = False                                     # the world model instead of the engine
    world_weights: str = default_weights("world_model")

    def __post_init__(self):
        if self.size is None:
            if self.world:
                from alaya.runtime.world_folder import shipped_size
                self.size = shipped_size(self.world_weights)
            else:
                self.size = 128
        if self.backend is None:
            self.backend = "onnx" if self.world else "onnx-int8"
        if self.world and self.backend == "onnx-int8":
            raise ValueError("--backend onnx-int8 quantizes the Flash student's steps; the world model runs in onnx or torch")
        if self.prompt is None:
            self.prompt = "a golden sunset" if self.world else "a clear sunny noon"


def server_prompt_encoder():
    """A ``PromptEncoder`` whose text model runs in a process of its own (``ModelProcess``): its
    seconds of loading would otherwise hold the interpreter lock every session's threads need."""
    from alaya.text import PromptEncoder
    from alaya.text.worker import ModelProcess
    return PromptEncoder(loader=ModelProcess)


def preload_text_model(encoder) -> Future:
    """Load the text model (seconds: docs/serve.md) on the prompt encoder's own thread while the
    server already serves, for the players' own prompts (the styles' phrasings need none; a
    prompt typed before it is loaded waits for it there, and the stream keeps the previous prompt
    meanwhile). Without the model package only known prompts work, said once here."""
    def said(future: Future) -> None:
        if isinstance(future.exception(), ImportError):
            print(f"warning: {future.exception()}; only the styles' phrasings and cached prompts will work", flush=True)
    future = encoder.preload_later()
    future.add_done_callback(said)
    return future


def build_app(cfg: PlayConfig):
    from alaya.serve.web import WebConfig, create_app

    web = WebConfig(max_sessions=cfg.max_sessions, token=cfg.token, allowed_origins=cfg.allowed_origins,
                    allowed_hosts=(cfg.host, *cfg.allowed_hosts),
                    fps=cfg.fps, prompt=cfg.prompt, seed=cfg.seed,
                    extra_info={"weights": cfg.world_weights if cfg.world else cfg.weights})
    if cfg.world:
        return _build_world_app(cfg, web)
    from alaya.engine.interactive import InteractiveConfig, InteractiveStream
    from alaya.runtime import SessionFactory

    factory = SessionFactory.from_pretrained(cfg.weights, cfg.gbuffer_encoder, cfg.decoder, size=cfg.size,
                                             backend=cfg.backend, threads=cfg.threads,
                                             prompt_encoder=server_prompt_encoder())
    factory.prompt_encoder.encode(cfg.prompt)    # a style's phrasing: from the shipped embeddings, no model
    preload_text_model(factory.prompt_encoder)

    def make_stream():
        return InteractiveStream(seed=cfg.seed, config=InteractiveConfig(size=cfg.size, fps=cfg.fps))

    return create_app(factory, make_stream, web)


def _build_world_app(cfg: PlayConfig, web):
    from alaya.data.actions import ActionText
    from alaya.hardware import usable_cores
    from alaya.runtime.world_folder import load_start_depths, load_start_frames, load_start_views
    from alaya.runtime.world_factory import WorldSessionFactory
    from alaya.serve.world_web import create_world_app

    # a player alone steps on graphs with a thread per core; players side by side, one thread each
    factory = WorldSessionFactory.from_pretrained(cfg.world_weights, decoder=cfg.world_decoder, size=cfg.size,
                                                  backend=cfg.backend, threads=cfg.threads,
                                                  solo_threads=usable_cores(),
                                                  prompt_encoder=server_prompt_encoder())
    starts = load_start_frames(cfg.world_weights, cfg.size)
    actions = ActionText(factory.prompt_encoder)
    actions.resolve("cast a fireball")                       # the action phrases: shipped embeddings, no model
    preload_text_model(factory.prompt_encoder)
    return create_world_app(factory, starts, web, actions, load_start_depths(cfg.world_weights, cfg.size),
                            load_start_views(cfg.world_weights))


def serve(cfg: PlayConfig) -> None:
    import torch
    # Many sessions call torch from their own threads; each would start its own OpenMP team
    # and they would spin against each other on a few cores (docs/serve.md). The torch work
    # per frame is small; the networks run in onnxruntime's own pool.
    torch.set_num_threads(1)
    from alaya.engine.raster import share_cores_with_a_model
    share_cores_with_a_model()      # the engines' rasterizers run beside the models
    if cfg.host not in ("127.0.0.1", "localhost", "::1") and cfg.token is None:
        print(f"warning: serving on {cfg.host} without --token: anyone who can reach it can play")
    app = build_app(cfg)
    freeze_loaded()
    query = f"?token={cfg.token}" if cfg.token else ""
    host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
    url = f"http://{host}:{cfg.port}/{query}"
    app_server(app, cfg.host, cfg.port, lambda: print(f"alaya play: open {url}  (Ctrl+C stops)", flush=True)).run()


def freeze_loaded() -> None:
    """Collect once, then take everything alive (the models, torch, onnxruntime, FastAPI) out of
    the cyclic garbage collector's reach (``gc.freeze``). Its full collections walk every tracked
    object while every other thread waits for the interpreter lock: pauses in play that line up
    with the worst frames (docs/serve.md, "Smoothness"). What sessions make later is collected as
    before."""
    gc.collect()
    gc.freeze()


def app_server(app, host: str, port: int, on_ready, **kwargs):
    """A uvicorn server for ``app`` (``.run()`` serves until it stops) that calls ``on_ready()`` once
    the port accepts connections, not before: a URL printed earlier may be refused."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)           # binds the port
            if self.started:
                on_ready()

    return Server(uvicorn.Config(app, host=host, port=port, log_level="warning", ws_max_size=1 << 16, **kwargs))


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = PlayConfig()
    p.add_argument("--world", action="store_true", help="no engine: the world model predicts every frame "
                   "from the player's actions")
    p.add_argument("--world-weights", default=d.world_weights, help="the world model (save_pretrained folder "
                   "with starts/*.png beside it), for --world")
    p.add_argument("--host", default=d.host, help="address to bind (default: this machine only)")
    p.add_argument("--port", type=int, default=d.port)
    p.add_argument("--weights", default=d.weights, help="the student (save_pretrained folder)")
    p.add_argument("--backend", default=None, choices=["onnx-int8", "onnx", "torch"],
                   help="default onnx-int8: the student's steps quantized (ranges beside its weights); "
                   "onnx with --world")
    p.add_argument("--size", type=int, default=None, help="frame size (square, a multiple of 16; default "
                   "128, or with --world the size of the world model's start frames)")
    p.add_argument("--fps", type=float, default=d.fps, help="target frame rate of the engine (or world model)")
    p.add_argument("--max-sessions", type=int, default=d.max_sessions)
    p.add_argument("--token", default=os.environ.get("ALAYA_TOKEN"), help="require ?token=... (or $ALAYA_TOKEN)")
    p.add_argument("--allow-origin", action="append", default=[], help="extra allowed Origin (repeatable)")
    p.add_argument("--allowed-host", action="append", default=[], help="a name the server may be reached by "
                   "(the Host header), besides localhost, 127.0.0.1, [::1] and --host (repeatable)")
    p.add_argument("--seed", type=int, default=d.seed, help="the world's scene seed")
    p.add_argument("--prompt", default=None, help="the look at the start (default: 'a clear sunny noon', "
                   "or 'a golden sunset' with --world)")


def config_from_args(a: argparse.Namespace) -> PlayConfig:
    return PlayConfig(host=a.host, port=a.port, weights=a.weights, backend=a.backend, size=a.size, fps=a.fps,
                      max_sessions=a.max_sessions, token=a.token, allowed_origins=tuple(a.allow_origin),
                      allowed_hosts=tuple(a.allowed_host),
                      seed=a.seed, prompt=a.prompt, world=a.world, world_weights=a.world_weights)
