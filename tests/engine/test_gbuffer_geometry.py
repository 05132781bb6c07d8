"""The rasterizer's G-buffer agrees with geometry derived independently from depth and poses."""

import numpy as np
import pytest

from alaya.data.clipio import check_contract, check_invariants
from alaya.data.geometry import camera_points, normals_from_depth, project, reproject_flow
from alaya.engine.materials import MATERIALS
from alaya.engine.stream import EngineStream, StreamConfig


def record(seed, rig, frames, ctx, size=96):
    stream = EngineStream(seed, StreamConfig(size=size, rig=rig), ctx)
    out = []
    for _ in range(frames):
        f = stream.step()
        f["geoms"] = stream.world.geom_matrices()
        out.append(f)
    return stream, out


def interior(instance, mask):
    ok = mask.astype(bool).copy()
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            ok &= np.roll(np.roll(instance, dy, 0), dx, 1) == instance
    ok[0, :] = ok[-1, :] = ok[:, 0] = ok[:, -1] = False
    return ok


@pytest.fixture(scope="module", params=["orbit", "fly", "walk"])
def recorded(request, gl_context):
    return record(seed=11, rig=request.param, frames=6, ctx=gl_context)


def test_normals_are_unit_and_match_depth(recorded):
    stream, frames = recorded
    for f in frames[1:]:
        n = f["normal"].astype(np.float32)
        m = f["mask"].astype(bool)
        assert m.mean() > 0.2, "the camera should see geometry"
        assert np.abs(np.linalg.norm(n[m], axis=-1) - 1).max() < 5e-3
        assert np.all(n[~m] == 0)
        derived = normals_from_depth(f["depth"], stream.K)
        keep = interior(f["instance"], m)
        angle = np.degrees(np.arccos(np.clip((n * derived).sum(-1), -1, 1)))[keep]
        assert keep.sum() > 500
        assert np.median(angle) < 10.0, f"median normal error {np.median(angle):.2f} deg"


def test_motion_matches_reprojection_on_static_surfaces(recorded):
    stream, frames = recorded
    static = np.isin(frames[0]["instance"], list(stream.world.static_instances()))
    for prev, cur in zip(frames[:-1], frames[1:]):
        flow = reproject_flow(cur["depth"], stream.K, cur["world_to_camera"], prev["world_to_camera"])
        static = np.isin(cur["instance"], list(stream.world.static_instances())) & cur["mask"].astype(bool)
        # visible in both frames: the reprojected point lands on the previous frame's surface
        H, W = cur["depth"].shape
        target = np.stack(np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5), -1) + flow
        inside = np.all((target >= 0) & (target < [W, H]), axis=-1) & np.isfinite(target).all(-1)
        tx = np.clip(np.nan_to_num(target[..., 0]).astype(int), 0, W - 1)
        ty = np.clip(np.nan_to_num(target[..., 1]).astype(int), 0, H - 1)
        pts = camera_points(cur["depth"], stream.K)
        cam_to_world = np.linalg.inv(cur["world_to_camera"].astype(np.float64))
        world = pts @ cam_to_world[:3, :3].T + cam_to_world[:3, 3]
        prev_cam = world @ prev["world_to_camera"][:3, :3].T.astype(np.float64) + prev["world_to_camera"][:3, 3]
        visible = inside & (np.abs(prev["depth"][ty, tx] - (-prev_cam[..., 2])) < 0.05 * np.maximum(-prev_cam[..., 2], 0.1))
        keep = static & visible
        assert keep.sum() > 300
        err = np.linalg.norm(cur["motion"].astype(np.float32) - flow, axis=-1)[keep]
        assert np.median(err) < 0.5, f"median motion error {np.median(err):.3f} px"
        # background (points at infinity) moves with camera rotation only
        bg = ~cur["mask"].astype(bool) & np.isfinite(flow).all(-1)
        if bg.sum() > 50:
            assert np.median(np.linalg.norm(cur["motion"].astype(np.float32) - flow, axis=-1)[bg]) < 0.5


def test_motion_follows_moving_objects(gl_context):
    stream, frames = record(seed=4, rig="orbit", frames=8, ctx=gl_context)
    world = stream.world
    geom_of_instance = {g.instance: i for i, g in enumerate(stream.scene.geoms)}
    static = world.static_instances()
    checked = 0
    for prev, cur in zip(frames[:-1], frames[1:]):
        pts = camera_points(cur["depth"], stream.K)
        c2w = np.linalg.inv(cur["world_to_camera"].astype(np.float64))
        P = pts @ c2w[:3, :3].T + c2w[:3, 3]
        for inst in np.unique(cur["instance"]):
            if inst == 0 or inst in static:
                continue
            g = geom_of_instance[int(inst)]
            rel = prev["geoms"][g].astype(np.float64) @ np.linalg.inv(cur["geoms"][g].astype(np.float64))
            sel = interior(cur["instance"], cur["mask"]) & (cur["instance"] == inst)
            if sel.sum() < 10:
                continue
            Pp = P[sel] @ rel[:3, :3].T + rel[:3, 3]
            cam_prev = Pp @ prev["world_to_camera"][:3, :3].T.astype(np.float64) + prev["world_to_camera"][:3, 3]
            uv_prev = project(cam_prev, stream.K)
            v, u = np.nonzero(sel)
            expect = uv_prev - np.stack([u + 0.5, v + 0.5], -1)
            err = np.linalg.norm(cur["motion"][sel].astype(np.float32) - expect, axis=-1)
            assert np.median(err) < 0.5, f"instance {inst}: motion error {np.median(err):.3f} px"
            checked += 1
    assert checked >= 3, "expected some moving objects in view"


def test_first_frame_has_zero_motion_and_contract_holds(gl_context):
    from alaya.engine.stream import render_clip
    clip = render_clip(2, 3, ("clear_noon", "toon"), StreamConfig(size=64, rig="fly"), gl_context)
    check_contract(clip)
    assert check_invariants(clip, num_materials=len(MATERIALS)) == []
    assert np.all(clip["motion"][0] == 0)
    assert clip["K"][0, 2] == 32 and clip["K"][1, 2] == 32
