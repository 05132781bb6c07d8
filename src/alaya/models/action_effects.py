"""What a one-shot action draws over the view, learned from recordings: a layer per action and
frame since its press.

The game answers attack with a blade sweeping across the view, spell with an orb flying off
ahead, summon with a body dropping in front. A world model must draw these from the key press
alone, in the frame of the press, where neither its memory nor its context shows them yet; the
one-step network, trained on frames where a press is ~1 in 100, learned at most a faint glow
(docs/world.md, "One-shot actions that show"). In screen space these effects repeat: the blade
sweeps along the same arc, the orb leaves the centre of the view. ``ActionEffects`` holds, per
action and frame since its press, an opacity and a premultiplied colour at the data's frame size::

    shown = (1 - alpha) * frame + colour

fitted from the recordings' own statistics (``alaya.train.action_effects``: no counterfactual
frames needed, so any recording with the action's column trains it). A ``WorldSession`` with an
``action_effects/`` folder beside its weights composites it over the frame it shows; its memory
and context keep the frame without it, since an effect is not part of the place (a summoned
body, which stays in the game's world, fades from the layer after ``frames`` frames).

    effects = ActionEffects.from_pretrained("weights/world_model/action_effects")
    shown = effects.composite(frame, {"spell": 0})      # uint8 (H, W, 3), the press's own frame
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from alaya.data.actions import ONE_SHOT
from alaya.nn.pretrained import from_pretrained, save_pretrained

ACTION_EFFECTS_DIR = "action_effects"      # a world model's effect layer, inside its folder


@dataclass
class ActionEffectsConfig:
    actions: tuple[str, ...] = ("attack", "spell", "summon")    # one-shot columns with a layer
    frames: int = 8                        # frames from the press (the press's own frame is 0)
    size: int = 128                        # the layer's frame size (H == W); other sizes are resampled

    def __post_init__(self) -> None:
        unknown = [a for a in self.actions if a not in ONE_SHOT]
        if unknown or not self.actions or len(set(self.actions)) != len(self.actions):
            raise ValueError(f"ActionEffectsConfig.actions: expected distinct one-shot actions of "
                             f"{', '.join(ONE_SHOT)}, got {self.actions!r}")
        if self.frames < 1 or self.size < 1:
            raise ValueError(f"ActionEffectsConfig: frames and size must be >= 1, got {self.frames}, {self.size}")


class ActionEffects(nn.Module):
    """``alpha`` (A, T, 1, S, S) in [0, 1] and premultiplied ``colour`` (A, T, 3, S, S) in [-1, 1]."""

    def __init__(self, config: ActionEffectsConfig | None = None) -> None:
        super().__init__()
        self.config = c = config or ActionEffectsConfig()
        shape = (len(c.actions), c.frames)
        self.register_buffer("alpha", torch.zeros(*shape, 1, c.size, c.size))
        self.register_buffer("colour", torch.zeros(*shape, 3, c.size, c.size))
        self._resized: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def set_layers(self, alpha: torch.Tensor, colour: torch.Tensor) -> None:
        """Take fitted layers (shapes as the buffers); alpha is clipped to [0, 1], the colour to
        [-1, 1] (a layer may also darken or shift what it does not cover; ``composite`` clips)."""
        if alpha.shape != self.alpha.shape or colour.shape != self.colour.shape:
            raise ValueError(f"layers: expected alpha {tuple(self.alpha.shape)} and colour "
                             f"{tuple(self.colour.shape)}, got {tuple(alpha.shape)} and {tuple(colour.shape)}")
        if not (torch.isfinite(alpha).all() and torch.isfinite(colour).all()):
            raise ValueError("layers: alpha and colour must be finite")
        self.alpha.copy_(alpha.float().clamp(0, 1))
        self.colour.copy_(colour.float().clamp(-1, 1))
        self._resized.clear()

    def _layers(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        if size == self.config.size:
            return self.alpha, self.colour
        if size not in self._resized:
            A, T, S = len(self.config.actions), self.config.frames, self.config.size
            both = torch.cat([self.alpha, self.colour], 2).reshape(A * T, 4, S, S)
            both = F.interpolate(both, size=(size, size), mode="area" if size < S else "bilinear",
                                 align_corners=None if size < S else False).reshape(A, T, 4, size, size)
            self._resized[size] = both[:, :, :1], both[:, :, 1:]
        return self._resized[size]

    def composite(self, frame: np.ndarray, since: dict[str, int]) -> np.ndarray:
        """``frame`` (uint8 (H, H, 3)) with the layer of each action pressed ``since[action]``
        frames ago (0: this frame) drawn over it, the oldest press first; actions without a
        layer, or pressed ``frames`` or more frames ago, draw nothing."""
        live = [(n, a) for a, n in since.items() if a in self.config.actions and 0 <= n < self.config.frames]
        if not live:
            return frame
        alpha, colour = self._layers(frame.shape[0])
        x = torch.from_numpy(frame).permute(2, 0, 1).float() / 255
        for n, a in sorted(live, reverse=True):
            k = self.config.actions.index(a)
            x = (1 - alpha[k, n]) * x + colour[k, n]
        return (x.clamp(0, 1).permute(1, 2, 0) * 255).round().to(torch.uint8).numpy()

    def save_pretrained(self, folder, **metadata) -> None:
        save_pretrained(self, folder, dtype=torch.float16, **metadata)     # half the bytes; loaded as float32

    @classmethod
    def from_pretrained(cls, folder) -> ActionEffects:
        return from_pretrained(cls, ActionEffectsConfig, folder).eval()
