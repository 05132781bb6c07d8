"""The inverse-dynamics model of the world-model evaluation, trained on the rolled world with
flashes for the one-shot keys: it learns the visible actions, and its ratio names a world that
does not show them."""

import numpy as np
import pytest
import torch

from alaya.evaluation.inverse_dynamics import IDMConfig, InverseDynamics, ONE_SHOT_CLASSES, accuracy, train_idm
from alaya.evaluation.world_replay_metrics import idm_metrics
from rolled_world import SIZE, Frozen, Replay, episodes, make_episode, run  # noqa: F401  (episodes: a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def idm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("idm")
    paths = []
    for seed in range(10, 26):                          # many textures, so that it learns motion
        paths.append(folder / f"ep{seed}.npz")
        np.savez(paths[-1], **make_episode(seed, frames=24, flash=True))
    model = train_idm(paths, folder / "idm", steps=300, batch_size=16, val_every=150, progress=False,
                      config=IDMConfig(channels=(16, 32), size=32, pool=4, hidden=32), device="cpu")
    return model, folder / "idm"


def test_idm_learns_visible_actions_and_round_trips(idm):
    model, folder = idm
    ep = make_episode(99, frames=100, flash=True)        # a texture it has not seen
    prev, nxt = ep["rgb"][:, :-1].reshape(-1, SIZE, SIZE, 3), ep["rgb"][:, 1:].reshape(-1, SIZE, SIZE, 3)
    acc = accuracy(model, prev, nxt, np.concatenate([ep["actions"][1:]] * 2))
    assert acc["balanced_accuracy_turn"] > 0.5 and acc["balanced_accuracy_pitch"] > 0.5, acc   # chance 1/3
    assert acc["balanced_accuracy_one_shot"] > 0.6, acc                                        # chance 1/5
    recalls = [acc[f"recall_{c}"] for c in ONE_SHOT_CLASSES if f"recall_{c}" in acc]
    assert len(recalls) >= 2 and np.isclose(np.mean(recalls), acc["balanced_accuracy_one_shot"]), acc
    untrained = accuracy(InverseDynamics(model.config), prev, nxt, np.concatenate([ep["actions"][1:]] * 2))
    assert untrained["balanced_accuracy"] < acc["balanced_accuracy"] - 0.2
    loaded = InverseDynamics.from_pretrained(folder)
    assert loaded.config == model.config
    assert torch.equal(loaded.predict(prev, nxt), model.predict(prev, nxt))
    card = (folder / "MODEL_CARD.md").read_text()
    assert "balanced_accuracy" in card and "Steps: 300" in card
    assert len((folder / "metrics.jsonl").read_text().splitlines()) == 300


def test_idm_ratio_is_one_for_replay_and_drops_for_a_frozen_world(idm, episodes):
    model, _ = idm
    replay = run(Replay(episodes), episodes, model)
    assert replay["idm_ratio"] == 1.0 and replay["idm_accuracy_real"] > 0.5
    frozen = run(Frozen(), episodes, model)
    assert frozen["idm_accuracy_real"] == replay["idm_accuracy_real"]
    assert frozen["idm_ratio"] < 0.95                   # forward, strafe, one_shot: "still" is right here
    real, gen = frozen["idm"]["real"], frozen["idm"]["generated"]
    assert gen["balanced_accuracy_turn"] < real["balanced_accuracy_turn"] - 0.15
    assert "idm_accuracy_generated" in frozen["per_style"]["day"]


def test_idm_action_recall_names_the_keys_a_world_does_not_show(idm):
    model, _ = idm
    ep = make_episode(99, frames=100, flash=True)
    real, actions = ep["rgb"][0], ep["actions"][1:]
    same = idm_metrics(model, [(real, real, actions)])
    shots = same["idm_action_recall_ratio"]
    assert shots and "none" not in shots and all(v == 1.0 for v in shots.values()), shots
    assert same["idm_action_recall_ratio_min"] == 1.0
    unlit = idm_metrics(model, [(real, make_episode(99, frames=100)["rgb"][0], actions)])   # the moves, no flashes
    assert unlit["idm_action_recall_ratio_min"] < 0.5, unlit["idm_action_recall_ratio"]
    assert unlit["idm_ratio"] > unlit["idm_action_recall_ratio_min"]      # the head mean hides what this names
