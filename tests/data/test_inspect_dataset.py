"""Contact sheets, GIFs and summaries."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from alaya.data.inspect import inspect_dataset, summarize, write_contact_sheet, write_style_gifs
from alaya.data.synthetic import make_synthetic_clip, write_synthetic_dataset
from alaya.data.visualize import channel_images, flow_image, id_image


def test_contact_sheet_has_a_column_per_channel_and_style(tmp_path: Path) -> None:
    sizes = []
    for S in (1, 3):
        clip = make_synthetic_clip(T=4, H=16, W=16, S=S)
        path = write_contact_sheet(clip, tmp_path / f"s{S}.png", frames=3)
        with Image.open(path) as im:
            sizes.append(im.size)
            arr = np.asarray(im.convert("RGB"))
        assert arr.std() > 10  # not a blank image
    (w1, h1), (w3, h3) = sizes
    assert h1 == h3
    tile = (w3 - w1) // 2
    assert tile >= 16 and w1 - 34 == tile * (9 + 1)  # 9 G-buffer columns + 1 style
    assert h1 == 14 + 3 * tile


def test_channel_images_cover_every_channel() -> None:
    clip = make_synthetic_clip(T=2, H=8, W=8, S=2)
    images = channel_images(clip)
    assert list(images)[:9] == ["depth", "mask", "normal", "albedo", "roughness", "metallic",
                                "material", "instance", "motion"]
    assert list(images)[9:] == ["rgb:plain", "rgb:night"]
    for name, stack in images.items():
        assert stack.shape == (2, 8, 8, 3) and stack.dtype == np.uint8, name
    ids = id_image(np.array([[0, 1, 2]]))
    assert (ids[0, 0] == 0).all() and not (ids[0, 1] == ids[0, 2]).all()
    flow = flow_image(np.array([[[[1.0, 0.0], [-1.0, 0.0], [0.0, 0.0]]]]))
    assert (flow[0, 0, 0] == [255, 0, 0]).all() and (flow[0, 0, 1] == [0, 255, 255]).all()
    assert (flow[0, 0, 2] == 0).all()


def test_gifs(tmp_path: Path) -> None:
    clip = make_synthetic_clip(T=5, H=16, W=16, S=2)
    paths = write_style_gifs(clip, tmp_path, scale=2, fps=20)
    assert sorted(paths) == ["gbuffer", "rgb:night", "rgb:plain"]
    for name, path in paths.items():
        with Image.open(path) as im:
            assert im.n_frames == 5, name
            assert im.info["loop"] == 0 and im.info["duration"] == 50
            width = 16 * 2 * (3 if name == "gbuffer" else 1)
            assert im.size == (width, 32)


def test_inspect_dataset_and_summary(tmp_path: Path) -> None:
    meta = write_synthetic_dataset(tmp_path / "ds", n_clips=3, T=3, H=12, W=16, S=2)
    out = inspect_dataset(tmp_path / "ds", tmp_path / "out")
    assert set(out) == {"summary", "contact_sheet", "gbuffer", "rgb:plain", "rgb:night"}
    assert all(p.is_file() for p in out.values())
    expected = (meta.splits["test"] or sorted(meta.clips))[0]
    assert out["contact_sheet"].name == f"{expected}_sheet.png"
    text = summarize(tmp_path / "ds")
    assert "16x12" in text and "plain, night" in text and "depth" in text
    assert f"train {len(meta.splits['train'])}" in text
