"""``WorldSessionFactory``: many ``WorldSession``s over one set of loaded weights and one
(stateless) backend, and ``from_pretrained``: a world model's folder with all it ships beside
its network (``alaya.runtime.world_folder``: the learned camera, the one-shot actions' effect
layers, the walls' close-up detail, the start frames' region)."""

from __future__ import annotations

from pathlib import Path

from alaya.codecs.autoencoder import Autoencoder
from alaya.codecs.tiny import TinyDecoder
from alaya.data.walkable_region import WalkableRegion
from alaya.models.action_effects import ActionEffects
from alaya.models.camera_motion import CameraMotion
from alaya.models.wall_detail import WallDetail
from alaya.models.world import WorldModel
from alaya.paths import default_weights
from alaya.runtime.backends import BACKENDS, make_backend
from alaya.runtime.step_traffic import StepTraffic
from alaya.runtime.world_folder import (load_action_effects, load_camera_motion, load_region, load_wall_detail,
                                        shipped_size)
from alaya.runtime.world_session import WorldSession, codecs_for
from alaya.text import PromptEncoder


class WorldSessionFactory:
    """Many world sessions over one set of loaded weights and one (stateless) backend."""

    def __init__(self, model: WorldModel, autoencoder: Autoencoder | None = None, decoder: TinyDecoder | None = None,
                 size: int = 64, backend: str = "onnx", prompt_encoder: PromptEncoder | None = None,
                 threads: int | None = None, camera_motion: CameraMotion | None = None,
                 region: WalkableRegion | None = None, solo_threads: int | None = None,
                 action_effects: ActionEffects | None = None, wall_detail: WallDetail | None = None):
        """``threads``: each onnxruntime graph's threads (default torch's). ``solo_threads``: a
        second set of the same graphs with that many threads, for a step while no other
        session's runs (``StepTraffic``: one player alone gets every core's help on the network,
        sessions side by side one thread each)."""
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        autoencoder, decoder = codecs_for(model, autoencoder, decoder)
        self.model, self.autoencoder, self.decoder = model.eval(), autoencoder.eval(), decoder.eval()
        self.size, self.camera_motion, self.region = size, camera_motion, region
        self.action_effects, self.wall_detail = action_effects, wall_detail
        self.prompt_encoder = prompt_encoder or PromptEncoder()
        self.backend = make_backend(backend, model.core, None, decoder, size, threads=threads,
                                    factor=model.config.factor, steps=model.config.steps)
        self.solo_backend = (make_backend(backend, model.core, None, decoder, size, threads=solo_threads,
                                          factor=model.config.factor, steps=model.config.steps)
                             if backend != "torch" and solo_threads and solo_threads != threads else None)
        self.traffic = StepTraffic()

    @classmethod
    def from_pretrained(cls, weights=default_weights("world_model"), autoencoder=default_weights("autoencoder"),
                        decoder=default_weights("tiny_decoder"), **kwargs) -> "WorldSessionFactory":
        """The model of ``weights``; ``size`` defaults to its play size (its start frames', else 64)."""
        model = WorldModel.from_pretrained(weights)
        kwargs.setdefault("camera_motion", load_camera_motion(weights))
        kwargs.setdefault("region", load_region(weights))
        kwargs.setdefault("action_effects", load_action_effects(weights))
        kwargs.setdefault("wall_detail", load_wall_detail(weights))
        if "size" not in kwargs and any((Path(weights) / "starts").glob("*.png")):
            kwargs["size"] = shipped_size(weights)
        if model.config.codec == "patch4":
            return cls(model, **kwargs)
        return cls(model, Autoencoder.from_pretrained(autoencoder), TinyDecoder.from_pretrained(decoder), **kwargs)

    def new(self, prompt: str = "", seed: int = 0) -> WorldSession:
        return WorldSession(self.model, self.autoencoder, self.decoder, prompt=prompt,
                            prompt_encoder=self.prompt_encoder, seed=seed, size=self.size, backend=self.backend,
                            camera_motion=self.camera_motion, region=self.region,
                            solo_backend=self.solo_backend, traffic=self.traffic,
                            action_effects=self.action_effects, wall_detail=self.wall_detail)
