"""``view_input``: world-space normals and view rays from the clip's camera, on known cameras."""

import numpy as np
import pytest
import torch

from alaya.codecs.gbuffer import VIEW_INPUT_CHANNELS, view_input

K = np.array([[16.0, 0, 8], [0, 16.0, 8], [0, 0, 1]], np.float32)


def camera(yaw_degrees: float, position=(0.0, 0.0, 0.0)) -> np.ndarray:
    """world_to_camera of a camera turned by ``yaw`` about the world's up axis (z)."""
    a = np.radians(yaw_degrees)
    c2w = np.eye(4)
    c2w[:3, :3] = [[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]]
    c2w[:3, 3] = position
    return np.linalg.inv(c2w)[None].astype(np.float32)


def normals(n) -> np.ndarray:
    return np.broadcast_to(np.asarray(n, np.float16), (1, 16, 16, 3)).copy()


def test_identity_camera_keeps_normals_and_gives_pinhole_rays():
    x = view_input(normals((0, 0, 1)), K, camera(0))
    assert x.shape == (1, VIEW_INPUT_CHANNELS, 16, 16)
    assert torch.allclose(x[0, 0:3], torch.tensor([0.0, 0, 1])[:, None, None])
    v, u = 3, 12                                            # row 3 is above the centre: y > 0
    ray = np.array([(u + 0.5 - 8) / 16, -(v + 0.5 - 8) / 16, -1.0])
    assert np.allclose(x[0, 3:6, v, u].numpy(), ray / np.linalg.norm(ray), atol=1e-6)
    assert np.allclose(x[0, 6:8, v, u].numpy(), ray[:2], atol=1e-6)
    assert torch.allclose(x[0, 3:6].norm(dim=0), torch.ones(16, 16))


def test_turning_the_camera_turns_world_normals_not_camera_ones():
    """A surface facing the camera's right is world +x for a camera looking down -z with x
    right, and world +y once the camera has turned 90 degrees left about up; translation does
    not matter; the image-position channels do not change."""
    right = normals((1, 0, 0))
    a, b = view_input(right, K, camera(0)), view_input(right, K, camera(90, (5.0, -2.0, 1.0)))
    assert torch.allclose(a[0, 0:3, 0, 0], torch.tensor([1.0, 0, 0]), atol=1e-6)
    assert torch.allclose(b[0, 0:3, 0, 0], torch.tensor([0.0, 1, 0]), atol=1e-6)
    assert torch.allclose(a[0, 6:8], b[0, 6:8])
    assert not torch.allclose(a[0, 3:6], b[0, 3:6])


def test_background_has_no_normal():
    x = view_input(normals((0, 0, 0)), K, camera(30))
    assert not x[0, 0:3].any() and x[0, 3:6].any()


def test_bad_cameras_are_named():
    with pytest.raises(ValueError, match="K"):
        view_input(normals((0, 0, 1)), K[:2], camera(0))
    with pytest.raises(ValueError, match="world_to_camera"):
        view_input(normals((0, 0, 1)), K, np.concatenate([camera(0), camera(1)]))
    with pytest.raises(ValueError, match="focal"):
        view_input(normals((0, 0, 1)), np.zeros((3, 3)), camera(0))
    bad = normals((0, 0, 1))
    bad[0, 2, 2] = np.nan
    with pytest.raises(ValueError, match="normal"):
        view_input(bad, K, camera(0))


def test_model_view_input_adds_the_gbuffer_and_zeroes_an_unknown_camera():
    from alaya.codecs.gbuffer import PIXEL_VIEW_CHANNELS, gbuffer_input, model_view_input
    rng = np.random.default_rng(0)
    frame = {"normal": normals((0, 0, 1)), "depth": rng.uniform(1, 5, (1, 16, 16)).astype(np.float32),
             "albedo": rng.integers(0, 255, (1, 16, 16, 3), dtype=np.uint8),
             "roughness": rng.integers(0, 255, (1, 16, 16), dtype=np.uint8),
             "metallic": rng.integers(0, 255, (1, 16, 16), dtype=np.uint8)}
    full = model_view_input({**frame, "K": K, "world_to_camera": camera(30)}, PIXEL_VIEW_CHANNELS)
    assert full.shape == (1, PIXEL_VIEW_CHANNELS, 16, 16)
    assert torch.equal(full[:, :VIEW_INPUT_CHANNELS], view_input(frame["normal"], K, camera(30)))
    assert torch.equal(full[:, VIEW_INPUT_CHANNELS:], gbuffer_input(frame))
    unknown = model_view_input(frame, PIXEL_VIEW_CHANNELS)          # no camera
    assert not unknown[:, :VIEW_INPUT_CHANNELS].any() and torch.equal(unknown[:, VIEW_INPUT_CHANNELS:], full[:, VIEW_INPUT_CHANNELS:])
    assert model_view_input(frame, 0) is None
    with pytest.raises(ValueError, match="view channels"):
        model_view_input(frame, 5)


def test_all_finite_catches_every_bad_value_and_passes_large_finite_ones():
    from alaya.codecs.gbuffer import all_finite
    for dtype in (np.float16, np.float32):
        a = np.ones((8, 8, 3), dtype)
        assert all_finite(a) and all_finite(torch.from_numpy(a))
        for bad in (np.nan, np.inf, -np.inf):
            b = a.copy()
            b[3, 4, 1] = bad
            assert not all_finite(b) and not all_finite(torch.from_numpy(b))
    big = np.full((64, 64), np.finfo(np.float32).max, np.float32)     # the sum overflows; every value is finite
    assert all_finite(big) and all_finite(torch.from_numpy(big))
    assert all_finite(np.zeros((4, 4), np.uint8))


def test_fast_view_input_matches_the_textbook_formula():
    rng = np.random.default_rng(0)
    n = rng.normal(size=(2, 16, 32, 3)).astype(np.float32)
    K = np.array([[20.0, 0, 15.5], [0, 22.0, 8.0], [0, 0, 1]], np.float32)
    w2c = np.concatenate([camera(30), camera(-75, (1.0, 2.0, 0.5))])
    x = view_input(n, K, w2c)
    R = np.transpose(w2c[:, :3, :3], (0, 2, 1))                  # camera -> world
    v, u = np.meshgrid(np.arange(16) + 0.5, np.arange(32) + 0.5, indexing="ij")
    xy = np.stack([(u - K[0, 2]) / K[0, 0], -(v - K[1, 2]) / K[1, 1]], -1)
    ray = np.concatenate([xy, -np.ones((16, 32, 1))], -1)
    ray /= np.linalg.norm(ray, axis=-1, keepdims=True)
    expect = np.concatenate([np.einsum("nij,nhwj->nhwi", R, n), np.einsum("nij,hwj->nhwi", R, ray),
                             np.broadcast_to(xy, (2, 16, 32, 2))], -1).transpose(0, 3, 1, 2)
    assert np.allclose(x.numpy(), expect, atol=1e-5)


def test_decoder_guide_positions_follow_static_surfaces_and_vanish_without_a_camera(tiny_dataset):
    """A static surface point has one world position: seen at frame t and, through the engine's
    backward motion, at frame t-1. Without a camera the view and position channels are zero."""
    import numpy as np
    import torch

    from alaya.codecs.gbuffer import (CAMERA_GUIDE_CHANNELS, GUIDE_CHANNELS, PIXEL_VIEW_CHANNELS, POSITION_CHANNELS,
                                      VIEW_INPUT_CHANNELS, decoder_guide)
    from alaya.data.dataset import ClipDataset

    ds = ClipDataset(tiny_dataset)
    clip = ds.load(ds.ids("train")[0])
    guide = decoder_guide(clip)
    T, _, H, W = guide.shape
    assert guide.shape[1] == GUIDE_CHANNELS
    pos = guide[:, POSITION_CHANNELS]
    assert float(pos[torch.from_numpy(clip["mask"] == 0)[:, None].expand_as(pos)].abs().max()) == 0
    ys, xs = np.nonzero(clip["mask"][1])
    errors = []
    for y, x in zip(ys, xs):
        dx, dy = clip["motion"][1, y, x].astype(float)
        sy, sx = int(round(y + dy)), int(round(x + dx))
        if 0 <= sy < H and 0 <= sx < W and clip["mask"][0, sy, sx] and clip["instance"][0, sy, sx] == clip["instance"][1, y, x]:
            errors.append(float((pos[1, :, y, x] - pos[0, :, sy, sx]).abs().max()))
    assert errors and np.median(errors) < 0.05          # under half a metre (a pixel's footprint)
    blind = decoder_guide({k: v for k, v in clip.items() if k not in ("K", "world_to_camera")})
    assert float(blind[:, :VIEW_INPUT_CHANNELS].abs().max()) == 0 and float(blind[:, CAMERA_GUIDE_CHANNELS].abs().max()) == 0
    assert torch.equal(blind[:, VIEW_INPUT_CHANNELS:PIXEL_VIEW_CHANNELS], guide[:, VIEW_INPUT_CHANNELS:PIXEL_VIEW_CHANNELS])
    assert torch.equal(blind[:, CAMERA_GUIDE_CHANNELS.stop:], guide[:, CAMERA_GUIDE_CHANNELS.stop:])   # the breaks need no camera


def test_sky_stars_are_where_the_reference_draws_its_stars(styles128_dataset):
    """The guide's star channel is the world's star field: in the moonlit reference frames nearly
    every pixel it marks is a bright point against its sky neighbours, it marks nothing on
    geometry, and clear noon (the same sky, no stars shown) has no bright points there."""
    import torch

    from alaya.codecs.gbuffer import STAR_CHANNEL, decoder_guide
    from alaya.data.dataset import ClipDataset

    ds = ClipDataset(styles128_dataset)
    marked = hits = 0
    for cid in ds.ids("train") + ds.ids("val") + ds.ids("test"):
        clip = ds.load(cid)
        styles = [str(s) for s in clip["styles"]]
        stars = decoder_guide(clip)[:, STAR_CHANNEL] > 0.5
        assert not stars[torch.from_numpy(clip["mask"] > 0)].any()
        luma = torch.from_numpy(clip["rgb"][styles.index("moonlit_night")]).float().mean(-1)
        around = torch.nn.functional.avg_pool2d(luma[:, None], 3, 1, 1, count_include_pad=False)[:, 0]
        bright = luma - around > 10
        marked += int(stars.sum())
        hits += int((stars & bright).sum())
        noon = torch.from_numpy(clip["rgb"][styles.index("clear_noon")]).float().mean(-1)
        noon_around = torch.nn.functional.avg_pool2d(noon[:, None], 3, 1, 1, count_include_pad=False)[:, 0]
        assert int((stars & (noon - noon_around > 10)).sum()) <= 0.05 * max(int(stars.sum()), 1)
    assert marked > 20 and hits >= 0.85 * marked


def test_surface_breaks_mark_silhouettes_and_creases_one_pixel_wide():
    import torch

    from alaya.codecs.gbuffer import surface_breaks

    depth = torch.full((1, 8, 8), 2.0)
    depth[:, :, 5:] = 6.0                               # a depth step between columns 4 and 5
    depth[:, 0, :] = 0.0                                # the top row is sky
    normal = torch.zeros(1, 3, 8, 8)
    normal[:, 2] = 1.0
    normal[:, :, 4:, :] = torch.tensor([0.0, 1.0, 0.0])[:, None, None]   # a crease between rows 3 and 4
    normal[:, :, 0] = 0.0
    b = surface_breaks(depth, normal)
    sil, crease = b[0, 0], b[0, 1]
    assert float(sil[2:, 4].min()) > 0.99 and float(sil[2:, 5].min()) > 0.99        # both sides of the step
    assert float(sil[2:, :3].max()) == 0 and float(sil[2:, 6:].max()) == 0
    assert float(sil[0].min()) == 1 and float(sil[1].min()) == 1                   # sky meets geometry
    assert float(crease[3:5, 1:].min()) == 0.5 and float(crease[5:, :].max()) == 0 and float(crease[0].max()) == 0
    assert b.min() >= 0 and b.max() <= 1
