"""Whether a live script is of the game's kind (``alaya.evaluation.live_structure``): other worlds
of the game score about 1, a copy of the game below 1, a patchwork of blocks and streaks above
it, whatever their palette; one scene has no reference."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from alaya.evaluation.live_structure import game_likeness as likeness, halvings, thin


def game_likeness(gen, real):
    return likeness(gen, real, samples=1200)


def world(seed, n=12, size=48):
    """A world of the game's kind: flat-shaded boxes over a two-colour checker floor, its
    colours the world's own, uint8 (n, size, size, 3)."""
    g = torch.Generator().manual_seed(seed)
    a, b = torch.rand(3, 1, 1, generator=g), torch.rand(3, 1, 1, generator=g)
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    frames = []
    for _ in range(n):
        period = int(torch.randint(4, 10, (1,), generator=g))
        x = torch.where(((yy // period + xx // period) % 2 == 0), a, b).clone()
        for _ in range(4):
            y0, x0 = (int(v) for v in torch.randint(0, size - 8, (2,), generator=g))
            h, w = (int(v) for v in torch.randint(4, size // 2, (2,), generator=g))
            x[:, y0:y0 + h, x0:x0 + w] = torch.rand(3, 1, 1, generator=g)
        frames.append(x)
    return (torch.stack(frames).permute(0, 2, 3, 1) * 255).round().byte().numpy()


def streaks(frames):
    """Each frame's columns drawn down from its middle row: vertical streaks in its colours."""
    return np.ascontiguousarray(np.repeat(frames[:, frames.shape[1] // 2:frames.shape[1] // 2 + 1], frames.shape[1], 1))


def squares(frames, block=8):
    x = torch.from_numpy(frames).permute(0, 3, 1, 2).float()
    x = F.interpolate(F.avg_pool2d(x, block), scale_factor=block, mode="nearest")
    return x.permute(0, 2, 3, 1).round().byte().numpy()


def test_the_game_scores_below_its_other_worlds_and_a_patchwork_or_streaks_above():
    real = [world(s) for s in range(6)]
    copy = game_likeness([r.copy() for r in real], real)
    assert copy["structure_game_ratio"] < 0.75          # the sampling floor only
    dimmer = game_likeness([(r * 0.5 + 60).astype(np.uint8) for r in real], real)    # palette and contrast do not count
    assert dimmer["structure_game_ratio"] < 0.75
    other_game = game_likeness([world(s) for s in range(10, 16)], real)     # plausible worlds of its kind
    assert 0.8 < other_game["structure_game_ratio"] < 1.4
    for bad in (streaks, squares):
        got = game_likeness([bad(r) for r in real], real)
        assert got["structure_game_ratio"] > 2.0, bad.__name__
        assert got["structure_other_worlds"] == pytest.approx(copy["structure_other_worlds"])   # the game's own reference


def test_one_scene_has_no_reference_and_inputs_are_checked():
    r = world(0, n=4)
    assert game_likeness([r], [r]) == {"structure_pooled": None, "structure_other_worlds": None,
                                       "structure_game_ratio": None}
    with pytest.raises(ValueError, match="one frame set per scene"):
        game_likeness([r, r], [r])
    assert thin(np.zeros((25, 8, 8, 3), np.uint8)).shape == (3, 8, 8, 3)


def test_halvings_split_every_scene_once_and_count_no_split_twice():
    splits = halvings(6)
    assert len(splits) == 10 and len({tuple(a) for a, _ in splits}) == 10
    assert all(a[0] == 0 and sorted(a + b) == list(range(6)) and len(a) == len(b) == 3 for a, b in splits)
    assert halvings(2) == [([0], [1])] and halvings(3) == [([0], [1, 2])]
    assert len(halvings(12)) == 10                                    # capped
