"""What a one-shot action draws over the view, learned from recordings: a layer per action and
frame since its press.

The game answers attack with a blade sweeping across the view, spell with an orb flying off
ahead, summon with a body dropping in front. A world model must draw these from the key press
alone, in the frame of the press, where neither its memory nor its context shows them yet; the
one-step network, trained on frames where a press is ~1 in 100, learned at most a faint glow
(docs/world_journal.md, "One-shot actions that show"). In screen space these effects repeat: the blade
sweeps along the same arc, the orb leaves the centre of the view. ``ActionEffects`` holds, per
action and frame since its press, an opacity and a premultiplied colour at the data's frame size::

    shown = (1 - alpha) * frame + colour

An effect that follows the view (the orb flies along it) is fixed on the screen; one placed by the
player's heading alone (the blade sweeps level, whatever the pitch) moves up and down the screen
with the pitch. Its layer (``pitch_anchored``) is held for a level view and shifted by
``focal * tan(pitch)`` rows to the camera's pitch (``focal``: pixels at the layer's size).

fitted from the recordings' own statistics (``alaya.train.action_effects``: no counterfactual
frames needed, so any recording with the action's column trains it). A ``WorldSession`` with an
``action_effects/`` folder beside its weights composites it over the frame it shows; its memory
and context keep the frame without it, since an effect is not part of the place (a summoned
body, which stays in the game's world, fades from the layer after ``frames`` frames).

    effects = ActionEffects.from_pretrained("weights/world_model/action_effects")
    shown = effects.composite(frame, {"spell": 0})      # uint8 (H, W, 3), the press's own frame
"""

from __future__ import annotations

import math
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
    pitch_anchored: tuple[bool, ...] = ()  # per action: placed by the heading, shifted with the pitch
                                           # (empty: none is; the layer is fixed on the screen)
    focal: float = 0.0                     # the camera's focal length in pixels at ``size`` (for the shift)

    def __post_init__(self) -> None:
        unknown = [a for a in self.actions if a not in ONE_SHOT]
        if unknown or not self.actions or len(set(self.actions)) != len(self.actions):
            raise ValueError(f"ActionEffectsConfig.actions: expected distinct one-shot actions of "
                             f"{', '.join(ONE_SHOT)}, got {self.actions!r}")
        if self.frames < 1 or self.size < 1:
            raise ValueError(f"ActionEffectsConfig: frames and size must be >= 1, got {self.frames}, {self.size}")
        if self.pitch_anchored and (len(self.pitch_anchored) != len(self.actions) or not self.focal > 0):
            raise ValueError(f"ActionEffectsConfig.pitch_anchored: one flag per action ({len(self.actions)}) and "
                             f"a focal length > 0, got {self.pitch_anchored!r} and {self.focal!r}")


def shift_rows(image: torch.Tensor, rows: int) -> torch.Tensor:
    """(..., H, W) moved ``rows`` down (up if negative), zeros where nothing moved in."""
    if rows == 0:
        return image
    out = torch.zeros_like(image)
    H = image.shape[-2]
    if abs(rows) < H:
        if rows > 0:
            out[..., rows:, :] = image[..., :H - rows, :]
        else:
            out[..., :H + rows, :] = image[..., -rows:, :]
    return out


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

    def rows_at(self, pitch_degrees: float, size: int) -> int:
        """How many rows a pitch-anchored layer moves down the screen at this camera pitch (up
        positive) in a frame of ``size`` rows: what the heading places sinks as the view looks up."""
        return round(self.config.focal * size / self.config.size * math.tan(math.radians(pitch_degrees)))

    def composite(self, frame: np.ndarray, since: dict[str, int], pitch_degrees: float = 0.0) -> np.ndarray:
        """``frame`` (uint8 (H, H, 3)) with the layer of each action pressed ``since[action]``
        frames ago (0: this frame) drawn over it, the oldest press first, a pitch-anchored layer
        at the camera's ``pitch_degrees``; actions without a layer, or pressed ``frames`` or more
        frames ago, draw nothing."""
        c = self.config
        live = [(n, a) for a, n in since.items() if a in c.actions and 0 <= n < c.frames]
        if not live:
            return frame
        alpha, colour = self._layers(frame.shape[0])
        x = torch.from_numpy(frame).permute(2, 0, 1).float() / 255
        for n, a in sorted(live, reverse=True):
            k = c.actions.index(a)
            a_k, c_k = alpha[k, n], colour[k, n]
            if c.pitch_anchored and c.pitch_anchored[k]:
                rows = self.rows_at(pitch_degrees, frame.shape[0])
                a_k, c_k = shift_rows(a_k, rows), shift_rows(c_k, rows)
            x = (1 - a_k) * x + c_k
        return (x.clamp(0, 1).permute(1, 2, 0) * 255).round().to(torch.uint8).numpy()

    def save_pretrained(self, folder, **metadata) -> None:
        save_pretrained(self, folder, dtype=torch.float16, **metadata)     # half the bytes; loaded as float32

    @classmethod
    def from_pretrained(cls, folder) -> ActionEffects:
        return from_pretrained(cls, ActionEffectsConfig, folder).eval()
