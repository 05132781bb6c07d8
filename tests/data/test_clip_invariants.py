"""check_invariants: the synthetic clip passes; each kind of semantic breakage is reported
naming the path and the key."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from alaya.data.clipio import check_invariants
from alaya.data.synthetic import make_synthetic_clip

Clip = dict[str, np.ndarray]


def test_synthetic_clip_is_valid() -> None:
    for seed in range(3):
        clip = make_synthetic_clip(T=4, H=12, W=20, S=3, A=2, seed=seed)
        assert check_invariants(clip, num_materials=2, path="x.npz") == []
        assert (clip["mask"] == 1).any() and (clip["mask"] == 0).any()
        assert np.abs(clip["motion"][1:].astype(np.float32)).max() > 0.1


def _set(key: str, index: tuple, value: float) -> Callable[[Clip], None]:
    def mutate(c: Clip) -> None:
        c[key][index] = value
    return mutate


def _fg(c: Clip) -> tuple:
    return tuple(np.argwhere(c["mask"] == 1)[0])


def _bg(c: Clip) -> tuple:
    return tuple(np.argwhere(c["mask"] == 0)[0])


CASES: list[tuple[str, Callable[[Clip], None], str]] = [
    ("depth", lambda c: c["depth"].__setitem__(_fg(c), np.nan), "NaN"),
    ("depth", lambda c: c["depth"].__setitem__(_bg(c), 1.0), "where mask == 0"),
    ("depth", lambda c: c["depth"].__setitem__(_fg(c), 0.0), "> 0"),
    ("mask", lambda c: c["mask"].__setitem__(_bg(c), 2), "0 and 1"),
    ("normal", lambda c: c["normal"].__setitem__(_fg(c), (0.0, 0.0, 0.9)), "unit"),
    ("normal", lambda c: c["normal"].__setitem__(_bg(c), (0.0, 0.0, 1.0)), "mask == 0"),
    ("albedo", lambda c: c["albedo"].__setitem__(_bg(c), 5), "mask == 0"),
    ("roughness", lambda c: c["roughness"].__setitem__(_bg(c), 5), "mask == 0"),
    ("instance", lambda c: c["instance"].__setitem__(_bg(c), 3), "mask == 0"),
    ("material", lambda c: c["material"].__setitem__(_bg(c), 1), "mask == 0"),
    ("material", lambda c: c["material"].__setitem__(_fg(c), 0), "mask == 1"),
    ("material", lambda c: c["material"].__setitem__(_fg(c), 3), "library"),
    ("motion", _set("motion", (0, 3, 3, 0), 0.5), "t = 0"),
    ("motion", _set("motion", (1, 3, 3, 1), 100.0), "< 64"),
    ("motion", _set("motion", (1, 3, 3, 1), np.inf), "NaN or inf"),
    ("world_to_camera", _set("world_to_camera", (1, 0, 0), 2.0), "orthonormal"),
    ("world_to_camera", _set("world_to_camera", (1, 3, 0), 0.5), "last row"),
    ("world_to_camera", lambda c: c["world_to_camera"].__setitem__(
        (1, slice(0, 3), 0), -c["world_to_camera"][1, :3, 0]), "reflection"),
    ("K", _set("K", (2, 0), 0.1), "last row"),
    ("K", _set("K", (0, 0), -3.0), "fx, fy"),
    ("K", _set("K", (0, 2), 40.0), "principal point"),
    ("actions", _set("actions", (1, 0), np.nan), "NaN or inf"),
    ("styles", lambda c: c.__setitem__("styles", np.array(["plain", "plain"])), "unique"),
    ("rgb", lambda c: c.__setitem__("rgb", c["rgb"][:1]), "style stacks"),
]


@pytest.mark.parametrize("key, mutate, words", CASES, ids=[f"{k}-{w}" for k, _, w in CASES])
def test_breakage_is_reported(key: str, mutate: Callable[[Clip], None], words: str) -> None:
    clip = make_synthetic_clip(T=3, H=16, W=16, S=2, A=2)
    mutate(clip)
    errors = check_invariants(clip, num_materials=2, path="clips/abc.npz")
    assert errors, "breakage not detected"
    assert all(e.startswith("clips/abc.npz: key '") for e in errors), errors
    hits = [e for e in errors if f"key '{key}'" in e and words in e]
    assert hits, errors


def test_subset_of_keys_is_checked() -> None:
    clip = make_synthetic_clip()
    sub = {"depth": clip["depth"].copy(), "mask": clip["mask"]}
    assert check_invariants(sub) == []
    sub["depth"][_fg(clip)] = np.inf
    assert any("'depth'" in e and "<memory>" in e for e in check_invariants(sub))
