"""The walkable region's shell: its border walls (``RegionWalls``) and its floor (``RegionFloor``),
learnt from a session's start frame and drawn into every memory render where the memory has
nothing nearer; the walls' far-seen texture less the start frame's haze (learnt from the floor).

::

    shell = region_shell(region, to_region, memory, config, start_view)   # None: neither asked for
    rgb, coverage, depth = shell.draw(rgb, coverage, depth, K, view)       # view: the session's world_to_camera
    drawn = shell.drawn_depth(K, view, H, W)                               # (H, W) metres, 0: neither drawn there

A session's memory lives in its own world (the start camera at eye height over z = 0); the
region, the walls and the floor live in the recordings' world. ``to_region`` (4, 4) takes the
session's world to the recordings'.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from alaya.data.walkable_region import WalkableRegion
from alaya.models.camera_constraints import camera_centre
from alaya.models.region_floor import RegionFloor
from alaya.models.region_walls import RegionWalls
from alaya.models.wall_detail import WallDetail

COARSE_REACH = 2            # pixels around a magnified point that its gaps' fill may have covered
FLOOR_MARGIN = 0.6           # metres beyond the region's edges the floor reaches when no walls are drawn


class RegionShell:
    """Walls and/or floor (None: not drawn) and the transform from the session's world to theirs."""

    def __init__(self, walls: RegionWalls | None, floor: RegionFloor | None, to_region: torch.Tensor) -> None:
        self.walls, self.floor = walls, floor
        self.from_region = torch.linalg.inv(to_region.double())

    def draw(self, rgb: torch.Tensor, coverage: torch.Tensor, depth: torch.Tensor, K, view,
             coarse: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The render (rgb (1, 3, H, W), coverage, depth (1, 1, H, W)) from the session camera
        ``view`` (4, 4 world_to_camera, session world) with the walls, then the floor, drawn in;
        where ``coarse`` (1, 1, H, W) bool (``coarse_points``), also over the render's points on them."""
        region_view = torch.as_tensor(view).double() @ self.from_region
        for part in (self.walls, self.floor):
            if part is not None:
                rgb, coverage, depth = part.draw(rgb, coverage, depth, K, region_view, coarse)
        return rgb, coverage, depth

    def drawn_depth(self, K, view, H: int, W: int) -> torch.Tensor:
        """(H, W) metres along the view axis at which the camera ``view`` (4, 4 world_to_camera,
        session world) sees the walls or the floor drawn, 0 where it sees neither."""
        region_view = torch.as_tensor(view).double() @ self.from_region
        depth = np.zeros((H, W))
        for part in (self.floor, self.walls):          # (a ray meets a wall only past the floor's edge)
            if part is not None:
                at = part.depth_at(K, region_view, H, W)
                depth = np.where(at > 0, at, depth)
        return torch.from_numpy(depth).float()


def coarse_points(extent: torch.Tensor, above: float, reach: int = COARSE_REACH) -> torch.Tensor:
    """(1, 1, H, W) bool: the pixels of a memory render within ``reach`` pixels of one whose point
    spans more than ``above`` pixels now (``extent`` (1, 1, H, W), ``MemoryView.extent``; about 1
    at the view that inserted it): a surface magnified, with the gaps between its blocks that the
    render's hole filling closed. A shell draws its walls and floor over such points on them: a
    wall or floor the start frame showed far away and hazy, walked up to, shows its texture
    (dehazed, with its detail) rather than that frame's points blown up into blocks."""
    wide = (extent > above).float()
    return F.max_pool2d(wide, 2 * reach + 1, stride=1, padding=reach) > 0


def region_shell(region: WalkableRegion | None, to_region: torch.Tensor | None, memory, config,
                 start_view: torch.Tensor, wall_detail: WallDetail | None = None,
                 style: torch.Tensor | None = None, seed: int = 0) -> RegionShell | None:
    """The shell ``config`` (a ``WorldModelConfig``: ``memory_wall_margin``, ``memory_wall_borrow``,
    ``memory_wall_facing``, ``memory_wall_material``, ``memory_wall_detail_among``, ``memory_floor``,
    ``eye_height``; ``memory_fog``: the haze as the recorded style's fog, ``WallDetail.fog_for``, else
    as the fog of the memory dome's horizon colour) asks for, learnt from ``memory``'s
    points (the start frame's, session world) seen from ``start_view`` (session world_to_camera), the walls with
    ``wall_detail``'s close-up detail where given, and those no frame showed in the colour that the
    recorded style nearest the prompt's embedding ``style`` (text_dim,) gives walls facing their way
    (``WallDetail.facing_for``), drawn as recorded walls' materials picked from ``seed``
    (``memory_wall_material``); None when it asks for neither, or the session has no region or no
    transform to it."""
    if region is None or to_region is None or not (config.memory_wall_margin > 0 or config.memory_floor):
        return None
    R = to_region.double()
    xyz = (R[:3, :3] @ memory.xyz.double() + R[:3, 3:]).numpy()
    rgb = memory.rgb.numpy()
    eye = (R[:3, :3] @ camera_centre(torch.as_tensor(start_view).double()) + R[:3, 3]).numpy()
    floor = RegionFloor(region, config.memory_wall_margin or FLOOR_MARGIN, eye_height=config.eye_height)
    fog = wall_detail.fog_for(style) if config.memory_fog and wall_detail is not None and style is not None else None
    fog_colour = memory.dome.horizon_colour() if config.memory_fog and fog is None and memory.dome is not None else None
    floor.learn(xyz, rgb, eye, fog_colour, fog)    # (learnt for its haze, which the walls take, even when not drawn)
    walls = None
    if config.memory_wall_margin > 0:
        facing = None
        if config.memory_wall_facing and wall_detail is not None and style is not None:
            facing = wall_detail.facing_for(style)
        walls = RegionWalls(region, config.memory_wall_margin, borrow=config.memory_wall_borrow, detail=wall_detail,
                            facing=facing, materials=config.memory_wall_material, seed=seed,
                            detail_among=config.memory_wall_detail_among)
        walls.learn(xyz, rgb, eye, floor.haze)
    return RegionShell(walls, floor if config.memory_floor else None, to_region)
