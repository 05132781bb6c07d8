"""Honest metrics on other data: scripted inputs fitted to the data's action ranges, and an IDM
only judges episodes of the generator it was trained on."""

import json

import numpy as np

from alaya.data.actions import ACTION_COLUMNS
from alaya.evaluation.other_data import fit_actions, idm_mismatch


def test_fit_actions_clips_to_the_data_and_names_the_changed_columns():
    a = np.zeros((4, 8), np.float32)
    a[:, 0] = [1, -1, 0.5, -0.5]             # forward, also backwards
    a[:, 1] = 1                              # strafe, which the data never has
    a[:, 2] = [1, -1, 0, 0]                  # turn, both ways as the data
    out, changed = fit_actions(a, {"forward": (0.0, 1.0), "turn": (-1.0, 1.0)})
    assert changed == ["forward", "strafe"]
    np.testing.assert_array_equal(out[:, 0], [1, 0, 0.5, 0])
    assert not out[:, 1].any() and np.array_equal(out[:, 2], a[:, 2])
    assert fit_actions(a, None) == (a, [])
    assert len(ACTION_COLUMNS) == 8


def test_an_idm_judges_only_its_own_kind_of_episodes(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"trained": {"train_episodes": ["ep00000", "ep00003"]}}))
    assert idm_mismatch(tmp_path, ["ep00100", "ep00101"]) is None           # our game, other seeds
    reason = idm_mismatch(tmp_path, ["MiniWorld-Maze-v0-seed0"])
    assert "trained on other data" in reason and "MiniWorld-Maze-v0-seed*" in reason
    assert "unreadable" in idm_mismatch(tmp_path / "missing", ["ep00000"])
