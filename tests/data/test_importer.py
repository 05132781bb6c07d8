"""import_gbuffers: synthetic clips exported as per-frame folders come back intact."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from alaya.data.clipio import read_clip
from alaya.data.dataset import read_meta
from alaya.data.framefiles import GBufferImportError
from alaya.data.gbuffer_convert import backward_from_forward
from alaya.data.importer import import_gbuffers
from alaya.data.synthetic import MATERIAL_COLOURS, make_synthetic_clip
from alaya.data.validate import validate_dataset

H, W = 12, 16


def _save(folder: Path, frames: np.ndarray, fmt: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for t, frame in enumerate(frames):
        if fmt == "png":
            Image.fromarray(frame).save(folder / f"frame_{t:04d}.png")
        else:
            np.save(folder / f"frame_{t:04d}.npy", frame)


def _export(clip: dict[str, np.ndarray], src: Path, channels: tuple[str, ...] = (
        "normal", "albedo", "roughness", "metallic", "material", "instance", "motion"),
        **depth_cfg) -> dict:  # noqa: ANN003
    """Write a clip as SRC/gbuffers.json + per-frame folders (mixed PNG / NPY)."""
    spec_channels: dict = {"depth": {"dir": "depth", "units": "metres", **depth_cfg}}
    _save(src / "depth", clip["depth"], "npy")
    if "normal" in channels:  # 8-bit PNG, unsigned encoding
        n = clip["normal"].astype(np.float64)
        _save(src / "normal", np.round((n * 0.5 + 0.5) * 255).astype(np.uint8), "png")
        spec_channels["normal"] = {"dir": "normal", "space": "camera", "encoding": "unsigned"}
    for key, fmt in (("albedo", "png"), ("roughness", "png"), ("metallic", "npy"),
                     ("material", "png"), ("instance", "npy")):
        if key in channels:
            _save(src / key, clip[key], fmt)  # material: 16-bit PNG
            spec_channels[key] = {"dir": key}
    if "motion" in channels:
        _save(src / "flow", clip["motion"].astype(np.float32), "npy")
        spec_channels["motion"] = {"dir": "flow", "convention": "backward", "units": "pixels"}
    rgb = []
    for style, stack in zip(clip["styles"], clip["rgb"]):
        _save(src / f"rgb_{style}", stack, "png")
        rgb.append({"dir": f"rgb_{style}", "style": str(style)})
    spec_channels["rgb"] = rgb
    (src / "poses.json").write_text(json.dumps(clip["world_to_camera"].tolist()))
    spec = {"fps": 24, "width": W, "height": H, "clip_length": clip["depth"].shape[0],
            "camera": {"K": clip["K"].tolist(), "world_to_camera": "poses.json"},
            "channels": spec_channels}
    (src / "gbuffers.json").write_text(json.dumps(spec))
    return spec


def _only_clip(out: Path) -> dict[str, np.ndarray]:
    files = sorted((out / "clips").glob("*.npz"))
    assert len(files) == 1
    return read_clip(files[0])


def test_round_trip(tmp_path: Path) -> None:
    clip = make_synthetic_clip(T=3, H=H, W=W, S=2)
    _export(clip, tmp_path / "src")
    out = import_gbuffers(tmp_path / "src", tmp_path / "out", dataset_name="rt")
    got = _only_clip(out)
    np.testing.assert_allclose(got["depth"], clip["depth"], atol=1e-5)
    np.testing.assert_allclose(got["normal"].astype(np.float32),
                               clip["normal"].astype(np.float32), atol=1e-2)
    for key in ("mask", "albedo", "roughness", "metallic", "material", "instance", "motion",
                "rgb", "styles", "K", "world_to_camera"):
        np.testing.assert_array_equal(got[key], clip[key], err_msg=key)
    meta = read_meta(out)
    assert meta.name == "rt" and meta.fps == 24 and meta.frames == 3
    assert sorted(meta.styles) == ["night", "plain"] and len(meta.materials) == 2
    assert all(len(s["phrasings"]) >= 3 for s in meta.styles.values())
    for mat, colour in zip(meta.materials, MATERIAL_COLOURS):
        np.testing.assert_allclose(mat["albedo"], np.round(colour * 255) / 255, atol=1e-4)
    assert validate_dataset(out, progress=False) == []


def test_defaults_and_clip_splitting(tmp_path: Path) -> None:
    clip = make_synthetic_clip(T=6, H=H, W=W, S=1)
    spec = _export(clip, tmp_path / "src", channels=())
    spec["clip_length"] = 3
    (tmp_path / "src" / "gbuffers.json").write_text(json.dumps(spec))
    out = import_gbuffers(tmp_path / "src", tmp_path / "out")
    files = sorted((out / "clips").glob("*.npz"))
    assert len(files) == 2
    second = read_clip(files[1])
    m = clip["mask"][3:] == 1
    np.testing.assert_array_equal(second["depth"], clip["depth"][3:])
    np.testing.assert_array_equal(second["material"], clip["mask"][3:])
    assert (second["roughness"] == 0).all() and (second["albedo"] == 0).all()
    # Normals derived from depth agree with the analytic plane away from slivers.
    err = np.abs(second["normal"].astype(np.float32) - clip["normal"][3:].astype(np.float32))
    assert np.median(err.max(-1)[m]) < 2e-3
    # Motion: zero at each clip's first frame, static-scene reprojection elsewhere.
    assert (second["motion"][0] == 0).all()
    np.testing.assert_allclose(second["motion"][1:].astype(np.float32),
                               clip["motion"][4:].astype(np.float32), atol=2e-3)
    assert validate_dataset(out, progress=False) == []
    meta = read_meta(out)                # two clips: one of them is held out for testing
    assert len(meta.splits["train"]) == 1 and len(meta.splits["test"]) == 1


def test_ndc_and_millimetre_depth(tmp_path: Path) -> None:
    clip = make_synthetic_clip(T=2, H=H, W=W, S=1)
    n, f = 0.1, 50.0
    d = clip["depth"].astype(np.float64)
    with np.errstate(divide="ignore"):
        z = np.where(d > 0, (f + n) / (f - n) - 2 * f * n / ((f - n) * d), 1.0)
    _export(clip, tmp_path / "ndc", channels=("normal",), kind="ndc", near=n, far=f)
    _save(tmp_path / "ndc" / "depth", z, "npy")
    got = _only_clip(import_gbuffers(tmp_path / "ndc", tmp_path / "out_ndc"))
    np.testing.assert_allclose(got["depth"], clip["depth"], atol=1e-5)
    np.testing.assert_array_equal(got["mask"], clip["mask"])

    _export(clip, tmp_path / "mm", channels=("normal",), units="millimetres")
    for p in (tmp_path / "mm" / "depth").iterdir():
        p.unlink()
    _save(tmp_path / "mm" / "depth", np.round(d * 1000).astype(np.uint16), "png")  # 16-bit
    got = _only_clip(import_gbuffers(tmp_path / "mm", tmp_path / "out_mm"))
    np.testing.assert_allclose(got["depth"], clip["depth"], atol=6e-4)
    np.testing.assert_array_equal(got["mask"], clip["mask"])


def test_world_space_normals(tmp_path: Path) -> None:
    clip = make_synthetic_clip(T=3, H=H, W=W, S=1)
    spec = _export(clip, tmp_path / "src", channels=())
    R = clip["world_to_camera"][:, :3, :3].astype(np.float64)  # (T, 3, 3)
    n_world = np.einsum("tji,thwj->thwi", R, clip["normal"].astype(np.float64))  # R^T n
    _save(tmp_path / "src" / "nw", n_world.astype(np.float32), "npy")
    spec["channels"]["normal"] = {"dir": "nw", "space": "world"}
    (tmp_path / "src" / "gbuffers.json").write_text(json.dumps(spec))
    got = _only_clip(import_gbuffers(tmp_path / "src", tmp_path / "out"))
    np.testing.assert_allclose(got["normal"].astype(np.float32),
                               clip["normal"].astype(np.float32), atol=2e-3)


def test_backward_from_forward() -> None:
    fwd = np.zeros((4, 6, 2))
    fwd[..., 0] = 1.0  # everything moves one pixel right
    back = backward_from_forward(fwd, np.ones((4, 6)))
    np.testing.assert_array_equal(back[:, 1:], np.broadcast_to([-1.0, 0.0], (4, 5, 2)))
    # Two pixels landing on one: the nearer one wins.
    fwd = np.zeros((1, 3, 2))
    fwd[0, 0, 0] = 1.0  # pixel 0 moves onto pixel 1, which stays
    far = backward_from_forward(fwd, np.array([[1.0, 5.0, 5.0]]))
    near = backward_from_forward(fwd, np.array([[5.0, 1.0, 5.0]]))
    assert far[0, 1, 0] == -1.0 and near[0, 1, 0] == 0.0


def test_errors_name_file_channel_and_frame(tmp_path: Path) -> None:
    clip = make_synthetic_clip(T=3, H=H, W=W, S=1)
    src = tmp_path / "src"
    spec = _export(clip, src)
    Image.fromarray(np.zeros((H, W + 1, 3), np.uint8)).save(src / "albedo" / "frame_0001.png")
    with pytest.raises(GBufferImportError) as e:
        import_gbuffers(src, tmp_path / "out")
    msg = str(e.value)
    assert "frame_0001.png" in msg and "channel 'albedo'" in msg and "frame 1" in msg

    (src / "instance" / "frame_0002.npy").unlink()
    with pytest.raises(GBufferImportError, match="channel 'instance'.*2 frames"):
        import_gbuffers(src, tmp_path / "out")

    spec["channels"].pop("rgb")
    (src / "gbuffers.json").write_text(json.dumps(spec))
    with pytest.raises(GBufferImportError, match="rgb"):
        import_gbuffers(src, tmp_path / "out")


def test_material_zero_on_geometry_is_an_error(tmp_path: Path) -> None:
    clip = make_synthetic_clip(T=2, H=H, W=W, S=1)
    clip["material"][1][clip["mask"][1] == 1] = 0
    _export(clip, tmp_path / "src", channels=("material",))
    with pytest.raises(GBufferImportError, match="channel 'material': frame 1"):
        import_gbuffers(tmp_path / "src", tmp_path / "out")


def test_exr_without_openexr_says_how_to_install(tmp_path: Path) -> None:
    try:
        import OpenEXR  # noqa: F401
        pytest.skip("OpenEXR is installed")
    except ImportError:
        pass
    clip = make_synthetic_clip(T=2, H=H, W=W, S=1)
    _export(clip, tmp_path / "src", channels=())
    for p in (tmp_path / "src" / "depth").iterdir():
        p.rename(p.with_suffix(".exr"))
    with pytest.raises(GBufferImportError, match="pip install OpenEXR") as e:
        import_gbuffers(tmp_path / "src", tmp_path / "out")
    assert "channel 'depth'" in str(e.value) and "frame 0" in str(e.value)


def test_refuses_existing_dataset(tmp_path: Path) -> None:
    clip = make_synthetic_clip(T=2, H=H, W=W, S=1)
    _export(clip, tmp_path / "src", channels=())
    import_gbuffers(tmp_path / "src", tmp_path / "out")
    with pytest.raises(FileExistsError):
        import_gbuffers(tmp_path / "src", tmp_path / "out")
