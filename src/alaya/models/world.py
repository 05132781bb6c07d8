"""The world model: causal, action-conditioned next-frame generation in latent space.

No engine at play time. Frame n's RGB latents are generated from

* a bounded context: the ``context`` most recent generated latents (newest first) and one
  *anchor* latent — the first frame of the session, which keeps the look and the scene's
  identity over thousands of frames while the recent window carries the motion;
* the action rows of frames n, n-1, ... (``action_history`` rows, ``alaya.data.actions``);
* a style prompt embedding (MiniLM, 384-d);
* the level of Gaussian noise that was added to the context (noise augmentation: trained on
  corrupted contexts, the model learns to repair its own errors instead of compounding them;
  at play time a small fixed level is used).

With ``view_warp`` the context is first turned into frame n's view: a turn or pitch action
rotates the camera by a known angle, and a camera rotation moves every pixel by a homography
that needs no depth (``alaya.models.view_warp``), so the network only has to predict what a
rotation cannot explain (parallax, moving bodies, what comes into view). With ``ground_warp`` a
forward or strafe step moves it too, the scene taken as a floor at eye height under a far
background: exact for the ground, which fills the lower half of a walking view.

With ``memory`` the anchor's slot takes the explicit scene memory rendered at frame n's camera
(``alaya.models.memory_conditioning``: rgb, coverage, disparity) and the model generates RGB-D
frames with a blend gate, starting from the memory where it covers the view (docs/world.md,
"Memory-conditioned model").

It shares the Flash student's streaming core: the network *is* a :class:`Student`, whose per-frame
conditioning input (the G-buffer slot) takes the anchor latent, whose context slot takes the
recent window, and whose prompt vector takes [style embedding, action rows, noise level]. So the
same few-step sampler (``sample_student``), ONNX export and runtime backends run it.
"""

from __future__ import annotations

import math
import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from alaya.codecs.patch import stabilize_patch_latent
from alaya.data.actions import ACTION_DIM
from alaya.diffusion.flow import time_grid
from alaya.models.memory_conditioning import HOLE_BASES, IMAGE_CHANNELS, composite, memory_base
from alaya.models.student import Student, StudentConfig, integrate_student
from alaya.models.view_warp import (camera_rotation, pinhole, relative_pose, turn_rotation, walk_poses,
                                    warp_ground, warp_rotation)
from alaya.nn.conditioning import timestep_embedding
from alaya.nn.pretrained import from_pretrained, save_pretrained


CODECS = ("patch4", "autoencoder")


@dataclass
class WorldModelConfig:
    codec: str = "patch4"            # its latent space: "patch4" (lossless 4x4 space-to-depth,
                                     # alaya.codecs.patch) or "autoencoder" (weights/autoencoder, 8x)
    latent_channels: int = 48
    text_dim: int = 384
    action_dim: int = ACTION_DIM
    action_history: int = 3          # action rows it sees: frame n's, n-1's, ...
    context: int = 3                 # recent generated latents it sees
    widths: tuple[int, ...] = (64, 96)
    blocks: int = 1
    emb_dim: int = 192
    steps: int = 4                   # sampling steps
    average_velocity: bool = False   # the core gives the average velocity over [r, t] (MeanFlow), so a
                                     # step from t to r lands where the flow does; trained with
                                     # WorldTrainConfig.meanflow_share (1 step: r = 0, t = 1)
    sigma_data: float = 0.25         # of what it generates: with ``residual``, x - context[0]
    residual: bool = True            # generate the change from the newest context frame as given
                                     # (training: noise included): "copy the last frame" is its zero
    position_features: int = 0       # > 0: the core sees where each pixel lies in the view (octaves of
                                     # ``student.frame_position``), so an action can show at its place
                                     # (a blade at the right, an orb ahead); 0: none
    play_context_noise: float = 0.1  # noise level the model is told its context has at play time
    view_warp: bool = False          # move the context into the new view by the rotation its turn /
                                     # pitch actions make (alaya.models.view_warp), before predicting
    fov_y_degrees: float = 70.0      # the game's camera (GameConfig) ...
    turn_degrees: float = 3.0        # ... and its rotation per frame at turn = 1 and pitch = 1
    pitch_degrees: float = 2.0       # (NavigationScale rates / GameConfig.fps)
    start_pitch_degrees: float = -5.73   # the game's pitch at a start frame and its limit: a session
    max_pitch_degrees: float = 40.0      # plays pitch actions as the game does (WorldSession)
    ground_warp: bool = False        # with view_warp: also move the context by the walk of its forward /
                                     # strafe actions, the scene taken as a floor eye_height below the
                                     # camera and a far background (needs the camera's pitch)
    eye_height: float = 1.4          # the game's eye height (GameConfig) and walk per frame at
    move_metres: float = 0.1         # forward = 1 (NavigationScale.move_speed / fps)
    anchor_warp: bool = False        # with ground_warp: the anchor too is seen from frame n's camera, at the
                                     # pose the actions since it put the player (dead_reckon), and where
                                     # it does not cover the view the newest aligned context frame fills in:
                                     # a sharp copy of what the player saw, where it is still in view
    anchor_max_distance: float = 60.0   # floor further than this from the anchor's camera: not covered
    memory: bool = False             # condition on the scene memory rendered at frame n's camera (in the
                                     # anchor's slot) and generate RGB-D + a blend gate (models.memory_conditioning):
                                     # patch4 of 5 image channels, latent_channels 80
    memory_max_points: int = 100_000     # the session's SceneMemory: capacity and insert stride
    memory_stride: int = 1
    memory_see_through: bool = False     # ... and whether a generated frame's depth may remove points
                                         # (SceneMemoryConfig.see_through): off, a guess must not erase
    memory_floor_clamp: bool = True      # a generated depth goes in no farther than the floor at eye height
                                         # along its ray (memory_conditioning.clamp_to_floor)
    memory_sky_depth: float = 0.0        # > 0: what a frame shows as sky goes into the memory this far away
                                         # (a backdrop that turns with the view), else the sky is not stored
    memory_tent: float = 1.0             # the memory render's colour blend (SceneMemoryConfig.tent: 1 the
                                         # points' full extent, smaller crisper where a view is magnified)
    memory_tent_min_radius: float = 1.0  # ... its smallest half-width in pixels (SceneMemoryConfig.tent_min_radius:
                                         # 1 blends a sub-pixel shift like bilinear resampling, 0.5 keeps it sharp)
    memory_sky_dome: bool = False        # with memory_sky_depth: the sky kept by direction (SkyDome: it
                                         # turns with the view, walking does not move it), not as points
    memory_wall_margin: float = 0.0      # > 0: play draws the walkable region's border as walls this many
                                         # metres beyond its edges where the memory has nothing nearer
                                         # (RegionWalls; a session with a region and a start view)
    memory_wall_borrow: bool = True      # ... a border the start frame did not show drawn in the best-seen
                                         # one's texture (RegionWalls.borrow; recoloured by the wall detail's
                                         # facing colour for the prompt's style), else not drawn
    memory_wall_facing: bool = True      # ... recoloured so (WallDetail.facing_for); off: the best-seen one's colour
    memory_wall_material: bool = True    # ... and drawn as one of the recorded walls' materials (WallDetail.materials,
                                         # when it has them), picked by the session's seed; off: the borrowed grain
    memory_wall_detail_among: int = 1    # a seen wall's close-up detail: the tile of median detail among this many
                                         # nearest its colour (WallDetail.nearest); 1: the nearest (as shipped)
    memory_floor: bool = False           # play draws the walkable region's floor, tiled with the start frame's
                                         # floor texture, where the memory has nothing nearer (RegionFloor;
                                         # a session with a region and a start view)
    memory_shell_coarse: float = 0.0     # > 0: the walls and floor are also drawn over the memory's points on
                                         # them that span more than this many pixels now (region_shell.coarse_points:
                                         # a far-seen wall walked up to), else only where it has none nearer
    memory_fog: bool = False             # the start frame's fog taken out of the walls' far-seen colours as a blend
                                         # towards the fog's colour (aerial_fog.AerialFog): the prompt's recorded
                                         # style's (WallDetail.fog_for), else, with memory_sky_dome, the sky's at the
                                         # horizon, its density fitted to the floor; off: as the floor's offset per metre
    memory_sky_extend: bool = False      # with memory_sky_dome: the sky no frame showed drawn by its elevation's
                                         # seen colour (SkyDome.extend), and a generated frame's sky kept out of it
    memory_hole_base: str = "context"    # the residual's zero where the memory does not cover: the newest
                                         # context frame, "inpaint": the memory pulled into its holes, or
                                         # "far": the context, but beside a depth edge its far side,
                                         # "mirror": the context, but in the view's side strips the
                                         # view beside them mirrored
    memory_fill_pinholes: int = 2        # passes of memory_geometry.fill_pinholes over each memory render (0: off)
    memory_fill_disocclusions: bool = False   # the render's holes beside a depth edge shown as memory, filled with
                                         # the far side (memory_conditioning.fill_disocclusions): refined, not generated
    memory_fill_strips: bool = False     # a turn's side strips shown as memory, the view beside them mirrored
                                         # (memory_conditioning.fill_strips); off: the play-time try scored the
                                         # game's structure but soft (docs/world_journal.md, nineteenth section)
    memory_replace_below: float = 0.5    # where the memory covered the view, a generated frame goes in (and
                                         # may remove what it sees past) only where its gate is below this
                                         # (the model replaced the memory there); 0: only into the holes
    memory_depth_median: int = 5         # a generated depth goes in as the median of its window (odd; 0:
    memory_depth_outlier: float = 0.1    # as generated), not at all where it is this far (relative) from it
                                         # (memory_conditioning.clean_depth: no floating grain)

    def __post_init__(self):
        if self.position_features < 0:
            raise ValueError(f"position_features must be >= 0, got {self.position_features}")
        if self.codec not in CODECS:
            raise ValueError(f"codec must be one of {CODECS}, got {self.codec!r}")
        if self.codec == "patch4" and self.latent_channels != 16 * self.image_channels:
            raise ValueError(f"codec 'patch4' with memory={self.memory} has {16 * self.image_channels} latent "
                             f"channels, got latent_channels={self.latent_channels}")
        if self.memory and (self.codec != "patch4" or self.anchor_warp):
            raise ValueError("memory needs codec 'patch4' and takes the anchor's slot: anchor_warp must be off")
        if self.view_warp and self.codec != "patch4":
            raise ValueError("view_warp needs codec 'patch4' (a warp of the autoencoder's latents is not a warp of the image)")
        if self.ground_warp and not self.view_warp:
            raise ValueError("ground_warp extends view_warp: set view_warp too")
        if self.anchor_warp and not self.ground_warp:
            raise ValueError("anchor_warp needs ground_warp (and view_warp)")
        if self.view_warp and self.action_history < self.context:
            raise ValueError(f"view_warp: action_history ({self.action_history}) must cover the context "
                             f"({self.context}) to know each context frame's rotation")
        if self.memory_wall_detail_among < 1:
            raise ValueError(f"memory_wall_detail_among: tiles >= 1, got {self.memory_wall_detail_among!r}")
        if self.memory_depth_median < 0 or (self.memory_depth_median > 1 and self.memory_depth_median % 2 == 0):
            raise ValueError(f"memory_depth_median: an odd window or 0, got {self.memory_depth_median!r}")
        if not self.memory_depth_outlier > 0:
            raise ValueError(f"memory_depth_outlier: must be > 0, got {self.memory_depth_outlier!r}")
        if self.memory_hole_base not in HOLE_BASES:
            raise ValueError(f"memory_hole_base must be one of {HOLE_BASES}, got {self.memory_hole_base!r}")
        if self.memory_sky_dome and not self.memory_sky_depth > 0:
            raise ValueError("memory_sky_dome: the dome is drawn memory_sky_depth away; set memory_sky_depth > 0")
        if not (math.isfinite(self.memory_wall_margin) and self.memory_wall_margin >= 0):
            raise ValueError(f"memory_wall_margin: metres >= 0 (0: off), got {self.memory_wall_margin!r}")
        if self.memory_sky_extend and not self.memory_sky_dome:
            raise ValueError("memory_sky_extend: extends the sky dome; set memory_sky_dome")

    @property
    def image_channels(self) -> int:
        """Channels of the frame image its latent holds: rgb, or rgb | disparity | gate with memory."""
        return IMAGE_CHANNELS if self.memory else 3

    @property
    def factor(self) -> int:
        """Pixels per latent pixel along each axis."""
        return 4 if self.codec == "patch4" else 8

    @property
    def cond_dim(self) -> int:
        return self.text_dim + self.action_history * self.action_dim + 1

    def core(self) -> StudentConfig:
        return StudentConfig(latent_channels=self.latent_channels, gbuffer_channels=self.latent_channels,
                             text_dim=self.cond_dim, widths=tuple(self.widths), blocks=self.blocks,
                             emb_dim=self.emb_dim, context=self.context, steps=self.steps,
                             sigma_data=self.sigma_data, position_features=self.position_features,
                             average_velocity=self.average_velocity)


class WorldModel(nn.Module):
    def __init__(self, config: WorldModelConfig | None = None):
        super().__init__()
        self.config = config or WorldModelConfig()
        self.core = Student(self.config.core())

    def pack(self, style: torch.Tensor, actions: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """The core's prompt vector (B, cond_dim) from the style embedding (B, 384), the action
        rows (B, action_history, 8) (newest first) and the context noise level (B,)."""
        c = self.config
        B = style.shape[0]
        expect = {"style": (B, c.text_dim), "actions": (B, c.action_history, c.action_dim), "noise": (B,)}
        for name, value in (("style", style), ("actions", actions), ("noise", noise)):
            if tuple(value.shape) != expect[name]:
                raise ValueError(f"{name}: expected {expect[name]}, got {tuple(value.shape)}")
        return torch.cat([style, actions.reshape(B, -1), noise[:, None]], 1)

    def forward(self, z: torch.Tensor, t: torch.Tensor, anchor: torch.Tensor, context: torch.Tensor,
                valid: torch.Tensor, style: torch.Tensor, actions: torch.Tensor,
                noise: torch.Tensor, r: torch.Tensor | None = None) -> torch.Tensor:
        """Velocity of frame n's noisy latents ``z`` (B, C, h, w) at time ``t`` (B,), given the
        anchor latent (B, C, h, w), the context (B, K, C, h, w) with validity (B, K, 1, h, w)
        (zeros before the session's first frame), style, actions and noise level; with ``r`` (B,)
        the average velocity over [r, t] (``average_velocity`` models; None: r = t)."""
        cond = self.pack(style, actions, noise)
        return self.core(z, t if r is None else r, t, anchor, cond, context, valid)

    def align(self, context: torch.Tensor, valid: torch.Tensor, actions: torch.Tensor,
              pitch: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """With ``view_warp``: context (B, K, C, h, w) seen from frame n's camera, each frame k
        (frame n-1-k) rotated by the turn and pitch of action rows n ... n-k, and its validity
        (B, K, 1, h, w) lowered where the new view sees past the old frame's edge. With
        ``ground_warp`` also moved by the walk of those rows (``warp_ground``), which needs frame
        n's camera ``pitch`` (B,) in degrees. Otherwise unchanged. Warped in pixel space (the
        patch latent is the image, rearranged)."""
        c = self.config
        if not c.view_warp:
            return context, valid
        B, K, C, h, w = context.shape
        image = F.pixel_shuffle(context.reshape(B * K, C, h, w), c.factor)
        camera = pinhole(image.shape[-1], c.fov_y_degrees)
        if c.ground_warp:
            if pitch is None or tuple(pitch.shape) != (B,):
                got = None if pitch is None else tuple(pitch.shape)
                raise ValueError(f"pitch: ground_warp needs frame n's camera pitch in degrees, shape ({B},); got {got}")
            pitch = torch.deg2rad(pitch.float())
            yaw, old_pitch, centre = walk_poses(actions[:, :K], pitch, math.radians(c.turn_degrees),
                                                math.radians(c.pitch_degrees), c.move_metres)
            new = camera_rotation(torch.zeros(B), pitch).repeat_interleave(K, 0)
            old = camera_rotation(yaw.reshape(-1), old_pitch.reshape(-1))
            warped, coverage = warp_ground(image, camera, new, old, centre.reshape(-1, 3), c.eye_height)
        else:
            angles = actions[:, :K, 2:4].cumsum(1)                      # (B, K, [turn, pitch])
            rotation = turn_rotation(torch.deg2rad(angles[..., 0] * c.turn_degrees).reshape(-1),
                                     torch.deg2rad(angles[..., 1] * c.pitch_degrees).reshape(-1))
            warped, coverage = warp_rotation(image, rotation, camera)
        coverage = F.avg_pool2d(coverage, c.factor).reshape(B, K, 1, h, w)
        return F.pixel_unshuffle(warped, c.factor).reshape(B, K, C, h, w), valid * coverage

    def align_anchor(self, anchor: torch.Tensor, newest: torch.Tensor, anchor_pose: torch.Tensor,
                     anchor_pitch: torch.Tensor, pose: torch.Tensor, pitch: torch.Tensor) -> torch.Tensor:
        """With ``anchor_warp``: the anchor latent (B, C, h, w) seen from frame n's camera
        (``warp_ground``) where it covers the view, the newest aligned context frame ``newest``
        elsewhere. Poses (B, 3) [x, y, yaw] are dead-reckoned (``view_warp.dead_reckon``) in one
        frame of reference; pitches (B,) in degrees. Otherwise the anchor, unchanged."""
        c = self.config
        if not c.anchor_warp:
            return anchor
        B, C, h, w = anchor.shape
        for name, value, shape in (("anchor_pose", anchor_pose, (B, 3)), ("pose", pose, (B, 3)),
                                   ("anchor_pitch", anchor_pitch, (B,)), ("pitch", pitch, (B,))):
            if value is None or tuple(value.shape) != shape:
                got = None if value is None else tuple(value.shape)
                raise ValueError(f"{name}: anchor_warp needs shape {shape}, got {got}")
        yaw, centre = relative_pose(anchor_pose.float(), pose.float())
        image = F.pixel_shuffle(anchor, c.factor)
        new = camera_rotation(torch.zeros(B), torch.deg2rad(pitch.float()))
        old = camera_rotation(yaw, torch.deg2rad(anchor_pitch.float()))
        warped, coverage = warp_ground(image, pinhole(image.shape[-1], c.fov_y_degrees), new, old, centre,
                                       c.eye_height, old_max_distance=c.anchor_max_distance)
        coverage = (coverage > 0.999).to(image.dtype)         # edge pixels repeat the border: the newest frame
        out = coverage * warped + (1 - coverage) * F.pixel_shuffle(newest, c.factor)
        return F.pixel_unshuffle(out, c.factor)

    def base(self, newest: torch.Tensor, memory: torch.Tensor | None = None) -> torch.Tensor:
        """What the residual is the change from: the newest (aligned) context frame, or with
        ``memory`` the memory where it covers and that frame elsewhere (``memory_base``)."""
        if not self.config.memory:
            return newest
        if memory is None or memory.shape != newest.shape:
            raise ValueError(f"memory: a memory model needs the memory latent {tuple(newest.shape)}, got "
                             f"{None if memory is None else tuple(memory.shape)}")
        return memory_base(memory, newest, self.config.factor, self.config.memory_hole_base)

    def finish(self, out: torch.Tensor, newest: torch.Tensor, stabilize: bool = True,
               memory: torch.Tensor | None = None) -> torch.Tensor:
        """Frame n's latents from the sampler's output: with ``residual`` the base (``base``: the
        newest aligned context frame, or the memory where it covers) is added back, and in the patch
        space ``stabilize`` projects out grid drift of the colour (``stabilize_patch_latent``); a
        memory model then shows the memory where its gate says so (``composite``). Shared by
        ``sample`` and ``WorldSession``."""
        base = self.base(newest, memory)
        if self.config.residual:
            out = out + base
        if stabilize and self.config.codec == "patch4":
            out = torch.cat([stabilize_patch_latent(out[:, :48], base[:, :48]), out[:, 48:]], 1)
        if self.config.memory:
            out = composite(out, memory, self.config.factor)
        return out

    @torch.no_grad()
    def sample(self, *args, **kwargs) -> torch.Tensor:
        """``generate`` without gradient: what sessions and training-time rollouts use."""
        return self.generate(*args, **kwargs)

    def generate(self, z: torch.Tensor, anchor: torch.Tensor, context: torch.Tensor, valid: torch.Tensor,
                 style: torch.Tensor, actions: torch.Tensor, noise: torch.Tensor, steps: int | None = None,
                 stabilize: bool = False, pitch: torch.Tensor | None = None,
                 poses: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Frame n's latents from pure noise ``z`` in ``steps`` Euler steps (the core's sampler),
        given the context as generated (``align`` is applied here, once) and the noise level the
        model is told (``pitch``: frame n's, for ``ground_warp``; ``poses``: (anchor pose, anchor
        pitch, frame n's pose), for ``anchor_warp``); then ``finish``: the newest aligned context
        frame added back, optionally stabilized as ``WorldSession`` does. Differentiable (the
        unrolled rollout loss trains through it); ``sample`` is the same without gradient."""
        context, valid = self.align(context, valid, actions, pitch)
        memory = anchor if self.config.memory else None          # the memory latent takes the anchor's slot
        if self.config.anchor_warp:
            if poses is None:
                raise ValueError("poses: anchor_warp needs (anchor pose, anchor pitch, frame n's pose)")
            anchor = self.align_anchor(anchor, context[:, 0], poses[0], poses[1], poses[2], pitch)
        ts = time_grid(steps or self.config.steps)
        out = integrate_student(self.core, z, ts, anchor, self.pack(style, actions, noise), context, valid)
        return self.finish(out, context[:, 0], stabilize, memory)

    def save_pretrained(self, folder, **metadata) -> None:
        save_pretrained(self, folder, **metadata)

    @torch.no_grad()
    def to_average_velocity(self) -> "WorldModel":
        """This model made an average-velocity one (``average_velocity``, MeanFlow) that gives every
        interval [r, t] the velocity at t until it is trained otherwise: a flow-matching model saw
        only r = t, so the core's interval embedding is set to the constant it gave there (its last
        layer's weights 0, its bias that output). In place; returns the model."""
        if self.config.average_velocity:
            return self
        mlp = self.core.interval_mlp
        constant = mlp(timestep_embedding(torch.zeros(1), self.config.emb_dim))[0]
        mlp[-1].weight.zero_()
        mlp[-1].bias.copy_(constant)
        self.config = dataclasses.replace(self.config, average_velocity=True)
        self.core.config.average_velocity = True
        return self

    @classmethod
    def from_pretrained(cls, folder) -> "WorldModel":
        return from_pretrained(cls, WorldModelConfig, folder)
