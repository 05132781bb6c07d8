"""Training the G-buffer-guided decoder against the reference frames (``alaya train guided-decoder``).

The decoder sees what it will see in play: the shipped student's own output latents, streamed
clip by clip through a ``RenderSession`` with the backend ``alaya play`` uses, each (clip, style)
prompted with one of the style's phrasings. Those latents are computed once per split and cached
in the run folder (``latents_<split>.safetensors``), so a resumed run does not redo them. The
target is the reference renderer's frame: the paired ground truth, not the teacher, so the
decoder can correct what the student and its teacher get wrong wherever the G-buffer and the
latents determine it.

Loss: L1 to the reference plus ``gradient_weight`` x L1 between image gradients
(``gradient_l1``), which penalises missing edges and texture directly (a mean-seeking L1 alone
blurs where the input leaves doubt). Each sample decodes two consecutive frames as a stream
(reset, then with memory), so the temporal memory is trained. A share of samples
(``camera_dropout``) sees the camera channels zeroed: a frame from an engine that sends no
camera.

``detail_weight`` adds ``detail_energy_l1``: the L1 between the local energy of the output's and
the reference's luma Laplacian (its RMS over each 8x8 patch), or with
``detail_loss="relative_power"`` ``detail_power_l1``, the L1 between the patches' squared energies
over the frame's total (patches weighed as the sharpness ratio weighs them, and a dim or foggy
frame's missing detail counting as much as a bright one's). Pixel and gradient L1 are
minimised by the mean wherever the inputs leave the exact placement of detail in doubt (stars,
snow grain, shadow edges), and the mean is smooth; this term asks for as much detail in each
patch as the reference has there, wherever it lies, so it does not reward the mean.

``style_weights`` draws a batch's styles with weights (a style's share over the others'), and
``style_detail`` scales each frame's relative detail-power term by its style: the class-balanced
loss of the styles the decoder serves worst (docs/flash.md, fifth round).

Two more options go beyond that (docs/flash.md has their ablation rows):

* ``init``: start from a trained decoder's weights (``with_albedo_gain`` adds the albedo-gain
  output at zero, so the run starts exactly where that decoder is);
* ``adversarial_weight``: a small conditional patch critic (``alaya.nn.critic``) scores the
  decoded frames beside their guide against the reference frames, and the decoder also fits its
  hinge loss with this weight, from ``adversarial_start`` on (the critic trains from step 0).
  L1 returns the mean where the latents and the guide leave the picture in doubt (grain, stars,
  the exact place of an outline); the critic asks for detail of the reference's kind there.
  Decoder and critic train in one module (``DecoderWithCritic``), so the shared loop, its EMA,
  checkpoints and exact resume hold for both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn
from tqdm import tqdm

from alaya.codecs.gbuffer import CAMERA_GUIDE_CHANNELS, GUIDE_CHANNELS, VIEW_INPUT_CHANNELS, decoder_guide
from alaya.codecs.guided import GuidedDecoder, GuidedDecoderConfig, extended
from alaya.data.dataset import ClipDataset, read_meta
from alaya.evaluation.metrics import gradient_error, sharpness_ratio
from alaya.io import atomic_save_tensors
from alaya.nn.critic import PatchCritic, PatchCriticConfig, frozen_call, hinge_critic_loss, hinge_generator_loss
from alaya.renderers.student import StudentRenderer
from alaya.train.loop import TrainConfig, Trainer, batch_to


@dataclass
class GuidedDecoderTrainConfig:
    data: str
    student: str = "weights/student"
    backend: str = "onnx-int8"              # the student's backend for its latents (as alaya play)
    out: str = "weights/guided_decoder"
    max_clips: int | None = None            # per split; None: all
    gradient_weight: float = 1.0
    camera_dropout: float = 0.1
    decoder: GuidedDecoderConfig | None = None
    init: str | None = None                 # a trained guided decoder's folder to start from
    albedo_gain: bool = False               # add the albedo-gain output (to a new or the init decoder)
    sky_gain: bool = False                  # add the star-colour output (``GuidedDecoderConfig.sky_gain``)
    full_res_blocks: int | None = None      # residual blocks at full resolution (None: the decoder's own)
    detail_weight: float = 0.0              # weight of the detail term
    detail_loss: str = "energy"             # "energy": detail_energy_l1; "relative_power": detail_power_l1
    style_weights: dict[str, float] | None = None   # a style's share of samples over the others' (default 1)
    style_detail: dict[str, float] | None = None    # a style's detail weight over detail_weight (default 1)
    adversarial_weight: float = 0.0         # 0: no critic
    adversarial_start: int = 250            # the step from which the decoder fits the critic
    critic: PatchCriticConfig | None = None
    train: TrainConfig = field(default_factory=lambda: TrainConfig(run_dir="runs/guided", batch_size=8,
                                                                   lr=2e-3, warmup=200, ema=0.999))


def gradient_l1(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean L1 between the horizontal and vertical finite differences of images (B, C, H, W)."""
    dx = (x[..., :, 1:] - x[..., :, :-1]) - (y[..., :, 1:] - y[..., :, :-1])
    dy = (x[..., 1:, :] - x[..., :-1, :]) - (y[..., 1:, :] - y[..., :-1, :])
    return 0.5 * (dx.abs().mean() + dy.abs().mean())


LAPLACIAN = torch.tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]]).view(1, 1, 3, 3)


def detail_energy(x: torch.Tensor, patch: int = 8) -> torch.Tensor:
    """RMS of the 4-neighbour Laplacian of luma over each ``patch`` x ``patch`` block of images
    (B, 3, H, W) -> (B, 1, H / patch, W / patch): how much fine detail each patch holds."""
    luma = (0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3])
    lap = F.conv2d(F.pad(luma, (1, 1, 1, 1), mode="replicate"), LAPLACIAN.to(x))
    return (F.avg_pool2d(lap ** 2, patch) + 1e-6).sqrt()


def detail_energy_l1(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean L1 between the patches' detail energies of images ``x`` and ``y`` (B, 3, H, W)."""
    return (detail_energy(x) - detail_energy(y)).abs().mean()


DETAIL_FLOOR = 2e-3      # a patch's Laplacian RMS below half a grey level counts as flat


def detail_power_l1(x: torch.Tensor, y: torch.Tensor, floor: float = DETAIL_FLOOR,
                    frame_weights: torch.Tensor | None = None) -> torch.Tensor:
    """Per frame, the L1 between the patches' detail *power* (the mean squared luma Laplacian over
    each 8x8 patch, ``detail_energy`` squared) of images ``x`` and ``y`` (B, 3, H, W), over the
    reference ``y``'s total power; the mean over frames (each times ``frame_weights`` (B,) if
    given). The patches weigh as they weigh in the
    sharpness ratio (a frame's mean squared Laplacian: its sharpest edges dominate), and every frame
    counts the same whatever its contrast (``detail_energy_l1`` scales with contrast, so a dim or
    foggy frame's missing detail hardly pulls on it)."""
    px, py = detail_energy(x) ** 2, detail_energy(y) ** 2
    total = py.flatten(1).sum(1) + floor ** 2 * py[0].numel()
    per_frame = (px - py).abs().flatten(1).sum(1) / total
    return per_frame.mean() if frame_weights is None else (per_frame * frame_weights).mean()


def psnr(x: torch.Tensor, y: torch.Tensor) -> float:
    return float(10 * torch.log10(1 / ((x.clamp(0, 1) - y) ** 2).mean().clamp(min=1e-10)))


def style_scales(styles: list[str], weights: dict[str, float] | None, name: str = "style_detail") -> list[float]:
    """Per-style factors from ``{style: factor}`` (unnamed styles: 1), checked by name."""
    weights = weights or {}
    unknown = sorted(set(weights) - set(styles))
    if unknown:
        raise ValueError(f"{name}: unknown style(s) {unknown}; the data has {styles}")
    w = [float(weights.get(s, 1.0)) for s in styles]
    if not all(np.isfinite(x) and x >= 0 for x in w) or sum(w) <= 0:
        raise ValueError(f"{name}: expected finite weights >= 0 with a positive sum, got {weights}")
    return w


def style_probabilities(styles: list[str], weights: dict[str, float] | None) -> np.ndarray | None:
    """Sampling probabilities over ``styles`` from per-style weights (unnamed styles weigh 1);
    None without weights (uniform, drawn as before)."""
    if not weights:
        return None
    w = np.array(style_scales(styles, weights, "style_weights"))
    return w / w.sum()


class GuidedClips:
    """A split in memory: reference frames (N, S, T, 3, H, W) uint8, guides (N, T, G, H, W)
    float16 and the student's latents (N, S, T, C, h, w) float16."""

    def __init__(self, cfg: GuidedDecoderTrainConfig, split: str, run_dir: Path, progress: bool = True):
        ds = ClipDataset(cfg.data)
        self.ids = ds.ids(split)[:cfg.max_clips]
        if not self.ids:
            raise ValueError(f"{cfg.data}: split '{split}' has no clips")
        meta = read_meta(cfg.data)
        rgb, guides = [], []
        for cid in tqdm(self.ids, desc=f"load {split}", disable=not progress):
            clip = ds.load(cid)
            if not rgb:
                self.styles = [str(s) for s in clip["styles"]]
            rgb.append(torch.from_numpy(clip["rgb"]).permute(0, 1, 4, 2, 3))
            guides.append(decoder_guide(clip).half())
        self.rgb, self.guides = torch.stack(rgb), torch.stack(guides)
        self.phrasings = {s: meta.styles[s]["phrasings"] for s in self.styles}
        self.latents = self._latents(cfg, split, ds, run_dir, progress)
        self.style_p = style_probabilities(self.styles, cfg.style_weights) if split == "train" else None
        self.detail_scale = torch.tensor(style_scales(self.styles, cfg.style_detail), dtype=torch.float32)

    def _latents(self, cfg, split: str, ds: ClipDataset, run_dir: Path, progress: bool) -> torch.Tensor:
        path = run_dir / f"latents_{split}.safetensors"
        if path.exists():
            cached = load_file(path)["latents"]
            if cached.shape[:3] == self.rgb.shape[:3]:
                return cached
        renderer = StudentRenderer.from_pretrained(cfg.student, backend=cfg.backend)
        out = []
        rng = np.random.default_rng([cfg.train.seed, 7])
        bar = tqdm(total=len(self.ids) * len(self.styles), desc=f"student latents {split}", disable=not progress)
        for i, cid in enumerate(self.ids):
            clip = ds.load(cid)
            per_style = []
            for style in self.styles:
                prompt = self.phrasings[style][rng.integers(len(self.phrasings[style]))]
                per_style.append(renderer.latents(clip, prompt, seed=i).half())
                bar.update()
            out.append(torch.stack(per_style))
        bar.close()
        latents = torch.stack(out)
        atomic_save_tensors(path, {"latents": latents.contiguous()})
        return latents

    def batch(self, size: int, seed: int, step: int, camera_dropout: float = 0.0):
        """Two consecutive frames per sample: latents (B, 2, C, h, w), guides (B, 2, G, H, W),
        targets (B, 2, 3, H, W) in [0, 1], style indices (B,); a pure function of (seed, step)."""
        N, S, T = self.rgb.shape[:3]
        rng = np.random.default_rng([seed, step])
        c = rng.integers(N, size=size)
        s = rng.integers(S, size=size) if self.style_p is None else rng.choice(S, size=size, p=self.style_p)
        f = rng.integers(1, T, size=size)
        frames = np.stack([f - 1, f], 1)
        ci, si = c[:, None], s[:, None]
        guide = self.guides[ci, frames].float()
        drop = torch.from_numpy(rng.random(size) < camera_dropout)
        guide[drop, :, :VIEW_INPUT_CHANNELS] = 0               # the camera unknown: no view channels,
        guide[drop, :, CAMERA_GUIDE_CHANNELS] = 0              # no world position, no stars
        return (self.latents[ci, si, frames].float(), guide, self.rgb[ci, si, frames].float() / 255,
                torch.from_numpy(s))


class DecoderWithCritic(nn.Module):
    """The decoder and its patch critic as one trained module. ``forward`` decodes the frame pairs
    and scores them: (decoded (B, 2, 3, H, W), critic loss, generator loss); the generator loss
    reaches the decoder only and the critic loss the critic only."""

    def __init__(self, decoder: GuidedDecoder, critic: PatchCritic):
        super().__init__()
        self.decoder, self.critic = decoder, critic

    def forward(self, latents: torch.Tensor, guides: torch.Tensor, targets: torch.Tensor):
        out = decode_pairs(self.decoder, latents, guides)
        fake, real, cond = out.flatten(0, 1), targets.flatten(0, 1), guides.flatten(0, 1)
        critic_loss = hinge_critic_loss(self.critic(real, cond), self.critic(fake.detach(), cond))
        generator_loss = hinge_generator_loss(frozen_call(self.critic, fake, cond))
        return out, critic_loss, generator_loss


def decoder_of(model: nn.Module) -> GuidedDecoder:
    """The decoder inside what the loop trains (a decoder, or a ``DecoderWithCritic``, maybe under DDP)."""
    model = getattr(model, "module", model)
    return model.decoder if isinstance(model, DecoderWithCritic) else model


def decode_pairs(decoder: GuidedDecoder, latents: torch.Tensor, guides: torch.Tensor) -> torch.Tensor:
    """Decode (B, 2, ...) frame pairs as streams from a reset: (B, 2, 3, H, W)."""
    first, state = decoder(latents[:, 0], None, guides[:, 0])
    second, _ = decoder(latents[:, 1], state, guides[:, 1])
    return torch.stack([first, second], 1)


@torch.no_grad()
def evaluate_guided(decoder: GuidedDecoder, clips: GuidedClips, batches: int = 8, size: int = 16) -> dict[str, float]:
    decoder = decoder_of(decoder)
    values, sharp, grad_err = [], [], []
    for i in range(batches):
        z, g, y, _ = batch_to(decoder, *clips.batch(size, 12345, i))
        out = decode_pairs(decoder, z, g)
        values.append(psnr(out, y))
        out, y = out.flatten(0, 1).clamp(0, 1).cpu(), y.flatten(0, 1).cpu()
        sharp.append(sharpness_ratio(out, y))
        grad_err.append(gradient_error(out, y))
    return {"psnr": float(np.mean(values)), "sharpness": float(np.mean(sharp)), "gradient_error": float(np.mean(grad_err))}


DETAIL_LOSSES = {"energy": detail_energy_l1, "relative_power": detail_power_l1}


def train_guided_decoder(cfg: GuidedDecoderTrainConfig) -> GuidedDecoder:
    tc = cfg.train
    if cfg.detail_loss not in DETAIL_LOSSES:
        raise ValueError(f"detail_loss: expected one of {sorted(DETAIL_LOSSES)}, got {cfg.detail_loss!r}")
    if cfg.style_detail and cfg.detail_loss != "relative_power":
        raise ValueError(f"style_detail: needs detail_loss 'relative_power', got {cfg.detail_loss!r}")
    run_dir = Path(tc.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    train = GuidedClips(cfg, "train", run_dir, tc.progress)
    val = GuidedClips(cfg, "val", run_dir, tc.progress)
    torch.manual_seed(tc.seed)
    if cfg.init:
        decoder = GuidedDecoder.from_pretrained(cfg.init).float().train()
    else:
        decoder = GuidedDecoder(cfg.decoder or GuidedDecoderConfig(latent_channels=train.latents.shape[3]))
    # An init decoder trained on fewer guide channels reads them all from here on (new inputs at
    # zero weight, so the run starts exactly where that decoder is).
    decoder = extended(decoder, albedo_gain=cfg.albedo_gain or None, sky_gain=cfg.sky_gain or None,
                       guide_channels=GUIDE_CHANNELS, full_res_blocks=cfg.full_res_blocks)
    model: nn.Module = decoder
    if cfg.adversarial_weight > 0:
        critic_cfg = cfg.critic or PatchCriticConfig(condition_channels=decoder.config.guide_channels)
        model = DecoderWithCritic(decoder, PatchCritic(critic_cfg))

    def loss_fn(m: nn.Module, index: int):
        z, g, y, styles = batch_to(m, *train.batch(tc.batch_size, tc.seed, index, cfg.camera_dropout))
        metrics = {}
        if cfg.adversarial_weight > 0:
            out, critic_loss, generator_loss = m(z, g, y)
            weight = cfg.adversarial_weight if trainer.step >= cfg.adversarial_start else 0.0
            extra = critic_loss + weight * generator_loss
            metrics = {"critic": float(critic_loss.detach()), "generator": float(generator_loss.detach())}
        else:
            out, extra = decode_pairs(m, z, g), 0.0
        out, y = out.flatten(0, 1), y.flatten(0, 1)
        l1 = (out - y).abs().mean()
        grad = gradient_l1(out, y)
        loss = l1 + cfg.gradient_weight * grad + extra
        if cfg.detail_weight > 0:
            if cfg.style_detail:        # each frame's style scales its term (frames come in pairs)
                w = train.detail_scale.to(out.device)[styles].repeat_interleave(2)
                detail = detail_power_l1(out, y, frame_weights=w)
            else:
                detail = DETAIL_LOSSES[cfg.detail_loss](out, y)
            loss = loss + cfg.detail_weight * detail
            metrics["detail_l1"] = float(detail.detach())
        return loss, {"l1": float(l1.detach()), "grad_l1": float(grad.detach()), **metrics}

    describe = {"guided": {k: str(v) for k, v in cfg.__dict__.items() if k != "train"}}
    trainer = Trainer(model, tc, loss_fn, lambda m: evaluate_guided(m, val), describe=describe, on_any_device=True)
    decoder = decoder_of(trainer.run()).eval()
    if trainer.dist.is_main and cfg.out:
        trained = {"steps": tc.steps, "batch_size": tc.batch_size, "data": cfg.data, "student": cfg.student,
                   "student_backend": cfg.backend, "train_clips": len(train.ids), "run_dir": tc.run_dir,
                   "gradient_weight": cfg.gradient_weight, "detail_weight": cfg.detail_weight,
                   "detail_loss": cfg.detail_loss, "init": cfg.init, "style_weights": cfg.style_weights, "style_detail": cfg.style_detail,
                   "albedo_gain": cfg.albedo_gain, "sky_gain": cfg.sky_gain,
                   "full_res_blocks": decoder.config.full_res_blocks,
                   "adversarial_weight": cfg.adversarial_weight, "adversarial_start": cfg.adversarial_start}
        decoder.save_pretrained(cfg.out, metrics={"val": evaluate_guided(decoder, val)}, trained=trained,
                                dtype=torch.float16)
    return decoder
