"""A live engine stream: physics world + camera rig + G-buffer rasterizer (+ reference styles).

``EngineStream.step()`` advances the world by one frame and returns that frame's G-buffer as
clip-contract arrays; ``render_style(name)`` draws the same frame in a reference style.
``render_clip`` turns a seed into one whole clip of the dataset.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import moderngl
import numpy as np

from alaya.engine.camera import RIGS, make_rig
from alaya.engine.raster import GBufferRasterizer, create_context
from alaya.engine.reference import ReferenceRenderer, StyledStream
from alaya.engine.scene import SceneConfig, generate_scene
from alaya.engine.styles import STYLE_NAMES, get_style
from alaya.engine.world import World


@dataclass
class StreamConfig:
    size: int = 128                  # square frames; any positive multiple of 16
    fps: float = 30.0
    fov_y: float = 70.0
    rig: str = "orbit"               # orbit | fly | walk
    warmup_frames: int = 4           # physics frames stepped before the first rendered frame
    pipelined: bool = False          # simulate frame t+1 on a worker thread while t rasterizes
    scene: SceneConfig = field(default_factory=SceneConfig)


class EngineStream(StyledStream):
    def __init__(self, seed: int, config: StreamConfig | None = None,
                 ctx: moderngl.Context | None = None):
        cfg = config or StreamConfig()
        if cfg.rig not in RIGS:
            raise ValueError(f"unknown camera rig {cfg.rig!r}; choose from {RIGS}")
        scene_cfg = replace(cfg.scene, player=cfg.scene.player or cfg.rig == "walk")
        self.config = cfg
        self.seed = seed
        self.scene = generate_scene(seed, scene_cfg)
        self.world = World(self.scene, fps=cfg.fps)
        self.rig = make_rig(cfg.rig, np.random.default_rng([seed, 17]), scene_cfg.arena)
        self.raster = GBufferRasterizer(self.scene, cfg.size, cfg.size, fov_y=cfg.fov_y, ctx=ctx)
        self._reference: ReferenceRenderer | None = None
        self.world_to_camera = np.eye(4)
        for _ in range(cfg.warmup_frames):
            self.rig.control(self.world)
            self.world.step()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="physics") if cfg.pipelined else None
        self._next: Future | None = None

    @property
    def K(self) -> np.ndarray:
        return self.raster.K

    def _simulate(self) -> tuple[np.ndarray, np.ndarray]:
        """One physics frame: (geom matrices, world-to-camera) of the new state."""
        self.rig.control(self.world)
        self.world.step()
        return self.world.geom_matrices(), self.rig.view(self.world)

    def step(self) -> dict[str, np.ndarray]:
        """Advance one frame; the G-buffer arrays of that frame (plus ``world_to_camera`` and ``K``).

        Pipelined streams return the same frames, but their world is already one frame ahead
        when ``step`` returns (its physics overlapped the rasterization)."""
        if self._executor is None:
            geoms, view = self._simulate()
        else:
            geoms, view = (self._next.result() if self._next is not None
                           else self._executor.submit(self._simulate).result())
            self._next = self._executor.submit(self._simulate)
        self.world_to_camera = view
        frame = self.raster.render(geoms, view)
        frame["world_to_camera"] = view.astype(np.float32)
        frame["K"] = self.K.astype(np.float32)
        return frame

    def close(self) -> None:
        if self._executor is not None:
            if self._next is not None:
                self._next.result()
            self._executor.shutdown()
            self._executor = None


def render_clip(seed: int, frames: int, styles: tuple[str, ...] = STYLE_NAMES,
                config: StreamConfig | None = None,
                ctx: moderngl.Context | None = None) -> dict[str, np.ndarray]:
    """Simulate and render one clip: all clip-contract arrays, every style sharing geometry."""
    if frames < 1:
        raise ValueError(f"frames must be >= 1, got {frames}")
    for s in styles:
        get_style(s)
    owned = ctx is None
    ctx = ctx or create_context()
    stream = EngineStream(seed, config, ctx)
    keys = ("depth", "mask", "normal", "albedo", "roughness", "metallic", "material", "instance",
            "motion", "world_to_camera")
    out: dict[str, list] = {k: [] for k in keys}
    rgb: list[list[np.ndarray]] = [[] for _ in styles]
    for _ in range(frames):
        frame = stream.step()
        for k in keys:
            out[k].append(frame[k])
        for i, s in enumerate(styles):
            rgb[i].append(stream.render_style(s))
    clip = {k: np.stack(v) for k, v in out.items()}
    clip["rgb"] = np.stack([np.stack(r) for r in rgb])
    clip["styles"] = np.array(styles, dtype=f"<U{max(len(s) for s in styles)}")
    clip["K"] = stream.K.astype(np.float32)
    stream.close()
    if owned:
        ctx.release()
    return clip
