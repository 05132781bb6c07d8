"""A memory render's disocclusions shown as memory (``memory_fill_disocclusions``): the strip a step
past a near wall uncovers takes the ground behind the wall's edge, colour and depth, and counts as
covered; holes without a depth edge, or at the view's edge, stay holes; and play, the cached
training renders and the training rollouts all show the network the render through one function."""

import dataclasses
import inspect

import pytest
import torch

from alaya.models.memory_conditioning import fill_disocclusions, shown_render
from alaya.models.memory_geometry import fill_pinholes
from alaya.models.memory_hole_fill import FAR_BORDER
from tiny_memory import TINY

pytestmark = pytest.mark.usefixtures("one_torch_thread")

WALL, GROUND = (0.9, 0.4, 0.1), (0.3, 0.3, 0.35)


def render(hole: slice = slice(14, 17), size: int = 32):
    """Ground 4 m away on the left, a wall 1 m away on the right, and the strip ``hole`` between them uncovered."""
    rgb, depth = torch.zeros(1, 3, size, size), torch.zeros(1, 1, size, size)
    rgb[..., :16], depth[..., :16] = torch.tensor(GROUND)[:, None, None], 4.0
    rgb[..., 16:], depth[..., 16:] = torch.tensor(WALL)[:, None, None], 1.0
    cov = torch.ones(1, 1, size, size)
    cov[..., hole] = 0
    return rgb * cov, cov, depth * cov


def test_a_disocclusion_takes_the_ground_behind_the_edge_and_counts_as_covered():
    rgb, cov, depth = render()
    out_rgb, out_cov, out_depth = fill_disocclusions(rgb, cov, depth)
    inner = slice(FAR_BORDER, 32 - FAR_BORDER)
    strip = out_rgb[:, :, inner, 14:17]
    torch.testing.assert_close(strip, torch.tensor(GROUND)[None, :, None, None].expand_as(strip))
    torch.testing.assert_close(out_depth[:, :, inner, 14:17], torch.full((1, 1, 16, 3), 4.0))
    assert bool((out_cov[:, :, inner] == 1).all())
    for rows in (slice(0, FAR_BORDER), slice(32 - FAR_BORDER, 32)):    # at the view's edge: new view, still a hole
        assert bool((out_cov[:, :, rows, 14:17] == 0).all()) and bool((out_rgb[:, :, rows, 14:17] == 0).all())
    covered = cov > 0.5
    for a, b in ((out_rgb, rgb), (out_depth, depth)):                    # what was covered is untouched
        assert torch.equal(a[covered.expand_as(a)], b[covered.expand_as(b)])
    assert torch.equal(cov, render()[1])                                 # pure


def test_a_hole_in_flat_ground_stays_a_hole():
    rgb, cov, depth = render(hole=slice(2, 5))
    for a, b in zip(fill_disocclusions(rgb, cov, depth), (rgb, cov, depth)):
        torch.testing.assert_close(a, b)


def test_the_shown_render_fills_pinholes_and_disocclusions_only_when_the_config_asks():
    rgb, cov, depth = render()
    cov[..., 4, 4] = 0                                                   # a pinhole in the ground
    plain = shown_render(rgb, cov, depth, TINY)
    for a, b in zip(plain, fill_pinholes(rgb, cov, depth, TINY.memory_fill_pinholes)):
        torch.testing.assert_close(a, b)
    assert float(plain[1][..., 12, 15]) == 0                             # the disocclusion is still a hole
    filled = shown_render(rgb, cov, depth, dataclasses.replace(TINY, memory_fill_disocclusions=True))
    assert float(filled[1][..., 4, 4]) == 1 and float(filled[1][..., 12, 15]) == 1
    torch.testing.assert_close(filled[2][..., 12, 15], torch.tensor([[4.0]]))


def test_play_training_and_rollouts_show_the_render_through_one_function():
    from alaya.runtime import world_session
    from alaya.train import world_memory_loss, world_memory_rollout
    for module in (world_session, world_memory_loss, world_memory_rollout):
        source = inspect.getsource(module)
        assert "shown_render(" in source and "fill_pinholes(" not in source, module.__name__


def test_the_cli_flag_reaches_a_new_model_and_a_fine_tune(monkeypatch):
    import alaya.train.world as wt
    from alaya.cli import build_parser
    from alaya.cli_world_train import train_world_from_args
    parser, seen = build_parser(), []
    monkeypatch.setattr(wt, "train_world", seen.append)
    base = ["train", "world", "--data", "d", "--run-dir", "r", "--memory"]
    train_world_from_args(parser.parse_args(base + ["--memory-fill-disocclusions"]), None)
    assert seen[-1].model.memory_fill_disocclusions and seen[-1].fill_disocclusions
    train_world_from_args(parser.parse_args(base + ["--init", "w"]), None)
    assert seen[-1].fill_disocclusions is None                         # a fine-tune keeps the init's


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    from tiny_world import record_tiny_episodes
    return record_tiny_episodes(tmp_path_factory.mktemp("episodes"), episodes=4)


def test_a_fine_tune_trains_into_the_disocclusion_fill(episodes, tmp_path):
    from alaya.models.world import WorldModel
    from alaya.train.loop import TrainConfig
    from alaya.train.world import train_world
    from alaya.train.world_config import WorldTrainConfig
    WorldModel(TINY).save_pretrained(tmp_path / "init")
    train_world(WorldTrainConfig(data=str(episodes), init=str(tmp_path / "init"), fill_disocclusions=True,
                                 out=str(tmp_path / "out"), error_prob=0.0, memory_rollout=2, memory_rollout_prob=1.0,
                                 val_batches=1, val_batch_size=2,
                                 train=TrainConfig(run_dir=str(tmp_path / "run"), steps=1, batch_size=2,
                                                   progress=False)))
    assert WorldModel.from_pretrained(tmp_path / "out").config.memory_fill_disocclusions
    assert not WorldModel.from_pretrained(tmp_path / "init").config.memory_fill_disocclusions
