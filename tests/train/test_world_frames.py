"""Which frames world training draws (``world_data.draw_frames``)."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from alaya.data.actions import ACTION_COLUMNS
from alaya.train.world_data import draw_frames


def _episodes():
    actions = torch.zeros(3, 200, len(ACTION_COLUMNS))
    actions[:, :, 0] = 1.0                                     # walking throughout
    actions[0, 50, ACTION_COLUMNS.index("spell")] = 1.0
    actions[0, 195, ACTION_COLUMNS.index("attack")] = 1.0      # its span runs past the end
    actions[1, 3, ACTION_COLUMNS.index("summon")] = 1.0        # its span starts below ``low``
    return SimpleNamespace(actions=actions)                    # episode 2: no one-shot action


def test_without_focus_the_draw_is_the_uniform_one():
    data, e = _episodes(), np.array([0, 1, 2, 0, 1])
    got = draw_frames(data, np.random.default_rng(7), e, 1, 200)
    assert np.array_equal(got, np.random.default_rng(7).integers(1, 200, size=5))


def test_focused_frames_follow_a_one_shot_action_within_the_span_and_range():
    data = _episodes()
    e = np.repeat([0, 1, 2], 400)
    n = draw_frames(data, np.random.default_rng(0), e, 5, 200, focus=1.0, span=12)
    assert ((n >= 5) & (n < 200)).all()
    first = n[e == 0]
    assert set(first) <= set(range(50, 62)) | set(range(195, 200))
    assert set(first) >= {50, 61, 195, 199}                    # the whole span is drawn, clipped at the end
    assert set(n[e == 1]) == set(range(5, 15))                 # 3 ... 14, clipped at low = 5
    assert len(set(n[e == 2])) > 100                           # no action: uniform


def test_a_share_of_the_frames_is_focused():
    data = _episodes()
    n = draw_frames(data, np.random.default_rng(1), np.zeros(4000, int), 1, 200, focus=0.25, span=12)
    near = np.isin(n, list(range(50, 62)) + list(range(195, 200)))
    assert 0.29 < near.mean() < 0.34            # 25% focused + 75% x 17/199 of the uniform rest: 0.314


def test_the_focus_is_checked():
    from alaya.train.world_config import WorldTrainConfig
    with pytest.raises(ValueError, match="action_focus must"):
        WorldTrainConfig(data="d", action_focus=1.5)
    with pytest.raises(ValueError, match="action_focus_span"):
        WorldTrainConfig(data="d", action_focus_span=0)


def test_novelty_weights_lift_what_the_memory_does_not_show_and_keep_each_frames_mean():
    from alaya.train.world_memory_loss import novelty_weights
    gate = torch.ones(3, 1, 32, 32)
    gate[0, :, :, :4] = 0                       # frame 0: a 4-pixel strip the memory lacks
    gate[1, :, 8:12, 8:12] = 0.0                # frame 1: an orb's patch
    w = novelty_weights(gate, 20.0)
    assert w.shape == (3, 1, 8, 8)
    assert torch.allclose(w.mean((1, 2, 3)), torch.ones(3))
    assert float(w[0, 0, :, 0].min()) > 5 * float(w[0, 0, :, 1:].max())    # the strip counts far more
    assert float(w[1, 0, 2, 2]) > 5 * float(w[1, 0, 0, 0])
    assert torch.allclose(w[2], torch.ones(1, 8, 8))                        # all memory: uniform
    assert torch.equal(novelty_weights(gate, 0.0), torch.ones(3, 1, 8, 8))
    with pytest.raises(ValueError, match="novelty weight"):
        novelty_weights(gate, -1.0)
