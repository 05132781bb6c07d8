"""``alaya render --clip`` checks the clip against the contract before it loads any weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from alaya.cli import main
from alaya.data.clipio import ClipError, write_clip
from alaya.data.synthetic import make_synthetic_clip, write_synthetic_dataset
from alaya.data.validate import read_valid_clip


def _render(clip: Path, tmp_path: Path) -> list[str]:
    return ["render", "--clip", str(clip), "--prompt", "x", "--out", str(tmp_path / "o.gif"),
            "--weights", str(tmp_path / "no_weights"), "--autoencoder", str(tmp_path / "no_ae")]


def test_render_refuses_a_clip_that_breaks_the_contract(tmp_path: Path, capsys) -> None:
    clip = make_synthetic_clip(T=3, H=12, W=16, S=1)
    clip["normal"] = (clip["normal"].astype(np.float32) * 3).astype(np.float16)   # not unit length
    clip["depth"] = clip["depth"].copy()
    clip["depth"][1, 2, 3] = np.inf
    write_clip(tmp_path / "bad.npz", clip)            # keys, dtypes and shapes are fine
    assert main(_render(tmp_path / "bad.npz", tmp_path)) == 2
    err = capsys.readouterr().err
    assert "bad.npz" in err and "key 'normal'" in err and "key 'depth'" in err, err
    assert "no_weights" not in err, "the clip is refused before the renderer loads"


def test_a_valid_clip_goes_on_to_the_renderer(tmp_path: Path, capsys) -> None:
    write_clip(tmp_path / "good.npz", make_synthetic_clip(T=3, H=12, W=16, S=1))
    assert main(_render(tmp_path / "good.npz", tmp_path)) == 2
    assert "no_weights" in capsys.readouterr().err      # it failed on the weights, not the clip


def test_clip_in_a_dataset_is_checked_against_dataset_json(tmp_path: Path) -> None:
    write_synthetic_dataset(tmp_path, n_clips=1, T=3, H=12, W=16, S=1)
    path = next((tmp_path / "clips").glob("*.npz"))
    assert read_valid_clip(path)["depth"].shape == (3, 12, 16)
    write_clip(path, make_synthetic_clip(T=4, H=12, W=16, S=1))
    with pytest.raises(ClipError, match="key 'depth'.*frames"):
        read_valid_clip(path)
