"""Episode files and the recorder: round trips, crash safety, appending, every kind of bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from alaya.data import recorder as recorder_mod
from alaya.data.actions import action_vector
from alaya.data.clipio import ClipError, write_npz
from alaya.data.dataset import split_for_seed
from alaya.data.meta_files import MetaError
from alaya.data.episodes import (
    EPISODES_DIR, EPISODES_FILE, EpisodeDataset, episode_split, read_episode, read_meta,
    validate_episodes, write_episode,
)
from alaya.data.recorder import EpisodeRecorder, RecordError

STYLES = {"day": ["a sunny day", "bright daylight"], "night": ["a dark night"]}
T, H, W = 8, 16, 16
ACTS = [None, action_vector(forward=1.0), action_vector(turn=0.5), action_vector(act="jump"),
        action_vector(strafe=-0.25, pitch=0.1), action_vector(act="spell"),
        action_vector(forward=0.5, turn=-1.0), action_vector(act="summon")]


def _view(yaw: float, x: float) -> np.ndarray:
    """A rigid world_to_camera: camera at (x, 0, 1.5) looking along yaw, level."""
    f = np.array([math.cos(yaw), math.sin(yaw), 0.0])
    r = np.cross(f, [0.0, 0.0, 1.0])
    u = np.cross(r, f)
    eye = np.array([x, 0.0, 1.5])
    m = np.eye(4)
    m[:3, :3] = np.stack([r, u, -f])
    m[:3, 3] = -m[:3, :3] @ eye
    return m


def _frames(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (T, 2, H, W, 3), dtype=np.uint8)


def _recorder(root: Path, **kw) -> EpisodeRecorder:
    args = dict(styles=STYLES, fps=30.0, source="alaya-game", generator={"test": 1}, size=(H, W))
    return EpisodeRecorder(root, **(args | kw))


def _record(rec: EpisodeRecorder, eid: str, seed: int | None = 1, frames: int = T) -> Path:
    rgb = _frames(seed or 0)
    K = np.array([[20.0, 0, 8], [0, 20.0, 8], [0, 0, 1]])
    with rec.begin(eid, seed=seed) as ep:
        for t in range(frames):
            ep.add(rgb[t], ACTS[t], _view(0.1 * t, 0.05 * t), K, {"hit": t % 2})
    return ep.path


def test_round_trip_is_bit_identical(tmp_path: Path) -> None:
    rec = _recorder(tmp_path)
    path = _record(rec, "ep00001", seed=1)
    assert path == tmp_path / EPISODES_DIR / "ep00001.npz"
    back = EpisodeDataset(tmp_path).load("ep00001")
    rgb = _frames(1)
    np.testing.assert_array_equal(back["rgb"], rgb.transpose(1, 0, 2, 3, 4))
    assert back["rgb"].dtype == np.uint8 and back["styles"].tolist() == ["day", "night"]
    want = np.stack([np.zeros(8, np.float32)] + [a for a in ACTS[1:]])
    np.testing.assert_array_equal(back["actions"], want)
    np.testing.assert_array_equal(back["world_to_camera"],
                                  np.stack([_view(0.1 * t, 0.05 * t) for t in range(T)]).astype(np.float32))
    assert back["K"].shape == (3, 3) and back["events"][:, 0].tolist() == [t % 2 for t in range(T)]
    assert set(back) == {"rgb", "styles", "actions", "world_to_camera", "K", "events"}
    meta = read_meta(tmp_path)
    assert meta.episodes == {"ep00001": {"split": split_for_seed(1), "frames": T, "seed": 1}}
    assert meta.resolution == [H, W] and meta.styles == STYLES and meta.generator == {"test": 1}
    assert validate_episodes(tmp_path) == []
    # the same arrays always give the same bytes; {style: image} frames equal the stacked form
    write_episode(tmp_path / "copy.npz", back)
    assert (tmp_path / "copy.npz").read_bytes() == path.read_bytes()
    with rec.begin("dict", seed=1) as ep:
        for t in range(T):
            ep.add({"night": rgb[t, 1], "day": rgb[t, 0]}, ACTS[t], _view(0.1 * t, 0.05 * t),
                   np.array([[20.0, 0, 8], [0, 20.0, 8], [0, 0, 1]]), {"hit": t % 2})
    assert ep.path.read_bytes() == path.read_bytes()


def test_dataset_lists_splits_and_iterates(tmp_path: Path) -> None:
    rec = _recorder(tmp_path)
    for i in range(4):
        _record(rec, f"ep{i}", seed=i, frames=2)
    _record(rec, "noseed", seed=None, frames=2)
    ds = EpisodeDataset(tmp_path)
    assert len(ds) == 5 and list(ds) == ["ep0", "ep1", "ep2", "ep3", "noseed"]
    assert sorted(sum((ds.ids(s) for s in ("train", "val", "test")), [])) == ds.ids()
    assert ds.meta.episodes["noseed"]["split"] == episode_split("noseed")
    assert ds.meta.episodes["ep2"]["split"] == split_for_seed(2)
    assert [eid for eid, arrays in ds.items()] == ds.ids()


def test_discard_and_exception_leave_nothing(tmp_path: Path) -> None:
    rec = _recorder(tmp_path)
    ep = rec.begin("a", seed=1)
    ep.add(_frames()[0])
    ep.discard()
    with pytest.raises(RuntimeError, match="game crashed"):
        with rec.begin("b", seed=2) as ep2:
            ep2.add(_frames()[0])
            raise RuntimeError("game crashed")
    with pytest.raises(RecordError, match="discarded"):
        ep2.add(_frames()[0])
    assert read_meta(tmp_path).episodes == {}
    assert list((tmp_path / EPISODES_DIR).iterdir()) == []
    assert validate_episodes(tmp_path) == []
    _record(rec, "b", seed=2)                      # the id is free again
    assert EpisodeDataset(tmp_path).ids() == ["b"]


def test_killed_during_finish_leaves_dataset_valid(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    rec = _recorder(tmp_path)
    _record(rec, "kept")
    real = np.lib.format.write_array
    calls = []

    def dying(fp, array, **kwargs):  # noqa: ANN001, ANN003, ANN202
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed while writing the npz")
        return real(fp, array, **kwargs)

    monkeypatch.setattr(np.lib.format, "write_array", dying)
    with pytest.raises(KeyboardInterrupt):
        _record(rec, "cut")
    monkeypatch.setattr(np.lib.format, "write_array", real)
    # killed after the npz but before episodes.json: an unlisted file, not part of the dataset
    monkeypatch.setattr(recorder_mod, "write_meta", lambda *a: (_ for _ in ()).throw(
        KeyboardInterrupt("killed before the meta")))
    with pytest.raises(KeyboardInterrupt):
        _record(rec, "orphan")
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / EPISODES_DIR).iterdir()) == ["kept.npz", "orphan.npz"]
    assert EpisodeDataset(tmp_path).ids() == ["kept"] and validate_episodes(tmp_path) == []
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    _record(rec, "orphan")                          # re-recording replaces the orphan
    assert EpisodeDataset(tmp_path).ids() == ["kept", "orphan"]


def test_reopening_appends_and_refuses_mismatches(tmp_path: Path) -> None:
    _record(_recorder(tmp_path), "first")
    rec = _recorder(tmp_path, generator={"other": 2})
    _record(rec, "second", seed=2)
    meta = read_meta(tmp_path)
    assert sorted(meta.episodes) == ["first", "second"] and meta.generator == {"test": 1}
    with pytest.raises(RecordError, match="already in"):
        rec.begin("first")
    for kw, field in [({"size": (32, 32)}, "resolution"), ({"fps": 25.0}, "fps"),
                      ({"styles": {"day": ["x"]}}, "styles"), ({"source": "video"}, "source")]:
        with pytest.raises(RecordError, match=f"field '{field}'"):
            _recorder(tmp_path, **kw)


BAD_FRAMES = [
    ("7 columns", lambda rgb: (rgb, np.zeros(7, np.float32)), "field 'action'.*shape"),
    ("out of range", lambda rgb: (rgb, [0, 0, 1.5, 0, 0, 0, 0, 0]), "'turn' must be in \\[-1, 1\\]"),
    ("NaN", lambda rgb: (rgb, [np.nan, 0, 0, 0, 0, 0, 0, 0]), "'forward' must be finite"),
    ("two one-shots", lambda rgb: (rgb, [0, 0, 0, 0, 1, 1, 0, 0]), "at most one one-shot"),
    ("float rgb", lambda rgb: (rgb.astype(np.float32), ACTS[1]), "field 'rgb'.*dtype uint8"),
    ("one style", lambda rgb: (rgb[:1], ACTS[1]), "field 'rgb'.*shape"),
    ("style dict", lambda rgb: ({"day": rgb[0]}, ACTS[1]), "field 'rgb'.*styles"),
    ("no action", lambda rgb: (rgb, None), "field 'action'.*required"),
]


@pytest.mark.parametrize("name,make,match", BAD_FRAMES, ids=[b[0] for b in BAD_FRAMES])
def test_bad_frames_name_the_field_and_frame(tmp_path: Path, name, make, match) -> None:
    rgb = _frames()
    with _recorder(tmp_path).begin("ep") as ep:
        ep.add(rgb[0])
        with pytest.raises(RecordError, match=f"episode 'ep' frame 1: .*{match}"):
            ep.add(*make(rgb[1]))
        ep.add(rgb[1], ACTS[1])                     # a refused frame is not added
    assert EpisodeDataset(tmp_path).load("ep")["rgb"].shape == (2, 2, H, W, 3)


def test_bad_optional_fields(tmp_path: Path) -> None:
    rgb = _frames()
    ep = _recorder(tmp_path).begin("ep")
    with pytest.raises(RecordError, match="frame 0: field 'action'.*all zero"):
        ep.add(rgb[0], ACTS[1])
    ep.add(rgb[0], None, _view(0, 0), events={"hit": 1})
    with pytest.raises(RecordError, match="frame 1: field 'world_to_camera': given at frame 0"):
        ep.add(rgb[1], ACTS[1], events={"hit": 1})
    with pytest.raises(RecordError, match="frame 1: field 'world_to_camera': not a rigid"):
        ep.add(rgb[1], ACTS[1], 2 * _view(0, 0), events={"hit": 1})
    with pytest.raises(RecordError, match="frame 1: field 'events': unknown events"):
        ep.add(rgb[1], ACTS[1], _view(0, 0), events={"crit": 1})
    with pytest.raises(RecordError, match="frame 1: field 'K': not given at frame 0"):
        ep.add(rgb[1], ACTS[1], _view(0, 0), np.eye(3), events={"hit": 1})
    with pytest.raises(RecordError, match="no frames"):
        _recorder(tmp_path).begin("empty").finish()


def test_depth_round_trips_as_float16_and_old_episodes_load_without_it(tmp_path: Path) -> None:
    rgb = _frames()
    depth = np.random.default_rng(3).uniform(0.5, 40.0, (T, H, W))
    depth[:, :4] = 0.0                                          # sky
    with _recorder(tmp_path).begin("deep", seed=1) as ep:
        for t in range(T):
            ep.add(rgb[t], ACTS[t], _view(0.1 * t, 0.0), depth=depth[t])
    back = EpisodeDataset(tmp_path).load("deep")
    assert back["depth"].dtype == np.float16 and back["depth"].shape == (T, H, W)
    np.testing.assert_allclose(back["depth"], depth, rtol=1e-3)
    assert (back["depth"][:, :4] == 0).all()
    _record(_recorder(tmp_path), "old", seed=2)                 # recorded without depth: still loads
    assert "depth" not in EpisodeDataset(tmp_path).load("old")
    assert validate_episodes(tmp_path) == []


@pytest.mark.parametrize("depth,match", [
    (np.full((H, W), -0.5), "negative depth"),
    (np.full((H, W), np.nan), "NaN or inf"),
    (np.full((H, W), 1e6), "beyond float16"),
    (np.ones((H, W + 1)), r"expected shape \(16, 16\)"),
])
def test_bad_depth_names_the_field(tmp_path: Path, depth, match) -> None:
    rgb = _frames()
    ep = _recorder(tmp_path).begin("ep")
    ep.add(rgb[0], None, depth=np.ones((H, W)))
    with pytest.raises(RecordError, match=f"frame 1: field 'depth': {match}"):
        ep.add(rgb[1], ACTS[1], depth=depth)
    with pytest.raises(RecordError, match="frame 1: field 'depth': given at frame 0"):
        ep.add(rgb[1], ACTS[1])


def _write(path: Path, **changes) -> Path:
    arrays = {"rgb": _frames().transpose(1, 0, 2, 3, 4), "styles": np.array(["day", "night"]),
              "actions": np.stack([np.zeros(8, np.float32)] + ACTS[1:])}
    arrays.update(changes)
    for key in [k for k, v in arrays.items() if v is None]:
        del arrays[key]
    write_npz(path, arrays)
    return path


def _actions_with(t: int, column: int, value: float) -> np.ndarray:
    a = np.zeros((T, 8), np.float32)
    a[t, column] = value
    return a


BAD_FILES = [
    ("actions float64", {"actions": np.zeros((T, 8))}, "key 'actions': expected dtype float32"),
    ("7 columns", {"actions": np.zeros((T, 7), np.float32)}, "key 'actions': axis 1 must be 8"),
    ("frames disagree", {"actions": np.zeros((T - 1, 8), np.float32)}, "key 'actions': T=7"),
    ("out of range", {"actions": _actions_with(1, 2, 2.0)},
     "key 'actions': frame 1 column 'turn' must be in"),
    ("actions[0]", {"actions": np.stack([ACTS[1]] * T)}, "key 'actions': frame 0 must be all zero"),
    ("missing styles", {"styles": None}, "key 'styles': missing required key"),
    ("unknown key", {"normal": np.zeros((T, H, W), np.float32)}, "key 'normal': unknown key"),
    ("depth float32", {"depth": np.zeros((T, H, W), np.float32)}, "key 'depth': expected dtype float16"),
    ("negative depth", {"depth": np.full((T, H, W), -1.0, np.float16)}, "key 'depth': negative depth"),
    ("inf depth", {"depth": np.full((T, H, W), np.inf, np.float16)}, "key 'depth': NaN or inf"),
    ("rgb int16", {"rgb": np.zeros((2, T, H, W, 3), np.int16)}, "key 'rgb': expected dtype uint8"),
    ("NaN reward", {"reward": np.full(T, np.nan, np.float32)}, "key 'reward': NaN or inf"),
]


@pytest.mark.parametrize("name,changes,match", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_files_name_the_file_and_key(tmp_path: Path, name, changes, match) -> None:
    path = _write(tmp_path / "bad.npz", **changes)
    with pytest.raises(ClipError, match=f"bad.npz: {match}"):
        read_episode(path)


def test_truncated_file_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "cut.npz")
    data = path.read_bytes()
    for keep in (len(data) // 2, len(data) - 10, 10):
        path.write_bytes(data[:keep])
        with pytest.raises(ClipError, match="cut.npz"):
            read_episode(path)


META_BREAKS = [
    ("fps", lambda m: m.update(fps=-1), "field 'fps'"),
    ("resolution", lambda m: m.update(resolution=[16]), "field 'resolution'"),
    ("styles", lambda m: m["styles"].update(day=[]), "field 'styles.day'"),
    ("split", lambda m: m["episodes"]["ep"].update(split="dev"), "field 'episodes.ep.split'"),
    ("frames", lambda m: m["episodes"]["ep"].update(frames=0), "field 'episodes.ep.frames'"),
    ("seed", lambda m: m["episodes"]["ep"].update(seed="1"), "field 'episodes.ep.seed'"),
    ("columns", lambda m: m.update(action_columns=["forward"]), "field 'action_columns'"),
    ("kind", lambda m: m.update(kind="clips"), "field 'kind'"),
    ("missing", lambda m: m.pop("source"), "field 'source': missing"),
    ("unknown", lambda m: m.update(extra=1), "field 'extra': unknown field"),
]


@pytest.mark.parametrize("name,breaks,match", META_BREAKS, ids=[b[0] for b in META_BREAKS])
def test_broken_meta_names_the_field(tmp_path: Path, name, breaks, match) -> None:
    _record(_recorder(tmp_path), "ep", frames=2)
    meta = json.loads((tmp_path / EPISODES_FILE).read_text())
    breaks(meta)
    (tmp_path / EPISODES_FILE).write_text(json.dumps(meta))
    with pytest.raises(MetaError, match=match):
        EpisodeDataset(tmp_path)
    assert match.split(":")[0] in validate_episodes(tmp_path)[0]


def test_meta_and_file_must_agree(tmp_path: Path) -> None:
    _record(_recorder(tmp_path), "ep", frames=3)
    meta = json.loads((tmp_path / EPISODES_FILE).read_text())
    meta["episodes"]["ep"]["frames"] = 4
    (tmp_path / EPISODES_FILE).write_text(json.dumps(meta))
    with pytest.raises(ClipError, match="ep.npz: key 'rgb': 3 frames but episodes.json says 4"):
        EpisodeDataset(tmp_path).load("ep")
    (tmp_path / EPISODES_FILE).write_text("{not json")
    with pytest.raises(MetaError, match="invalid JSON"):
        read_meta(tmp_path)


def test_every_episodes_json_problem_in_one_read(tmp_path: Path) -> None:
    _record(_recorder(tmp_path), "ep00001")
    meta_path = tmp_path / EPISODES_FILE
    data = json.loads(meta_path.read_text())
    data["fps"] = -1
    data["kind"] = "clips"
    data["styles"]["day"] = []
    data["episodes"]["ep00001"]["split"] = "dev"
    data.pop("source")
    meta_path.write_text(json.dumps(data))
    with pytest.raises(MetaError) as e:
        read_meta(tmp_path)
    fields = {p.field for p in e.value.problems}
    assert fields == {"fps", "kind", "styles.day", "episodes.ep00001.split", "source"}, fields
    errors = validate_episodes(tmp_path)
    assert len(errors) == 5 and all(EPISODES_FILE in err for err in errors), errors


def test_write_start_frames(tmp_path: Path) -> None:
    from alaya.data.start_frames import write_start_frames
    from alaya.runtime.world_folder import load_start_frames
    rec = _recorder(tmp_path / "data")
    for seed in (1, 2, 3, 10):                        # seeds 2 and 10 are test episodes
        _record(rec, f"ep{seed:05d}", seed=seed)
    (tmp_path / "w" / "starts").mkdir(parents=True)
    (tmp_path / "w" / "starts" / "zz_old.png").write_bytes(b"old")
    paths = write_start_frames(tmp_path / "data", tmp_path / "w")
    assert [p.name for p in paths] == ["00_ep00002_day.png", "01_ep00010_day.png"]
    starts = load_start_frames(tmp_path / "w", size=H)
    assert len(starts) == 2
    np.testing.assert_array_equal(starts[0], _frames(2)[0, 0])               # frame 0, first style
    assert (tmp_path / "w" / "starts" / "00_ep00002_day.view.npy").exists()   # its recorded camera
    assert not (tmp_path / "w" / "starts" / "region.json").exists()           # cameras on a line: no region
    night = write_start_frames(tmp_path / "data", tmp_path / "w", count=1, split="val", style="night")
    assert [p.name for p in night] == ["00_ep00002_night.png"]               # no val: the test split
    np.testing.assert_array_equal(load_start_frames(tmp_path / "w")[0], _frames(2)[0, 1])
    with pytest.raises(KeyError, match="no style 'dusk'"):
        write_start_frames(tmp_path / "data", tmp_path / "w", style="dusk")
