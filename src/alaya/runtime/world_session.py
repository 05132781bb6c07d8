"""``WorldSession``: the world model as an endless game, one action row in, one RGB frame out.

``reset(frame, prompt)`` starts from one real frame (encoded by the RGB autoencoder; it becomes
the anchor and the first context frame). Per ``step(action)``: the action row joins the action
history; the context (the last ``context`` generated latents) gets the model's small play-time
noise level; the per-frame features are computed once; the frame's latents are integrated from
noise in ``steps`` Euler steps; the tiny streaming decoder turns them into RGB. The networks are
the Flash runtime's (``alaya.runtime.backends``: torch or onnxruntime), since the world model's
network is a streaming student. State has a fixed size: memory stays flat however long it plays.

Noise for frame n comes from a generator seeded by (seed, n): same start, seed and actions give
the same frames.

A memory model (``WorldModelConfig.memory``) also keeps a ``SceneMemory``: per step the memory is
rendered at frame n's camera (``camera_view``), the render conditions the network, and the frame
it generates goes in with its generated depth. The camera moves by a learned ``CameraMotion``
when the session has one (a model folder's ``camera_motion/``: each action row's relative pose,
learned from the data), else by the fixed kinematics (``advance_pose``: the game's constants);
the learned camera's walk stops, per axis, short of the surfaces the memory and the last frame
hold (``slide_at_surfaces``: a walk at a slant into a wall slides along it, as the game's player
does), and, given the start camera's pose in the recordings' world (``reset(view=...)``) and the
region recorded players stood in (``WalkableRegion``, ``starts/region.json``), it slides along
the game's axes and stays inside that region, so a wall the model did not draw does not let it
walk out of the world. A camera that has not moved (``same_view``) since the last frame made at
a move is shown that frame as its memory (``frame_as_memory``), as training's standing-still
samples are, rather than the memory's re-render of it: the splats' resampling and that frame's
not-yet-inserted parts would otherwise make a still view settle over frames. It stays that frame
while the camera stands: were it each newest frame, the model's small change per frame would
add up, as in a model without memory.
The start frame is an observation (``ObservedFrame``): a generated frame puts nothing into the
memory where the start frame saw through to a farther surface or the sky (``in_observed_free_space``),
so content generated far out, with a depth guessed too near, cannot hide the start's view on the
way back. The start frame goes in with the depth given to ``reset`` (a recorded frame's: the start
frames' ``.depth.npy``) or else the depth the model predicts for it. The memory is bounded
(``memory_max_points``), so state stays bounded too.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import torch

from alaya.codecs.autoencoder import Autoencoder
from alaya.codecs.patch import PatchCodec, PatchCodecConfig
from alaya.codecs.tiny import TinyDecoder
from alaya.data.actions import ACTION_COLUMNS, ACTION_DIM, ActionError, check_actions
from alaya.data.start_frames import rigid_view
from alaya.data.walkable_region import WalkableRegion
from alaya.diffusion.flow import time_grid
from alaya.models.action_effects import ActionEffects
from alaya.models.camera_constraints import seen_surface, slide_at_surfaces, stay_in_region
from alaya.models.region_shell import coarse_points, region_shell
from alaya.models.camera_motion import CameraMotion
from alaya.models.memory_conditioning import (ObservedFrame, as_context, decode_depth, frame_as_memory, frame_image,
                                              generated_insert, kinematic_view, memory_latent, same_view,
                                              session_memory, shown_render, to_image, to_latent)
from alaya.models.student import push_context
from alaya.models.view_warp import advance_pose, pinhole
from alaya.models.world import WorldModel
from alaya.models.wall_detail import WallDetail
from alaya.runtime.backend_base import Backend
from alaya.runtime.backends import BACKENDS, make_backend
from alaya.runtime.step_traffic import StepTraffic
from alaya.text import PromptEncoder



SKY_BELOW_WALLS = -10.0    # degrees: with the floor and walls drawn over it, the sky no frame showed goes on this far
#                            below the horizon, left only over a low wall's top (lower, a replayed frame shows the
#                            ground beyond the wall: 90 degrees down cost 0.18 dB of replay PSNR and 0.5 dB on return)


def world_seed(seed: int, frame: np.ndarray) -> int:
    """The seed of what a session draws at random for its world (the materials of the borders no
    frame showed): its own ``seed`` and its start ``frame``'s content together, so that one seed
    draws different walls in different worlds, and a world replayed draws the same."""
    return int(seed) * 2 ** 32 + zlib.crc32(np.ascontiguousarray(frame).tobytes())


class WorldSession:
    def __init__(self, model: WorldModel, autoencoder: Autoencoder | None = None, decoder: TinyDecoder | None = None,
                 prompt: str = "", prompt_encoder: PromptEncoder | None = None, steps: int | None = None,
                 seed: int = 0, size: int = 64, backend: str | Backend = "torch",
                 context_noise: float | None = None, stabilize: bool = True,
                 camera_motion: CameraMotion | None = None, region: WalkableRegion | None = None,
                 solo_backend: Backend | None = None, traffic: StepTraffic | None = None,
                 action_effects: ActionEffects | None = None, wall_detail: WallDetail | None = None):
        """``autoencoder`` / ``decoder``: the model's codec (``codecs_for``: only a model in the
        autoencoder's latent space needs them). ``backend``: "torch", "onnx" (``make_backend``:
        graphs exported once for ``size``) or a backend object shared with other sessions
        (``WorldSessionFactory``); ``solo_backend``: the same graphs with a thread per core, for a
        step that runs while no other session's does (``traffic``, shared by the sessions).
        ``camera_motion``: a memory model's learned camera (its intrinsics and the motion of each
        row; None: the fixed kinematics). ``region``: where the learned camera may walk, in the
        world of the start views given to ``reset``. ``action_effects``: what each one-shot action
        draws over the frames ``step`` shows (not over what the memory and context keep).
        ``wall_detail``: the region walls' close-up detail."""
        autoencoder, decoder = codecs_for(model, autoencoder, decoder)
        if isinstance(backend, str) and backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if size <= 0 or size % 16:
            raise ValueError(f"size must be a positive multiple of 16, got {size}")
        self.model, self.autoencoder = model.eval(), autoencoder.eval()
        c = model.config
        self.steps = c.steps if steps is None else steps
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        self.size, self.seed, self.stabilize = size, seed, stabilize
        self.camera_motion = camera_motion.eval() if camera_motion is not None else None
        self.region, self.action_effects, self.wall_detail = region, action_effects, wall_detail
        self._effects_since: dict[str, int] = {}
        self.context_noise = c.play_context_noise if context_noise is None else context_noise
        if isinstance(backend, str):
            backend = make_backend(backend, model.core, None, decoder, size, factor=c.factor, steps=self.steps)
        self.backend, self.solo_backend = backend, solo_backend
        self.traffic = traffic or StepTraffic()
        self.prompt_encoder = prompt_encoder or PromptEncoder()
        self.times = time_grid(self.steps)
        self.prompt = ""
        self.style = torch.zeros(1, c.text_dim)
        self.set_prompt(prompt)
        self.anchor: torch.Tensor | None = None

    def set_prompt(self, prompt: str) -> None:
        """The style prompt, from the next frame on."""
        self.style = self.prompt_encoder.encode(prompt).reshape(1, -1)
        self.prompt = prompt

    def _check_frame(self, frame) -> torch.Tensor:
        a = np.asarray(frame)
        S = self.size
        if a.dtype != np.uint8 or a.shape != (S, S, 3):
            raise ValueError(f"start frame: expected uint8 ({S}, {S}, 3), got {a.dtype} {a.shape}")
        return torch.from_numpy(a.copy()).permute(2, 0, 1)[None].float() / 255

    @torch.no_grad()
    def reset(self, frame: np.ndarray, prompt: str | None = None, pitch: float | None = None,
              depth: np.ndarray | None = None, view: np.ndarray | None = None,
              history: np.ndarray | None = None) -> None:
        """Start a new game from ``frame`` (uint8 (size, size, 3)), in ``prompt``'s style if given;
        ``pitch``: the start frame's camera pitch in degrees (default: the game's start pitch,
        ``WorldModelConfig.start_pitch_degrees``), which the pitch limit and ``ground_warp`` use.
        ``depth`` (size, size) metres, 0 on the sky: the start frame's, for a memory model (default:
        the model predicts it). ``view`` (4, 4): the start camera's world_to_camera in the world
        of the session's ``region`` (a start's ``.view.npy``), which keeps a learned camera
        inside it (default: no bound). ``history`` (K, 8): the action rows that led to ``frame``,
        oldest first (default: none, a player at rest): the network sees the last of them as the
        rows before the first step's, and a learned camera's state (momentum, a jump's flight) is
        played through them, so a walk or jump under way at the start goes on."""
        x = self._check_frame(frame)
        rows = None if history is None else check_actions(history, "history").reshape(-1, ACTION_DIM)
        view = None if view is None else torch.from_numpy(rigid_view(view))
        c = self.model.config
        if pitch is None:
            pitch = c.start_pitch_degrees
        if isinstance(pitch, bool) or not isinstance(pitch, (int, float, np.floating, np.integer)) \
                or not abs(float(pitch)) <= c.max_pitch_degrees + 0.01:
            raise ValueError(f"pitch: expected degrees within ±{c.max_pitch_degrees:g}, got {pitch!r}")
        if prompt is not None:
            self.set_prompt(prompt)
        if c.memory:
            z = as_context(to_latent(frame_image(x, self._check_depth(depth))))
        else:
            z = self.autoencoder.encode(x)
        self.anchor = z
        h = self.size // c.factor
        self.context = torch.zeros(1, c.context, c.latent_channels, h, h)
        self.valid = torch.zeros(1, c.context, 1, h, h)
        self.context, self.valid = push_context(self.context, self.valid, z)
        self.actions = torch.zeros(1, c.action_history, ACTION_DIM)
        if rows is not None and len(rows):
            last = torch.from_numpy(rows[::-1][:c.action_history].copy())   # newest first
            self.actions[0, :len(last)] = last
        self.decoder_state = None
        self._effects_since = {}
        self.frame_index = 0
        self.pitch = min(max(float(pitch), -c.max_pitch_degrees), c.max_pitch_degrees)
        self.pose = torch.zeros(1, 3)                  # dead-reckoned [x, y, yaw] since the start frame
        self.anchor_pose, self.anchor_pitch = self.pose, torch.tensor([self.pitch])
        if c.memory:
            self._reset_memory(x, z, depth is None)
            if rows is not None and len(rows) and self.camera_motion is not None:
                self._motion_state = self.camera_motion.warmed(rows, self._motion_state)
            self._to_region = None
            if view is not None and self.region is not None and self.camera_motion is not None:
                self._to_region = torch.linalg.inv(view) @ self._motion_view.double()   # session world -> region's
            self._shell = region_shell(self.region, self._to_region, self.memory, c, self.camera_view(),
                                       self.wall_detail, self.style[0], world_seed(self.seed, frame))  # walls, floor
            if self._shell is not None and self._shell.floor is not None and self.memory.dome is not None:
                self.memory.dome.reach_down_to(SKY_BELOW_WALLS)
        # warm the streaming decoder's memory on the start frame, so frame 1 continues it
        _, self.decoder_state = self.backend.decode(z, None)

    def _check_depth(self, depth) -> torch.Tensor | None:
        if depth is None:
            return None
        d = np.asarray(depth, dtype=np.float32)
        if d.shape != (self.size, self.size) or not np.isfinite(d).all() or (d < 0).any():
            raise ValueError(f"depth: expected finite metres >= 0 of shape ({self.size}, {self.size}), got {d.shape}")
        return torch.from_numpy(d)[None, None]

    def camera_view(self) -> torch.Tensor:
        """world_to_camera (4, 4) of frame n, where the memory is rendered and the frame inserted:
        the learned camera's chained motion when the session has one, else the fixed kinematics
        (dead-reckoned pose, tracked pitch). Both start at eye height over the floor z = 0."""
        if self.camera_motion is not None:          # chained from the start camera (_reset_memory)
            return self._motion_view
        return kinematic_view(self.pose, self.pitch, self.model.config.eye_height)

    def _move_camera(self, row: torch.Tensor) -> None:
        """Frame n's camera from frame n-1's by the played row (1, 8)."""
        c = self.model.config
        self.pose = advance_pose(self.pose, row, math.radians(c.turn_degrees), c.move_metres)
        if self.camera_motion is not None and c.memory:
            delta, self._motion_state = self.camera_motion.step(row[0], self._motion_state)
            surface = seen_surface(self._depth, self.K, self._motion_view, self.memory.xyz, 2 * self._stop_distance)
            axes = self._to_region[:3, :3] if self._to_region is not None else None
            delta = slide_at_surfaces(delta, self._motion_view, surface, self._stop_distance, axes)
            if self._to_region is not None:
                delta = stay_in_region(delta, self._motion_view, self._to_region, self.region)
            self._motion_view = delta @ self._motion_view

    def _reset_memory(self, x: torch.Tensor, z: torch.Tensor, predict_depth: bool) -> None:
        """A fresh memory holding the start frame, with its depth predicted by one standing-still
        step from an empty memory (as trained: ``reset_prob``) unless it was given."""
        c = self.model.config
        self.memory = session_memory(c)
        self.K = pinhole(self.size, c.fov_y_degrees)
        if self.camera_motion is not None:
            self.K = self.camera_motion.intrinsics(self.size, self.size).detach()
            self._motion_view = kinematic_view(self.pose, self.pitch, c.eye_height)
            self._motion_state = self.camera_motion.initial_state(world_to_camera=self._motion_view)
            self._stop_distance = self.camera_motion.stop_distance()
        if predict_depth:
            empty = memory_latent(torch.zeros_like(x), torch.zeros_like(x[:, :1]), torch.zeros_like(x[:, :1]))
            cond = self.model.pack(self.style, self.actions, torch.zeros(1))
            _, features = self.backend.frame(empty, self.context * self.valid, self.valid)
            gen = torch.Generator().manual_seed(self.seed * 1_000_003 % 2**64)
            out = self.backend.integrate(torch.randn(z.shape, generator=gen), self.times, cond, features)
            out = self.model.finish(out, self.context[:, 0], self.stabilize, empty)
            u = to_image(out)[:, 3:4].clamp(0, 1)
            z = as_context(to_latent(torch.cat([x, u, torch.zeros_like(u)], 1)))
            self.context = self.context.clone()
            self.context[:, 0] = z
            self.anchor = z
        self._view, self._covered, self._observed = self.camera_view(), None, None
        self._insert(z, observed=True)
        self._still_frame, self._still_view = self._shown, self._view
        self._observed = ObservedFrame(self.K, self._view, self._depth)     # what later frames may not fill

    def _insert(self, z: torch.Tensor, observed: bool = False) -> None:
        """Frame n (its latents, as shown) into the memory at ``camera_view`` with its depth
        (``observed``: the start frame; a generated one's sky stays out of an extending dome, and
        its pixels on the region's drawn walls and floor stay out)."""
        c = self.model.config
        image = to_image(z)[0]
        self._depth = decode_depth(image[3].clamp(0, 1))        # what the camera walks up to (_move_camera)
        self._shown = image[None, :3].clamp(0, 1), self._depth[None, None]   # a still camera's memory (step_latent)
        shell = None if observed or self._shell is None else self._shell.drawn_depth(self.K, self._view, *image.shape[-2:])
        rgb, depth, replaced = generated_insert(image, self.K, self._view, self._covered,
                                                c.memory_floor_clamp, c.memory_sky_depth, c.memory_replace_below,
                                                c.memory_depth_median, c.memory_depth_outlier, self._observed, shell)
        self.memory.insert(rgb, depth, self.K, self._view, time=self.frame_index, see_through=replaced,
                           observed=observed)

    @torch.no_grad()
    def step_latent(self, action) -> torch.Tensor:
        """Frame n's latents after playing one action row (``step`` without the decoder)."""
        with self.traffic.step(self.backend, self.solo_backend) as backend:
            return self._step_latent(action, backend)

    def _step_latent(self, action, backend: Backend) -> torch.Tensor:
        if self.anchor is None:
            raise RuntimeError("WorldSession.step needs a start frame: call reset(frame) first")
        row = check_actions(action, "action")
        if row.shape != (ACTION_DIM,):
            raise ActionError(f"action: one row of {ACTION_DIM} expected, got shape {row.shape}")
        self.frame_index += 1
        gen = torch.Generator().manual_seed((self.seed * 1_000_003 + self.frame_index) % 2**64)   # any int seed
        row = self._limit_pitch(row)
        self.actions = torch.cat([torch.from_numpy(row)[None, None], self.actions[:, :-1]], 1)
        c = self.model.config
        self._move_camera(self.actions[:, 0])
        # The model was trained on contexts corrupted by noise of a level it is told, and on
        # contexts carrying its own rollout errors told the play level (error recycling). At play
        # the context is its own output: it is told the play level (the shipped model: 0) and
        # gets no noise, so it repairs its accumulated errors as trained instead of compounding them.
        level = torch.full((1,), float(self.context_noise))
        pitch = torch.tensor([self.pitch])
        context, valid = self.model.align(self.context, self.valid, self.actions, pitch)   # view_warp
        cond = self.model.pack(self.style, self.actions, level)
        memory = None
        if c.memory:                                    # the memory seen from frame n's camera
            view = self.camera_view()
            moved = not same_view(view, self._still_view)
            if not moved:                              # not moved: the frame last shown here is its memory, exactly
                rgb, coverage, depth = frame_as_memory(*self._still_frame, c.memory_sky_depth)
                self._covered = coverage[0, 0]
            else:
                r = self.memory.render(self.K, view, self.size, self.size)
                self._covered = r.coverage[0]              # the holes filled below still take the frame
                rgb, coverage, depth = shown_render(r.rgb[None], r.coverage[None], r.depth[None], c)
                if self._shell is not None:            # drawn every frame from its texture: no frame goes in over it
                    held = coverage
                    coarse = None
                    if c.memory_shell_coarse > 0:      # also over its magnified points on them
                        coarse = coarse_points(r.extent[None], c.memory_shell_coarse)
                    rgb, coverage, depth = self._shell.draw(rgb, coverage, depth, self.K, view, coarse)
                    self._covered = torch.maximum(self._covered, ((coverage > held)[0, 0]).to(self._covered.dtype))
            self._view = view
            anchor = memory = memory_latent(rgb, coverage, depth)
        else:
            anchor = self.model.align_anchor(self.anchor, context[:, 0], self.anchor_pose, self.anchor_pitch,
                                             self.pose, pitch)                            # anchor_warp
        _, features = backend.frame(anchor, context * valid, valid)
        z = torch.randn(self.anchor.shape, generator=gen)
        z = backend.integrate(z, self.times, cond, features)
        z = self.model.finish(z, context[:, 0], self.stabilize, memory)
        if c.memory:
            self._insert(z)
            if moved:
                self._still_frame, self._still_view = self._shown, self._view
            z = as_context(z)
        self.context, self.valid = push_context(self.context, self.valid, z)
        return z

    def _limit_pitch(self, row: np.ndarray) -> np.ndarray:
        """The row as the game would play it: the game stops looking up or down at its pitch
        limit (``max_pitch_degrees``), and a pitch action beyond it does nothing, so the session
        tracks the pitch from the start frame's and passes on only the part that takes effect
        (without this a long session could pitch the view over the top, which no recording shows)."""
        c = self.model.config
        wanted = self.pitch + float(row[3]) * c.pitch_degrees
        limited = min(max(wanted, -c.max_pitch_degrees), c.max_pitch_degrees)
        if limited != wanted:
            row = row.copy()
            row[3] = (limited - self.pitch) / c.pitch_degrees
        self.pitch = limited
        return row

    @torch.no_grad()
    def step(self, action) -> np.ndarray:
        """uint8 (size, size, 3): the next frame after playing one action row."""
        with self.traffic.step(self.backend, self.solo_backend) as backend:
            z = self._step_latent(action, backend)
            img, self.decoder_state = backend.decode(z, self.decoder_state)
        return self._with_effects((img[0, :3].clamp(0, 1).permute(1, 2, 0) * 255).round().to(torch.uint8).numpy())

    def _with_effects(self, frame: np.ndarray) -> np.ndarray:
        """``frame`` with the effect of each one-shot action pressed in the last frames, the row
        just played included (``action_effects``)."""
        if self.action_effects is None:
            return frame
        fx, row = self.action_effects.config, self.actions[0, 0]
        since = {a: n + 1 for a, n in self._effects_since.items() if n + 1 < fx.frames}
        since.update({a: 0 for a in fx.actions if row[ACTION_COLUMNS.index(a)] != 0})
        self._effects_since = since
        return self.action_effects.composite(frame, since, self.pitch)


def codecs_for(model: WorldModel, autoencoder=None, decoder=None):
    """(encoder of start frames, streaming decoder) for the model's latent space: one
    ``PatchCodec`` for both, or the autoencoder and the tiny decoder, which must be given."""
    if model.config.codec == "patch4":
        codec = PatchCodec(PatchCodecConfig(factor=4, image_channels=model.config.image_channels)).eval()
        return codec, codec
    if autoencoder is None or decoder is None:
        raise ValueError("this world model works in the autoencoder's latent space: pass autoencoder and decoder")
    return autoencoder, decoder
