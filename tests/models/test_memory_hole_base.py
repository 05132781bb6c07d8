"""The residual's base in the memory's holes: the "far" base takes the far side of a depth edge
(what walking past a near wall uncovers lies behind it), keeps the context elsewhere; the
"mirror" base continues the view into the strips a turn brings in at its sides; and a
fine-tune from a model of another base trains into the base it is given."""

import dataclasses

import pytest
import torch

from alaya.models.memory_conditioning import HOLE_BASES, frame_image, memory_base, memory_latent, to_image, to_latent
from alaya.models.memory_hole_fill import FAR_BORDER, FAR_RADIUS, edge_strip_fill, far_side_fill
from alaya.models.world import WorldModel
from tiny_memory import TINY

pytestmark = pytest.mark.usefixtures("one_torch_thread")

WALL, GROUND, CONTEXT = (0.9, 0.4, 0.1), (0.3, 0.3, 0.35), (0.6, 0.6, 0.6)


def wall_beside_a_strip(hole: slice = slice(14, 17), size: int = 32):
    """A memory render: ground 4 m away on the left, a wall 1 m away on the right, and between them
    the strip a step past the wall's edge uncovered; and a context frame of another colour."""
    rgb, depth = torch.zeros(1, 3, size, size), torch.zeros(1, 1, size, size)
    rgb[..., :16], depth[..., :16] = torch.tensor(GROUND)[:, None, None], 4.0
    rgb[..., 16:], depth[..., 16:] = torch.tensor(WALL)[:, None, None], 1.0
    cov = torch.ones(1, 1, size, size)
    cov[..., hole] = 0
    context = frame_image(torch.ones(1, 3, size, size) * torch.tensor(CONTEXT)[:, None, None],
                          torch.full((1, 1, size, size), 2.0))
    return memory_latent(rgb, cov, depth), to_latent(context), cov


def test_far_base_fills_a_disocclusion_from_behind_the_edge():
    memory, newest, cov = wall_beside_a_strip()
    base = to_image(memory_base(memory, newest, holes="far"))
    context = to_image(memory_base(memory, newest, holes="context"))
    inner = slice(FAR_BORDER, 32 - FAR_BORDER)
    strip = base[:, :3, inner, 14:17]
    torch.testing.assert_close(strip, torch.tensor(GROUND)[None, :, None, None].expand_as(strip))   # the ground, not the wall
    torch.testing.assert_close(base[:, 3, inner, 14:17], torch.full((1, 16, 3), 1 / 5))             # at the ground's depth
    for rows in (slice(0, FAR_BORDER), slice(32 - FAR_BORDER, 32)):   # at the view's edge: new view, the context
        torch.testing.assert_close(base[:, :, rows], context[:, :, rows])
    torch.testing.assert_close(base[..., :14], context[..., :14])                     # covered: the memory, as before
    torch.testing.assert_close(base[..., 17:], context[..., 17:])
    torch.testing.assert_close(base[:, 4:], cov)                                      # the gate is the coverage


def test_far_base_keeps_the_context_where_no_depth_edge_is_near():
    memory, newest, _ = wall_beside_a_strip(hole=slice(2, 5))                # a hole inside flat ground
    far, context = memory_base(memory, newest, holes="far"), memory_base(memory, newest, holes="context")
    torch.testing.assert_close(far, context)
    rgb = torch.rand(1, 3, 32, 32)                                             # no memory at all: a session's start
    empty = memory_latent(rgb, torch.zeros(1, 1, 32, 32), torch.zeros(1, 1, 32, 32))
    torch.testing.assert_close(memory_base(empty, newest, holes="far"), memory_base(empty, newest, holes="context"))


def test_far_side_fill_reaches_only_its_window_and_keeps_a_batch_apart():
    def known_and_cov(hole):
        memory, _, cov = wall_beside_a_strip(hole)
        m = to_image(memory)
        return torch.cat([m[:, :3], m[:, 4:5]], 1), cov
    narrow, wide = known_and_cov(slice(14, 17)), known_and_cov(slice(16 - 2 * FAR_RADIUS, 16 + 2 * FAR_RADIUS))
    fill, edge = far_side_fill(torch.cat([narrow[0], wide[0]]), torch.cat([narrow[1], wide[1]]))
    assert fill.shape == (2, 4, 32, 32) and edge.shape == (2, 1, 32, 32) and edge.dtype == torch.bool
    assert edge[0, :, FAR_BORDER:-FAR_BORDER, 14:17].all() and edge[0].sum() == (32 - 2 * FAR_BORDER) * 3   # the strip's holes only
    assert not edge[1].any()                   # a strip wider than the window: no hole sees both sides
    alone, alone_edge = far_side_fill(*narrow)
    torch.testing.assert_close(fill[:1], alone)
    assert torch.equal(edge[:1], alone_edge)


def turned_view(strip: int = 5, size: int = 32):
    """A memory render after a turn: covered but for a ``strip`` at the left edge, its columns
    numbered by colour (red = column / size) and depth; and a context frame of one colour."""
    columns = torch.arange(size, dtype=torch.float32) / size
    rgb = torch.stack([columns, 1 - columns, torch.full_like(columns, 0.5)])[None, :, None, :].expand(1, 3, size, size)
    depth = (2 + columns)[None, None, None, :].expand(1, 1, size, size)
    cov = torch.ones(1, 1, size, size)
    cov[..., :strip] = 0
    context = frame_image(torch.ones(1, 3, size, size) * torch.tensor(CONTEXT)[:, None, None],
                          torch.full((1, 1, size, size), 2.0))
    return memory_latent(rgb, cov, depth), to_latent(context), cov


def test_mirror_base_continues_the_view_into_a_turns_strip():
    memory, newest, cov = turned_view(strip=5)
    base, context = to_image(memory_base(memory, newest, holes="mirror")), to_image(memory_base(memory, newest))
    mirrored = torch.tensor([9, 8, 7, 6, 5]) / 32                       # column 4 takes 5, column 0 takes 9
    torch.testing.assert_close(base[0, 0, :, :5], mirrored.expand(32, 5))
    torch.testing.assert_close(base[0, 3, :, :5], (1 / (3 + mirrored)).expand(32, 5))   # with its depth (disparity 1 / (1 + d))
    torch.testing.assert_close(base[..., 5:], context[..., 5:])                         # covered: the memory
    torch.testing.assert_close(base[:, 4:], cov)                                        # the gate is the coverage
    flipped = memory_base(to_latent(to_image(memory).flip(-1)), newest, holes="mirror")   # a strip on the right
    torch.testing.assert_close(to_image(flipped)[..., -5:], base[..., :5].flip(-1))


def test_mirror_base_keeps_the_context_where_no_view_is_beside_the_strip():
    memory, newest, _ = turned_view(strip=20)            # wider than the covered run: columns 0-7 mirror past it
    base, context = to_image(memory_base(memory, newest, holes="mirror")), to_image(memory_base(memory, newest))
    torch.testing.assert_close(base[..., :8], context[..., :8])
    torch.testing.assert_close(base[0, 0, :, 8:20], (torch.arange(31, 19, -1) / 32).expand(32, 12))
    m = to_image(turned_view(strip=5)[0])
    m[:, 3:4, 10:14, 20:24] = 0                          # a hole in the middle of the view is not a side strip
    _, strip = edge_strip_fill(torch.cat([m[:, :3], m[:, 4:5]], 1), m[:, 3:4])
    assert strip.sum() == 5 * 32 and strip[..., :5].all()
    empty = memory_latent(torch.rand(1, 3, 32, 32), torch.zeros(1, 1, 32, 32), torch.zeros(1, 1, 32, 32))
    torch.testing.assert_close(memory_base(empty, newest, holes="mirror"), memory_base(empty, newest))  # a start


def test_the_cli_offers_every_hole_base_and_passes_it_to_a_fine_tune(monkeypatch):
    import alaya.train.world as wt
    from alaya.cli import build_parser
    from alaya.cli_world_train import train_world_from_args
    parser, seen = build_parser(), []
    monkeypatch.setattr(wt, "train_world", seen.append)
    base = ["train", "world", "--data", "d", "--run-dir", "r", "--memory"]
    for hole_base in HOLE_BASES:
        train_world_from_args(parser.parse_args(base + ["--memory-hole-base", hole_base]), None)
        assert seen[-1].hole_base == seen[-1].model.memory_hole_base == hole_base
    train_world_from_args(parser.parse_args(base + ["--init", "w"]), None)
    assert seen[-1].hole_base is None and seen[-1].model.memory_hole_base == "context"   # a new model's default
    with pytest.raises(SystemExit):
        parser.parse_args(base + ["--memory-hole-base", "zero"])
    with pytest.raises(ValueError, match="memory_hole_base"):
        dataclasses.replace(TINY, memory_hole_base="zero")


def test_a_fine_tune_trains_into_the_hole_base_it_is_given(tmp_path):
    from tiny_world import record_tiny_episodes

    from alaya.train.loop import TrainConfig
    from alaya.train.world import train_world
    from alaya.train.world_config import WorldTrainConfig
    episodes = record_tiny_episodes(tmp_path / "episodes", episodes=3)
    WorldModel(TINY).save_pretrained(tmp_path / "init")
    for hole_base, expect in (("far", "far"), (None, TINY.memory_hole_base)):
        out = tmp_path / f"out_{hole_base}"
        train_world(WorldTrainConfig(data=str(episodes), init=str(tmp_path / "init"), hole_base=hole_base, out=str(out),
                                     model=TINY, error_prob=0.0, val_batches=1, val_batch_size=2,
                                     train=TrainConfig(run_dir=str(tmp_path / f"run_{hole_base}"), steps=1, batch_size=2,
                                                       log_every=1, val_every=1, ckpt_every=1, progress=False)))
        assert WorldModel.from_pretrained(out).config.memory_hole_base == expect
