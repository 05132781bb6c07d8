"""What a memory-conditioned world model reads from the scene memory and writes into it.

A memory model (``WorldModelConfig.memory``) generates RGB-D frames with a blend gate, in one
patch latent of 5 image channels (``PatchCodec(image_channels=5)``, 4x4: 80 latent channels):

    frame image (B, 5, H, W) in [0, 1]:  rgb (3) | disparity u (1) | gate g (1)

* disparity ``u = 1 / (1 + depth)`` (metres; 0 on the sky, where the memory stores nothing):
  near surfaces take most of the range, the far floor still resolves, and the sky is one value;
* the gate is where the model keeps the memory's colour: the shown frame is
  ``g * memory + (1 - g) * generated`` on covered pixels (``composite``). It is generated like the
  other channels (trained against "the memory is right here": coverage and a small colour error),
  so the model decides the blend; standing still with a perfect memory, ``g = 1`` keeps it exact.

The memory's render at frame n's camera is the network's per-frame input (the student's
G-buffer slot), in the same space: rgb | coverage | disparity (``memory_latent``). The residual
the model generates starts from the memory where it covers the view and from the newest
(warped) context frame elsewhere (``memory_base``): "show what the memory shows" is its zero.

``kinematic_view`` is the camera the session renders the memory from: the dead-reckoned pose
(``view_warp.advance_pose``) and the tracked pitch at eye height. It is the one place a learned
camera-motion model (``alaya.models.camera_motion``) replaces the fixed kinematics.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

from alaya.models.camera_constraints import camera_centre
from alaya.models.memory_geometry import camera_points, fill_pinholes
from alaya.models.memory_hole_fill import edge_strip_fill, far_side_fill, inpaint, padded_windows
from alaya.models.scene_memory import SceneMemory, SceneMemoryConfig
from alaya.models.view_warp import camera_rotation

IMAGE_CHANNELS = 5            # rgb, disparity, gate
MAX_DEPTH = 40.0              # metres: farther is sky (the memory's max_distance)
SHELL_SLACK = 0.1             # a generated point this share nearer than a drawn wall or floor still lies on it
_GL = torch.diag(torch.tensor([1.0, -1.0, -1.0]))   # camera_rotation's (right, down, forward) -> OpenGL


def encode_depth(depth: torch.Tensor) -> torch.Tensor:
    """Disparity ``1 / (1 + depth)`` in (0, 1], 0 where depth is 0 (sky) or beyond MAX_DEPTH."""
    d = depth.float()
    return torch.where((d > 0) & (d <= MAX_DEPTH), 1.0 / (1.0 + d), torch.zeros_like(d))


def decode_depth(u: torch.Tensor) -> torch.Tensor:
    """Metres from disparity; 0 (sky, not stored) at or below MAX_DEPTH's disparity."""
    u = u.float()
    floor = 1.0 / (1.0 + MAX_DEPTH)
    return torch.where(u > floor, 1.0 / u.clamp(min=floor) - 1.0, torch.zeros_like(u))


def to_latent(image: torch.Tensor, factor: int = 4) -> torch.Tensor:
    """(B, 5, H, W) in [0, 1] -> (B, 80, H/4, W/4) in [-1, 1]: ``PatchCodec.encode`` of 5 channels."""
    return F.pixel_unshuffle(image * 2 - 1, factor)


def to_image(latent: torch.Tensor, factor: int = 4) -> torch.Tensor:
    """The inverse of ``to_latent`` (no clamping)."""
    return F.pixel_shuffle(latent, factor) * 0.5 + 0.5


def frame_image(rgb: torch.Tensor, depth: torch.Tensor | None = None, gate: torch.Tensor | None = None) -> torch.Tensor:
    """(B, 5, H, W) from rgb (B, 3, H, W) in [0, 1], depth (B, 1, H, W) metres (None: unknown, u = 0)
    and gate (B, 1, H, W) (None: 0)."""
    if rgb.ndim != 4 or rgb.shape[1] != 3:
        raise ValueError(f"rgb: expected (B, 3, H, W), got {tuple(rgb.shape)}")
    B, _, H, W = rgb.shape
    zero = rgb.new_zeros(B, 1, H, W)
    for name, value in (("depth", depth), ("gate", gate)):
        if value is not None and tuple(value.shape) != (B, 1, H, W):
            raise ValueError(f"{name}: expected {(B, 1, H, W)}, got {tuple(value.shape)}")
    u = zero if depth is None else encode_depth(depth)
    return torch.cat([rgb.float(), u, zero if gate is None else gate.float()], 1)


def memory_latent(rgb: torch.Tensor, coverage: torch.Tensor, depth: torch.Tensor, factor: int = 4) -> torch.Tensor:
    """The network's memory input (B, 80, h, w) from a render (``MemoryView`` fields batched):
    rgb (B, 3, H, W), coverage (B, 1, H, W), depth (B, 1, H, W); rgb and disparity are zeroed
    where not covered."""
    cov = (coverage > 0.5).float()
    return to_latent(torch.cat([rgb.float() * cov, cov, encode_depth(depth) * cov], 1), factor)


def memory_base(memory: torch.Tensor, newest: torch.Tensor, factor: int = 4, holes: str = "context") -> torch.Tensor:
    """The residual's zero (B, 80, h, w): rgb and disparity of the memory where it covers the
    view; elsewhere (``holes``) of the newest (aligned) context frame ("context"), the memory
    pulled smoothly into its holes ("inpaint", ``inpaint``: where the view moved, the context
    does not line up with the holes, and its border pixels repeat into stripes; a sample whose
    memory covers under 1% of the view, a session's start, still takes the context), or the
    context except beside a depth edge, where the hole takes the far side ("far",
    ``far_side_fill``: what a step past a near wall uncovers lies behind its edge, not on it),
    or the context except in the strips a turn or a strafe brings in at the view's left and
    right edges, which take the covered view beside them reflected across the strip's border
    ("mirror", ``edge_strip_fill``: the context there is the edge's old column, drawn out into
    streaks). The gate is the coverage."""
    if holes not in HOLE_BASES:
        raise ValueError(f"holes must be one of {HOLE_BASES}, got {holes!r}")
    m, x = to_image(memory, factor), to_image(newest, factor)
    cov = m[:, 3:4]
    known = torch.cat([m[:, :3], m[:, 4:5]], 1)
    fill = x[:, :4]
    if holes == "inpaint":
        empty = (cov.mean((1, 2, 3)) < 0.01).view(-1, 1, 1, 1)
        fill = torch.where(empty, fill, inpaint(known, cov))
    elif holes == "far":
        far, beside_edge = far_side_fill(known, cov)
        fill = torch.where(beside_edge, far, fill)
    elif holes == "mirror":
        mirrored, strip = edge_strip_fill(known, cov)
        fill = torch.where(strip, mirrored, fill)
    rgbd = cov * known + (1 - cov) * fill
    return to_latent(torch.cat([rgbd, cov], 1), factor)


HOLE_BASES = ("context", "inpaint", "far", "mirror")


def composite(frame: torch.Tensor, memory: torch.Tensor, factor: int = 4) -> torch.Tensor:
    """The shown frame (B, 80, h, w): rgb and disparity = g * memory + (1 - g) * generated where
    the memory covers (g the generated gate, clamped to [0, 1]); its gate channel is that g (0
    where the memory does not cover), which tells the insert where the model replaced the memory
    (``generated_insert``; ``as_context`` drops it before the frame becomes context). The depth
    follows the colour, so what the memory kept goes back in at its own depth (no point is taken
    for a moved body by the sampler's small depth noise)."""
    f, m = to_image(frame, factor), to_image(memory, factor)
    g = f[:, 4:5].clamp(0, 1) * (m[:, 3:4] > 0.5).float()
    rgbd = g * torch.cat([m[:, :3], m[:, 4:5]], 1) + (1 - g) * f[:, :4]
    return to_latent(torch.cat([rgbd, g], 1), factor)


def as_context(latent: torch.Tensor, factor: int = 4) -> torch.Tensor:
    """A frame's latent (B, 80, h, w) as a context frame: its gate channels zeroed (a context
    carries no gate; the same value in training, rollouts and play)."""
    gate = (IMAGE_CHANNELS - 1) * factor * factor
    return torch.cat([latent[:, :gate], torch.zeros_like(latent[:, gate:])], 1)


def gate_target(memory_rgb: torch.Tensor, coverage: torch.Tensor, rgb: torch.Tensor, tolerance: float = 0.04) -> torch.Tensor:
    """(B, 1, H, W): 1 where the memory covers and its colour is within ``tolerance`` (mean over
    RGB, in [0, 1]) of the true frame's: where showing the memory is right."""
    close = (memory_rgb.float() - rgb.float()).abs().mean(1, keepdim=True) < tolerance
    return ((coverage > 0.5) & close).float()


@functools.lru_cache(maxsize=8)
def _pixel_rays(K: tuple[float, ...], H: int, W: int) -> torch.Tensor:
    """(3, H * W) the OpenGL camera ray through each pixel centre (depth 1 along the view axis) of
    intrinsics ``K`` (its 9 values, row-major; cached: read only)."""
    ys, xs = torch.meshgrid(torch.arange(H) + 0.5, torch.arange(W) + 0.5, indexing="ij")
    inv = torch.linalg.inv(torch.tensor(K).reshape(3, 3))
    return _GL @ inv @ torch.stack([xs.flatten(), ys.flatten(), torch.ones(H * W)])


def floor_depth(K: torch.Tensor, world_to_camera: torch.Tensor, H: int, W: int, floor_z: float = 0.0) -> torch.Tensor:
    """(H, W) depth along the view axis of the floor (the world plane z = ``floor_z``) seen by the
    camera ``world_to_camera`` (4, 4, OpenGL) with intrinsics ``K`` (0 where the ray misses it
    within MAX_DEPTH): the floor-plus-far-background scene ``ground_warp`` assumes, exact where the
    floor shows and an upper bound where something stands on it. Any camera: the kinematic one
    (``kinematic_view`` stands at eye height over z = 0) or one a learned motion moved."""
    rays = _pixel_rays(tuple(K.float().flatten().tolist()), H, W)
    view = world_to_camera.float()
    down = (view[:3, :3].T @ rays)[2]            # world z per unit of view depth
    height = float(camera_centre(view)[2]) - floor_z
    depth = torch.where((down < -1e-6) & (height > 0), height / (-down).clamp(min=1e-6), torch.zeros_like(down))
    return torch.where(depth > MAX_DEPTH, torch.zeros_like(depth), depth).reshape(H, W)


def clamp_to_floor(depth: torch.Tensor, floor: torch.Tensor) -> torch.Tensor:
    """A generated depth no farther than the floor along its ray (nothing in the arena lies below
    it), and the floor where the generation says sky but the ray meets the floor."""
    hit = floor > 0
    return torch.where(hit & ((depth <= 0) | (depth > floor)), floor, depth)


def kinematic_view(pose: torch.Tensor, pitch_degrees: float, eye_height: float) -> torch.Tensor:
    """world_to_camera (4, 4), OpenGL, of the dead-reckoned pose (1, 3) [x, y, yaw] (``advance_pose``)
    at ``pitch_degrees``, the camera ``eye_height`` above the floor (world z up)."""
    R = _GL @ camera_rotation(pose[:, 2].float(), torch.deg2rad(torch.tensor([float(pitch_degrees)])))[0]
    c = torch.tensor([float(pose[0, 0]), float(pose[0, 1]), float(eye_height)])
    view = torch.eye(4)
    view[:3, :3], view[:3, 3] = R, -R @ c
    return view


def clean_depth(depth: torch.Tensor, window: int, tolerance: float, where: torch.Tensor | None = None) -> torch.Tensor:
    """A generated depth map (H, W) metres, 0 on the sky, made fit to lift into points: each pixel
    takes the median of the non-sky depths in its ``window`` x ``window`` patch, and a pixel more
    than ``tolerance`` (relative) from that median gets 0 (it is not inserted). A one-step
    generator's depth is grainy where it invents content; lifted as it is, the grain becomes a
    cloud of floating points whose splats, seen from the side, are large squares of wrong colour.
    ``where`` (H, W) bool: only these pixels are cleaned (the rest come back 0: what is not
    inserted need not be cleaned). ``window`` 0 or 1: unchanged."""
    if window <= 1:
        return depth if where is None else depth * where
    if window % 2 == 0:
        raise ValueError(f"window: must be odd, got {window}")
    H, W = depth.shape
    r = window // 2
    nan = torch.where(depth > 0, depth.float(), torch.full_like(depth, float("nan")))
    padded = F.pad(nan[None, None], (r,) * 4, mode="replicate").reshape(-1)
    todo = (depth > 0) if where is None else (depth > 0) & where
    i = todo.reshape(-1).nonzero().squeeze(1)
    median = padded[padded_windows(i, H, W, r)].nanmedian(-1).values
    d = depth.reshape(-1).index_select(0, i)
    keep = (d - median).abs() <= tolerance * median
    out = torch.zeros(H * W, dtype=depth.dtype)
    out[i[keep]] = median[keep].to(depth.dtype)
    return out.reshape(H, W)


class ObservedFrame(NamedTuple):
    """A frame whose depth was observed, not generated (a session's start frame): ``K`` (3, 3),
    ``view`` world_to_camera (4, 4), ``depth`` (H, W) metres, 0 on the sky."""
    K: torch.Tensor
    view: torch.Tensor
    depth: torch.Tensor


def in_observed_free_space(depth: torch.Tensor, K: torch.Tensor, view: torch.Tensor, observed: ObservedFrame,
                           sky_depth: float, relative: float = 0.05, metres: float = 0.1) -> torch.Tensor:
    """(H, W) bool: where the points of a depth map (H, W) seen by camera ``view`` with ``K`` lie in
    space the ``observed`` frame saw through: inside its view, in front of the surface it measured
    on that ray by more than ``relative`` of that depth plus ``metres``. Its sky counts as seen
    through up to ``sky_depth`` (the memory's backdrop; 0: without end). Such a point contradicts
    an observation; a generated frame's depth guessed too near puts its content there, where it
    then hides what the observed frame showed."""
    H, W = depth.shape
    cam = camera_points(depth, K).reshape(3, -1)
    world = torch.linalg.inv(view.double()) @ torch.cat([cam, torch.ones(1, cam.shape[1], dtype=cam.dtype)])
    key = (observed.view.double() @ world)[:3]
    d = -key[2]
    kK = observed.K.double()
    u = kK[0, 0] * key[0] / d.clamp(min=1e-6) + kK[0, 2]
    v = kK[1, 2] - kK[1, 1] * key[1] / d.clamp(min=1e-6)
    kH, kW = observed.depth.shape
    inside = (depth.flatten() > 0) & (d > 0.05) & (u >= 0) & (u < kW) & (v >= 0) & (v < kH)
    seen = observed.depth.double()[v.clamp(0, kH - 1).long(), u.clamp(0, kW - 1).long()]
    far = torch.full_like(seen, sky_depth if sky_depth > 0 else float("inf"))
    surface = torch.where(seen > 0, seen, far)
    return (inside & (d < surface * (1 - relative) - metres)).reshape(H, W)


def generated_insert(image: torch.Tensor, K: torch.Tensor, view: torch.Tensor, covered: torch.Tensor | None,
                     floor_clamp: bool, sky_depth: float, replace_below: float, depth_median: int = 0,
                     depth_outlier: float = 0.1, observed: ObservedFrame | None = None,
                     drawn_shell: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What of a generated frame goes into the scene memory, as play inserts it: ``image`` (5, H, W)
    in [0, 1] (``to_image`` of the shown latent: rgb, disparity, the gate ``composite`` used) seen
    by camera ``view`` (4, 4) with ``K``; ``covered`` (H, W): where the memory covered the view
    before the frame (None: nowhere). Returns rgb uint8 (H, W, 3), depth (H, W) metres (0 where
    nothing goes in) and the see-through mask (H, W) bool for ``SceneMemory.insert``:

    * the generated depth, no farther than the floor along its ray (``floor_clamp``), cleaned
      (``clean_depth`` with ``depth_median``, ``depth_outlier``: grain out, outliers not
      inserted), the sky as a backdrop ``sky_depth`` away (> 0);
    * where the memory did not cover: all of it;
    * where it covered: only where the gate is below ``replace_below`` (the model replaced what
      the memory showed: a body that moved, a coarse or wrong surface), and only there may the
      frame remove the points it sees past. Where the gate kept the memory, nothing: the memory
      has it. ``replace_below`` 0: holes only;
    * with an ``observed`` frame: nothing where it saw through (``in_observed_free_space``);
    * with ``drawn_shell`` (H, W): the depth at which the view sees the walls or the floor drawn
      into every render (``RegionShell.drawn_depth``; 0: neither there), nothing that lies on them
      (no nearer than ``SHELL_SLACK`` of that depth): a point stored there would hide them from then on."""
    H, W = image.shape[-2:]
    rgb = (image[:3].clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0)
    depth = decode_depth(image[3].clamp(0, 1))
    if floor_clamp:
        depth = clamp_to_floor(depth, floor_depth(K, view, H, W))
    covered = torch.zeros(H, W) if covered is None else covered.float()
    replaced = (covered > 0.5) & (image[4] < replace_below)
    goes_in = (covered <= 0.5) | replaced
    sky = (depth <= 0) & goes_in
    depth = clean_depth(depth, depth_median, depth_outlier, where=goes_in)
    if sky_depth > 0:
        depth = torch.where(sky, torch.full_like(depth, sky_depth), depth)
    if observed is not None:
        depth = torch.where(in_observed_free_space(depth, K, view, observed, sky_depth), torch.zeros_like(depth), depth)
    if drawn_shell is not None:
        if drawn_shell.shape != (H, W):
            raise ValueError(f"drawn_shell: expected ({H}, {W}), got {tuple(drawn_shell.shape)}")
        on_shell = (drawn_shell > 0) & (depth >= drawn_shell * (1 - SHELL_SLACK))
        depth = torch.where(on_shell, torch.zeros_like(depth), depth)
    return rgb, depth, replaced


def frame_as_memory(rgb: torch.Tensor, depth: torch.Tensor, sky_depth: float
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A frame (rgb (B, 3, H, W) in [0, 1], depth (B, 1, H, W) metres, 0 on the sky) as the memory
    render of its own view: (rgb, coverage, depth), covered where it has geometry and, with
    ``sky_depth`` > 0, on the sky too, stored as a backdrop that far away. What the memory shows
    a camera that has not moved since that frame (the exact picture, without a splat's
    resampling), as training's standing-still samples show it."""
    seen = torch.where(depth > 0, depth, torch.full_like(depth, sky_depth)) if sky_depth > 0 else depth
    coverage = (seen > 0).to(rgb.dtype)
    return rgb * coverage, coverage, seen


def same_view(a: torch.Tensor, b: torch.Tensor, metres: float = 2e-3, degrees: float = 0.05) -> bool:
    """Whether two world_to_camera (4, 4) matrices are one view for the memory: camera centres
    within ``metres`` and rotations within ``degrees`` (a sub-pixel move at any size we play)."""
    move = float((camera_centre(a) - camera_centre(b)).norm())
    cos = float(((a[:3, :3] @ b[:3, :3].T).trace() - 1) / 2)          # of the angle between the two rotations
    return move <= metres and cos >= math.cos(math.radians(degrees))


def fill_disocclusions(rgb: torch.Tensor, coverage: torch.Tensor, depth: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A memory render (rgb (B, 3, H, W), coverage and depth (B, 1, H, W)) whose disocclusions (the
    holes beside a depth edge, away from the view's edge: ``far_side_fill``) are filled with the far
    side's colour and depth and count as covered. What a step past a near surface uncovers lies
    behind its edge, and the memory shows it beside the hole: the network is then shown it there as
    memory, to refine, instead of a hole to generate. Pure: new tensors."""
    far, beside = far_side_fill(torch.cat([rgb, encode_depth(depth)], 1), coverage)
    return (torch.where(beside, far[:, :3], rgb), torch.where(beside, torch.ones_like(coverage), coverage),
            torch.where(beside, decode_depth(far[:, 3:4]), depth))


def fill_strips(rgb: torch.Tensor, coverage: torch.Tensor, depth: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A memory render (rgb (B, 3, H, W), coverage and depth (B, 1, H, W)) whose side strips (the
    uncovered run from the view's left or right edge in each row, which a turn or a strafe brings
    in: ``edge_strip_fill``) take the covered view beside them mirrored, colour and depth, and
    count as covered: the network refines the view's own texture continued there instead of
    generating the strip. Pure: new tensors."""
    mirrored, strip = edge_strip_fill(torch.cat([rgb, encode_depth(depth)], 1), coverage)
    return (torch.where(strip, mirrored[:, :3], rgb), torch.where(strip, torch.ones_like(coverage), coverage),
            torch.where(strip, decode_depth(mirrored[:, 3:4]), depth))


def shown_render(rgb: torch.Tensor, coverage: torch.Tensor, depth: torch.Tensor, config
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A memory render (rgb (B, 3, H, W), coverage and depth (B, 1, H, W)) as a ``WorldModelConfig``'s
    network is shown it, in play, in the cached training renders and in the training rollouts
    alike: its pinholes filled (``memory_fill_pinholes`` passes, ``fill_pinholes``), then with
    ``memory_fill_disocclusions`` its disocclusions (``fill_disocclusions``), then with
    ``memory_fill_strips`` a turn's side strips (``fill_strips``)."""
    rgb, coverage, depth = fill_pinholes(rgb, coverage, depth, config.memory_fill_pinholes)
    if config.memory_fill_disocclusions:
        rgb, coverage, depth = fill_disocclusions(rgb, coverage, depth)
    if config.memory_fill_strips:
        rgb, coverage, depth = fill_strips(rgb, coverage, depth)
    return rgb, coverage, depth


def memory_config(config, **overrides) -> SceneMemoryConfig:
    """The scene memory's config from a ``WorldModelConfig``: its capacity, insert stride, colour
    blend (``memory_tent``, ``memory_tent_min_radius``) and sky dome (``memory_sky_dome``: drawn
    ``memory_sky_depth`` away; ``memory_sky_extend``); ``overrides`` set other fields. The cached
    training renders and play share it."""
    dome = config.memory_sky_depth if config.memory_sky_dome else 0.0
    return SceneMemoryConfig(**{"max_points": config.memory_max_points, "stride": config.memory_stride,
                                "tent": config.memory_tent, "tent_min_radius": config.memory_tent_min_radius,
                                "sky_dome": dome, "sky_extend": config.memory_sky_extend, **overrides})


def session_memory(config) -> SceneMemory:
    """An empty scene memory configured as a session's, from a ``WorldModelConfig``
    (``memory_config``) and whether a generated frame may remove points (``WorldSession``, and the
    training rollouts that play as it does)."""
    return SceneMemory(memory_config(config, see_through=config.memory_see_through))

