"""The action row: its checks name the frame and column; text resolves to one-shot actions."""

import math

import numpy as np
import pytest

from alaya.data.actions import ACTION_COLUMNS, ActionError, ActionText, action_vector, check_actions, one_shot


def test_rows_and_sequences_are_checked():
    row = action_vector(1.0, -0.5, 0.25, 0.0, "summon")
    assert row.dtype == np.float32 and row.shape == (8,) and one_shot(row) == "summon"
    assert one_shot(action_vector(forward=1.0)) is None
    seq = np.zeros((5, 8), np.float32)
    assert check_actions(seq).shape == (5, 8)
    seq[3, ACTION_COLUMNS.index("pitch")] = 1.5
    with pytest.raises(ActionError, match="frame 3 column 'pitch' must be in"):
        check_actions(seq)
    seq[3] = 0
    seq[2, 4:6] = 1
    with pytest.raises(ActionError, match="frame 2 at most one one-shot action per frame, got jump, attack"):
        check_actions(seq)
    with pytest.raises(ActionError, match="column 'spell' must be 0 or 1, got 0.5"):
        check_actions([0, 0, 0, 0, 0, 0, 0.5, 0])
    with pytest.raises(ActionError, match="must be finite"):
        check_actions([0, math.inf, 0, 0, 0, 0, 0, 0])
    with pytest.raises(ActionError, match="not a numeric array"):
        check_actions(["left"] * 8)
    with pytest.raises(ActionError, match="unknown action 'fly'"):
        action_vector(act="fly")
    with pytest.raises(ActionError, match="turn must be a number"):
        action_vector(turn="left")


@pytest.fixture(scope="module")
def resolver():
    from alaya.text import PromptEncoder
    return ActionText(PromptEncoder())


@pytest.mark.parametrize("text,action", [("cast a fireball", "spell"), ("shoot a magic missile", "spell"),
                                         ("swing your sword", "attack"), ("jump over it", "jump"),
                                         ("summon a golem", "summon"), ("SPELL", "spell")])
def test_text_resolves_to_the_nearest_action(resolver, text, action):
    assert resolver.resolve(text) == action


def test_unrelated_text_is_refused_with_the_closest_phrasing(resolver):
    with pytest.raises(ActionError, match="matches no action .*closest"):
        resolver.resolve("the quarterly tax report")
    with pytest.raises(ActionError, match="non-empty"):
        resolver.resolve("  ")
