"""Training recipe for the teacher (``alaya train teacher``): rectified flow on clip windows of
cached latents, conditioned on G-buffer latents and a prompt embedding.

Each sample: a clip, a style, a window of ``frames`` consecutive frames; the target is that
style's RGB latents, the condition the window's G-buffer latents plus the embedding of one of
the style's phrasings from ``dataset.json`` (dropped to the zero vector with probability
``prompt_dropout``, for classifier-free guidance). Times are logit-normal.

Prompt augmentation (``text_noise``): the prompt embedding is a random convex mix of the
style's phrasings plus isotropic noise of random norm up to ``text_noise``, renormalised. Four
phrasings per style are few points in a 384-d space; the noise teaches the prompt MLP to read
the direction of a style rather than memorise four vectors, which is what lets unseen
paraphrases steer the teacher (measured by ``alaya eval render``'s paraphrase accuracy).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch

from alaya.codecs.autoencoder import Autoencoder
from alaya.codecs.gbuffer import PIXEL_VIEW_CHANNELS, VIEW_INPUT_CHANNELS, model_view_input
from alaya.codecs.latent_cache import build_latent_cache, load_latents
from alaya.data.dataset import ClipDataset
from alaya.diffusion.flow import flow_matching_loss, logit_normal_t, with_share_at_one, x_prediction_loss
from alaya.models.teacher import Teacher, TeacherConfig, teacher_config
from alaya.text import PromptEncoder
from alaya.hardware import hardware_line
from alaya.train.loop import TrainConfig, Trainer, resolve_device


@dataclass
class TeacherTrainConfig:
    data: str
    autoencoder: str = "weights/autoencoder"
    out: str = "weights/teacher"
    frames: int = 8
    prompt_dropout: float = 0.1
    text_noise: float = 1.0
    t_mean: float = 0.0                       # logit-normal mean of training times; > 0 favours
                                              # high noise, where the G-buffer -> RGB mapping and
                                              # the style are learned
    t_one: float = 0.0                        # share of samples trained at t = 1 exactly: the pure
                                              # G-buffer -> RGB regression every sample starts from
    pixel_weighting: float = 0.0              # 0..1: share of the loss weighted per latent channel
                                              # by its pixel-space gain (see latent_channel_weights)
    preset: str = "small"
    teacher: TeacherConfig | None = None      # overrides the preset when given
    init: str | None = None                   # start from these weights (a run's checkpoint or a
                                              # save_pretrained folder's model.safetensors)
    init_keep_output: bool = False            # keep the init's output layer (continuing a teacher of
                                              # the same parameterisation); False resets it (phase 1
                                              # predicted velocity, later phases data)
    view: bool = False                        # give the model the view input (world-space normal and
                                              # view ray, ``gbuffer.view_input``) through a view branch
    view_gbuffer: bool = False                # with ``view``: the raw G-buffer follows the view input
                                              # (``PIXEL_VIEW_CHANNELS``), the G-buffer at pixel resolution
    view_pixel: int = 0                       # with ``view``: per-pixel MLP features (``pixel_features``)
    view_dropout: float = 0.1                 # share of samples shown a zero camera (camera unknown)
    store_half: bool = False                  # write the weights as float16 (half the bytes)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(run_dir="runs/teacher", batch_size=8,
                                                                   lr=3e-4))


class LatentClips:
    """Cached latents of one split in memory (on the training device: ``to``), with the prompt
    embeddings of every style; ``batch`` returns tensors on that device."""

    def __init__(self, data: str, folder, split: str, encoder: PromptEncoder, view: int = 0):
        ds = ClipDataset(data)
        ids = ds.ids(split)
        if not ids:
            raise ValueError(f"{data}: split '{split}' has no clips")
        loaded = [load_latents(folder / f"{cid}.safetensors") for cid in ids]
        self.styles = loaded[0][1]
        self.rgb = torch.stack([t["rgb"] for t, _ in loaded])          # (N, S, T, C, h, w)
        self.gbuffer = torch.stack([t["gbuffer"] for t, _ in loaded])  # (N, T, G, h, w)
        # (N, T, V, H, W) float16, ``view`` = V channels (``gbuffer.model_view_input``; 0: none)
        self.view = torch.stack([clip_view_input(ds, cid, view) for cid in ids]) if view else None
        self.phrasings = [encoder.encode(ds.meta.styles[s]["phrasings"]) for s in self.styles]

    def to(self, device: torch.device) -> "LatentClips":
        """Hold the latents on ``device`` (a GPU run draws its batches there: no copy per step)."""
        self.rgb, self.gbuffer = self.rgb.to(device), self.gbuffer.to(device)
        self.view = None if self.view is None else self.view.to(device)
        return self

    def batch(self, size: int, frames: int, seed: int, index: int, dropout: float,
              text_noise: float = 0.0, t_mean: float = 0.0, t_one: float = 0.0, view_dropout: float = 0.0):
        """(x, g, text, t, eps, view) on the data's device; ``view`` is None without view inputs,
        else its camera channels are zero for a ``view_dropout`` share of the samples."""
        n, s, t = self.rgb.shape[:3]
        if frames > t:
            raise ValueError(f"window of {frames} frames but clips have {t}")
        rng = np.random.default_rng([seed, index])
        c, st, f0 = rng.integers(n, size=size), rng.integers(s, size=size), rng.integers(t - frames + 1, size=size)
        device = self.rgb.device
        win = torch.from_numpy(f0[:, None] + np.arange(frames)).to(device)
        ci, si = torch.from_numpy(c)[:, None].to(device), torch.from_numpy(st)[:, None].to(device)
        x = self.rgb[ci, si, win].float()
        g = self.gbuffer[ci, win].float()
        if text_noise > 0:
            text = torch.stack([augment_prompt(self.phrasings[k], rng, text_noise) for k in st])
        else:
            text = torch.stack([self.phrasings[k][rng.integers(len(self.phrasings[k]))] for k in st])
        text[torch.from_numpy(rng.random(size) < dropout)] = 0.0
        noise_seed = int(rng.integers(2**62))
        gen = torch.Generator().manual_seed(noise_seed)
        times = training_times(size, gen, rng, t_mean, t_one)
        if device.type == "cpu":
            eps = torch.randn(x.shape, generator=gen)
        else:                                   # drawn where the batch lives
            eps = torch.randn(x.shape, generator=torch.Generator(device).manual_seed(noise_seed), device=device)
        view = None
        if self.view is not None:
            view = self.view[ci, win].float()
            view[torch.from_numpy(rng.random(size) < view_dropout).to(device), :, :VIEW_INPUT_CHANNELS] = 0.0
        return x, g, text.to(device), times.to(device), eps, view


def clip_view_input(ds: ClipDataset, clip_id: str, channels: int = VIEW_INPUT_CHANNELS) -> torch.Tensor:
    """float16 (T, channels, H, W) ``gbuffer.model_view_input`` of one clip (its camera and,
    for ``PIXEL_VIEW_CHANNELS``, its G-buffer)."""
    keys = ("normal", "K", "world_to_camera") + (("depth", "albedo", "roughness", "metallic")
                                                 if channels == PIXEL_VIEW_CHANNELS else ())
    d = ds.load(clip_id, keys)
    try:
        return model_view_input(d, channels).half()
    except ValueError as e:
        raise ValueError(f"{ds.path(clip_id)}: {e}") from None


def grow_view_input(state: dict[str, torch.Tensor], own: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` with its view branch's input layer widened to the model's (``own``) by zero
    columns: an init whose view input is a prefix of the model's (the camera only, then the raw
    G-buffer and per-pixel features) computes what it computed before, the new inputs unread."""
    key = "view.1.weight"
    if key in state and key in own and state[key].shape != own[key].shape:
        old, new = state[key], own[key]
        if old.shape[0] != new.shape[0] or old.shape[1] > new.shape[1] or old.shape[2:] != new.shape[2:]:
            raise ValueError(f"{key}: the init's {tuple(old.shape)} cannot grow into {tuple(new.shape)}")
        grown = torch.zeros(new.shape, dtype=old.dtype)
        grown[:, :old.shape[1]] = old
        state = {**state, key: grown}
    return state


def training_times(n: int, gen: torch.Generator, rng: np.random.Generator, t_mean: float = 0.0,
                   t_one: float = 0.0) -> torch.Tensor:
    """(n,) flow times: logit-normal with mean ``t_mean``, a share ``t_one`` of them exactly 1.
    At t = 1 the input is pure noise, so the data estimate there is the plain G-buffer + prompt
    -> RGB regression that every sample starts from; logit-normal times reach it rarely."""
    return with_share_at_one(logit_normal_t(n, gen, mean=t_mean), t_one, rng)


def augment_prompt(phrasings: torch.Tensor, rng: np.random.Generator, noise: float) -> torch.Tensor:
    """A unit vector near the span of one style's phrasing embeddings (P, D): a Dirichlet mix
    of them plus Gaussian noise of norm up to ``noise``, renormalised."""
    w = torch.from_numpy(rng.dirichlet(np.ones(len(phrasings)))).float()
    e = w @ phrasings
    e = e / e.norm()
    n = torch.from_numpy(rng.standard_normal(e.shape[0])).float()
    e = e + float(rng.uniform(0, noise)) * n / n.norm()
    return e / e.norm()


def latent_channel_weights(ae: Autoencoder, mix: float) -> torch.Tensor:
    """(C,) loss weights, mean 1: ``(1 - mix) + mix * g_c^2 / mean(g^2)`` with ``g_c`` the norm of
    the linear decoder's column for channel c. The codec's latents are whitened (every channel
    has about unit variance) while their pixel-space gains differ widely (docs/teacher.md): an
    unweighted latent loss spends most of its effort on channels that barely change the image."""
    gain = ae.decode_linear[0].weight.detach()[:, :, 0, 0].norm(dim=0) ** 2
    return (1 - mix) + mix * gain / gain.mean()


def train_teacher(cfg: TeacherTrainConfig) -> Teacher:
    ae = Autoencoder.from_pretrained(cfg.autoencoder).eval()
    device = resolve_device(cfg.train.device)
    folder = build_latent_cache(cfg.data, ae, progress=cfg.train.progress, device=device)
    encoder = PromptEncoder()
    view_channels = 0 if not cfg.view else PIXEL_VIEW_CHANNELS if cfg.view_gbuffer else VIEW_INPUT_CHANNELS
    view_pixel = cfg.view_pixel if cfg.view else 0
    train, val = (LatentClips(cfg.data, folder, s, encoder, view_channels).to(device) for s in ("train", "val"))
    C = ae.latent_channels
    tc = cfg.train
    torch.manual_seed(tc.seed)
    view = dict(view_channels=view_channels, view_pixel=view_pixel)   # ``view*`` decide, whatever the config says
    model = Teacher(dataclasses.replace(cfg.teacher, **view) if cfg.teacher else
                    teacher_config(cfg.preset, latent_channels=C, gbuffer_channels=5 * C,
                                   prompt_dropout=cfg.prompt_dropout, **view))

    sigma_data = model.config.sigma_data
    weight = (latent_channel_weights(ae, cfg.pixel_weighting).view(1, 1, -1, 1, 1).to(device)
              if cfg.pixel_weighting else None)

    def objective(m, x, g, text, t, eps, view):     # batches come on the training device (LatentClips.to)
        if sigma_data > 0:
            return x_prediction_loss(lambda z, tt: m(z, tt, g, text, output="x", view=view), x, t, eps, sigma_data,
                                     weight=weight)
        return flow_matching_loss(lambda z, tt: m(z, tt, g, text, view=view), x, t, eps)

    def loss_fn(m, index: int):
        batch = train.batch(tc.batch_size, cfg.frames, tc.seed, index, cfg.prompt_dropout,
                            cfg.text_noise, cfg.t_mean, cfg.t_one, cfg.view_dropout)
        return objective(m, *batch), {}

    def validate(m) -> dict[str, float]:
        losses, flow = [], []
        for i in range(4):
            x, g, text, t, eps, view = val.batch(tc.batch_size, cfg.frames, 1234, i, 0.0)
            losses.append(float(objective(m, x, g, text, t, eps, view)))
            flow.append(float(flow_matching_loss(lambda z, tt: m(z, tt, g, text, view=view), x, t, eps)))
        return {"loss": float(np.mean(losses)), "flow_loss": float(np.mean(flow))}

    if cfg.init:
        from safetensors.torch import load_file
        reset = () if cfg.init_keep_output else ("out.",)     # prefixes left at their initialisation
        state = {k: v for k, v in load_file(cfg.init).items() if not k.startswith(reset)}
        state = grow_view_input(state, model.state_dict())
        missing, unexpected = model.load_state_dict(state, strict=False)
        new = reset + ("view.", "view_pixel.")                 # a view branch the init lacks starts at zero
        if unexpected or any(not k.startswith(new) for k in missing):
            raise ValueError(f"{cfg.init}: does not fit the teacher (missing {missing[:4]}, unexpected {unexpected[:4]})")
    trainer = Trainer(model, tc, loss_fn, validate, on_any_device=True,
                      describe={"teacher": {k: str(v) for k, v in cfg.__dict__.items() if k != "train"}})
    model = trainer.run().eval()
    if trainer.dist.is_main:
        model.save_pretrained(cfg.out, dtype=torch.float16 if cfg.store_half else None, trained={"steps": tc.steps, "batch_size": tc.batch_size,
                                                "frames": cfg.frames, "data": cfg.data,
                                                "text_noise": cfg.text_noise, "preset": cfg.preset,
                                                "t_mean": cfg.t_mean, "t_one": cfg.t_one, "pixel_weighting": cfg.pixel_weighting,
                                                "view_dropout": cfg.view_dropout if cfg.view else None,
                                                "view_gbuffer": cfg.view_gbuffer if cfg.view else None,
                                                "run_dir": tc.run_dir, "autoencoder": cfg.autoencoder,
                                                "hardware": hardware_line(trainer.device, tc.bf16,
                                                                          trainer.dist.world_size)},
                              metrics={"val": trainer.last_val})
    return model
