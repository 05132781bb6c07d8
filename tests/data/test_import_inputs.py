"""The importer's other inputs: stacked arrays, an explicit mask, a y-up world, and the motion of
the background (computed where missing, checked where given)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_importer import _export, _only_clip, _save

from alaya.cli import main
from alaya.data.dataset import read_meta
from alaya.data.framefiles import GBufferImportError
from alaya.data.importer import Y_UP_TO_Z_UP, import_gbuffers
from alaya.data.synthetic import make_synthetic_clip
from alaya.data.validate import validate_dataset

H, W = 12, 16


def _spec(src: Path) -> dict:
    return json.loads((src / "gbuffers.json").read_text())


def _write_spec(src: Path, spec: dict) -> None:
    (src / "gbuffers.json").write_text(json.dumps(spec))


def test_stacked_arrays_import_like_per_frame_files(tmp_path: Path) -> None:
    clip = make_synthetic_clip(T=4, H=H, W=W, S=2)
    _export(clip, tmp_path / "frames")
    want = _only_clip(import_gbuffers(tmp_path / "frames", tmp_path / "out_frames"))
    src = tmp_path / "stacked"
    src.mkdir()
    np.save(src / "depth.npy", clip["depth"])                                   # (T, H, W)
    np.save(src / "normal.npy", clip["normal"].astype(np.float32))             # (T, H, W, 3) signed
    np.save(src / "flow.npy", clip["motion"].astype(np.float32))
    np.savez(src / "surface.npz", albedo=clip["albedo"], roughness=clip["roughness"],
             metallic=clip["metallic"], material=clip["material"], instance=clip["instance"])
    np.savez(src / "colour.npz", **{str(s): clip["rgb"][i] for i, s in enumerate(clip["styles"])})
    (src / "poses.json").write_text(json.dumps(clip["world_to_camera"].tolist()))
    spec = {"fps": 24, "width": W, "height": H, "clip_length": 4,
            "camera": {"K": clip["K"].tolist(), "world_to_camera": "poses.json"},
            "channels": {"depth": {"file": "depth.npy"}, "normal": {"file": "normal.npy"},
                         "motion": {"file": "flow.npy"},
                         **{k: {"file": "surface.npz"} for k in ("albedo", "roughness", "metallic",
                                                                  "material", "instance")},
                         "rgb": [{"file": "colour.npz", "style": str(s)} for s in clip["styles"]]}}
    _write_spec(src, spec)
    got = _only_clip(import_gbuffers(src, tmp_path / "out_stacked"))
    for key in want:                     # the frames' normals went through 8-bit PNGs, these not
        if key == "normal":
            np.testing.assert_allclose(got[key].astype(np.float32), clip[key].astype(np.float32), atol=1e-3)
        else:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    assert validate_dataset(tmp_path / "out_stacked", progress=False) == []
    # errors name the file and the channel: a wrong frame count, an unknown key, a bad shape
    np.save(src / "flow.npy", clip["motion"][:3].astype(np.float32))
    with pytest.raises(GBufferImportError, match=r"flow\.npy: channel 'motion': 3 frames but depth has 4"):
        import_gbuffers(src, tmp_path / "x1")
    spec["channels"]["motion"] = {"file": "surface.npz", "key": "flow"}
    _write_spec(src, spec)
    with pytest.raises(GBufferImportError, match=r"surface\.npz: channel 'motion': no array 'flow'"):
        import_gbuffers(src, tmp_path / "x2")
    spec["channels"].pop("motion")
    np.save(src / "depth.npy", clip["depth"][0])
    _write_spec(src, spec)
    with pytest.raises(GBufferImportError, match=r"depth\.npy: channel 'depth': stacked frames must be"):
        import_gbuffers(src, tmp_path / "x3")


def test_explicit_mask(tmp_path: Path) -> None:
    clip = make_synthetic_clip(T=3, H=H, W=W, S=1)
    src = tmp_path / "src"
    spec = _export(clip, src, channels=("normal", "albedo", "material"))
    sky = np.where(clip["mask"] == 1, clip["depth"], 1000.0).astype(np.float32)   # the sky has a depth
    for p in (src / "depth").iterdir():
        p.unlink()
    _save(src / "depth", sky, "npy")
    _save(src / "sky", (1 - clip["mask"]) * 255, "png")                        # a sky mask, 8-bit
    spec["channels"]["mask"] = {"dir": "sky", "invert": True}
    _write_spec(src, spec)
    got = _only_clip(import_gbuffers(src, tmp_path / "out"))
    np.testing.assert_array_equal(got["mask"], clip["mask"])
    np.testing.assert_allclose(got["depth"], clip["depth"], atol=1e-5)      # 0 on the sky
    assert validate_dataset(tmp_path / "out", progress=False) == []
    # geometry in the mask where depth has none is refused, naming the channel and frame
    broken = clip["mask"].copy()
    broken[1] = 1                                                              # frame 1: all geometry
    np.save(src / "m.npy", broken.astype(bool))
    spec["channels"]["mask"] = {"file": "m.npy"}
    _write_spec(src, spec)
    sky[1][clip["mask"][1] == 0] = 0.0                                         # frame 1: no depth on the sky
    np.save(src / "depth" / "frame_0001.npy", sky[1])
    with pytest.raises(GBufferImportError, match=r"channel 'mask': frame 1: the mask says geometry on \d+ pixels"):
        import_gbuffers(src, tmp_path / "out3")


def _to_y_up(clip: dict) -> tuple[np.ndarray, np.ndarray]:
    """The clip's poses and world-space normals as a y-up engine would export them."""
    w2c = clip["world_to_camera"].astype(np.float64) @ Y_UP_TO_Z_UP          # w2c_z = w2c_y @ inv(A)
    R = clip["world_to_camera"][:, :3, :3].astype(np.float64)
    n_world_z = np.einsum("tji,thwj->thwi", R, clip["normal"].astype(np.float64))
    return w2c, n_world_z @ Y_UP_TO_Z_UP[:3, :3]                              # n_y = inv(A) n_z


def test_y_up_source_gives_the_z_up_clip(tmp_path: Path) -> None:
    clip = make_synthetic_clip(T=3, H=H, W=W, S=1)
    src = tmp_path / "src"
    spec = _export(clip, src, channels=())
    w2c_y, n_y = _to_y_up(clip)
    (src / "poses.json").write_text(json.dumps(w2c_y.tolist()))
    _save(src / "nw", n_y.astype(np.float32), "npy")
    spec["channels"]["normal"] = {"dir": "nw", "space": "world"}
    _write_spec(src, spec)
    assert main(["import", "gbuffers", str(src), "--out", str(tmp_path / "out"), "--up-axis", "y"]) == 0
    got = _only_clip(tmp_path / "out")
    np.testing.assert_allclose(got["world_to_camera"], clip["world_to_camera"], atol=1e-6)
    np.testing.assert_allclose(got["normal"].astype(np.float32), clip["normal"].astype(np.float32), atol=2e-3)
    np.testing.assert_allclose(got["motion"].astype(np.float32), clip["motion"].astype(np.float32), atol=2e-3)
    assert read_meta(tmp_path / "out").generator["up_axis"] == "y"
    # the same from gbuffers.json; read as z-up the poses stay the y-up ones
    spec["camera"]["up_axis"] = "y"
    _write_spec(src, spec)
    np.testing.assert_allclose(_only_clip(import_gbuffers(src, tmp_path / "json"))["world_to_camera"],
                               clip["world_to_camera"], atol=1e-6)
    z = _only_clip(import_gbuffers(src, tmp_path / "as_z", up_axis="z"))["world_to_camera"]
    np.testing.assert_allclose(z, w2c_y.astype(np.float32), atol=1e-6)
    # identity poses in a y-up world: a level camera looking along the source's -z, i.e. +y of z-up
    spec["camera"].pop("world_to_camera")
    _write_spec(src, spec)
    ident = _only_clip(import_gbuffers(src, tmp_path / "ident"))["world_to_camera"][0]
    np.testing.assert_allclose(-ident[2, :3], [0, 1, 0], atol=1e-7)          # the view direction
    np.testing.assert_allclose(ident[1, :3], [0, 0, 1], atol=1e-7)           # camera up = world up
    spec["camera"]["up_axis"] = "x"
    _write_spec(src, spec)
    with pytest.raises(GBufferImportError, match="up axis must be one of"):
        import_gbuffers(src, tmp_path / "bad")


def _turning_clip() -> dict:
    """A clip whose camera turns enough that points at infinity move > 0.7 px a frame."""
    clip = make_synthetic_clip(T=3, H=48, W=64, S=1)
    assert (clip["mask"] == 0).mean() > 0.1
    assert np.abs(clip["motion"][1][clip["mask"][1] == 0].astype(np.float32)).max() > 0.7
    return clip


def _with_motion(tmp_path: Path, clip: dict, motion: np.ndarray, **cfg) -> Path:
    src = tmp_path / "src"
    spec = _export(clip, src, channels=("normal", "material"))
    spec["width"], spec["height"] = clip["depth"].shape[2], clip["depth"].shape[1]
    _save(src / "flow", motion.astype(np.float32), "npy")
    spec["channels"]["motion"] = {"dir": "flow", **cfg}
    _write_spec(src, spec)
    return src


def test_zero_sky_motion_under_rotation_is_refused(tmp_path: Path) -> None:
    clip = _turning_clip()
    zero_sky = np.where(clip["mask"][..., None] == 1, clip["motion"].astype(np.float32), 0.0)
    src = _with_motion(tmp_path, clip, zero_sky)
    with pytest.raises(GBufferImportError) as e:
        import_gbuffers(src, tmp_path / "out")
    msg = str(e.value)
    assert "channel 'motion': frame 1" in msg and "motion is 0 on" in msg and "background pixels" in msg
    assert "camera turns by" in msg and '"background": "compute"' in msg
    # wrong but not zero: refused too
    off = np.where(clip["mask"][..., None] == 1, clip["motion"].astype(np.float32), 5.0)
    off[0] = 0
    src = _with_motion(tmp_path / "off", clip, off)
    with pytest.raises(GBufferImportError, match="not the flow of points at infinity"):
        import_gbuffers(src, tmp_path / "out_off")


def test_background_motion_computed_when_missing_or_asked(tmp_path: Path) -> None:
    clip = _turning_clip()
    fg = clip["mask"][..., None] == 1
    for name, motion, cfg in (
            ("nan", np.where(fg, clip["motion"].astype(np.float32), np.nan), {}),       # missing there
            ("compute", np.where(fg, clip["motion"].astype(np.float32), 0.0), {"background": "compute"}),
            ("given", clip["motion"].astype(np.float32), {})):                       # right: accepted
        src = _with_motion(tmp_path / name, clip, motion, **cfg)
        got = _only_clip(import_gbuffers(src, tmp_path / f"out_{name}"))
        np.testing.assert_allclose(got["motion"].astype(np.float32), clip["motion"].astype(np.float32),
                                   atol=2e-2, err_msg=name)
        assert validate_dataset(tmp_path / f"out_{name}", progress=False) == []
    nan_on_geometry = clip["motion"].astype(np.float32)
    nan_on_geometry[2][clip["mask"][2] == 1] = np.nan
    src = _with_motion(tmp_path / "nan_fg", clip, nan_on_geometry)
    with pytest.raises(GBufferImportError, match="channel 'motion': frame 2: NaN or inf in motion on geometry"):
        import_gbuffers(src, tmp_path / "out_nan_fg")


def test_zero_sky_motion_without_rotation_is_fine(tmp_path: Path) -> None:
    clip = make_synthetic_clip(T=3, H=48, W=64, S=1)
    w2c = clip["world_to_camera"].copy()
    w2c[:, :3, :3] = w2c[0, :3, :3]                                           # translation only
    clip["world_to_camera"] = w2c
    fg = clip["mask"][..., None] == 1
    src = _with_motion(tmp_path, clip, np.where(fg, clip["motion"].astype(np.float32), 0.0))
    got = _only_clip(import_gbuffers(src, tmp_path / "out"))
    assert (got["motion"][1:][~fg[1:, ..., 0]] == 0).all()
