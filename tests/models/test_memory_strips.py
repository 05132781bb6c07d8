"""A turn's side strips shown as memory (``memory_fill_strips``): the uncovered run at the view's
edge takes the covered view beside it mirrored, colour and depth, and counts as covered; a hole
inside the view stays a hole; the option is off unless the config turns it on."""

import dataclasses

import pytest
import torch

from alaya.models.memory_conditioning import fill_strips, shown_render
from tiny_memory import TINY

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def render(size: int = 32, strip: int = 5):
    """A view whose columns carry their own colour and depth (column c: grey c / size, c + 1
    metres), the first ``strip`` columns uncovered and a 2-pixel hole in the middle."""
    col = torch.arange(size, dtype=torch.float32)
    rgb = (col / size).expand(1, 3, size, size).clone()
    depth = (col + 1).expand(1, 1, size, size).clone()
    cov = torch.ones(1, 1, size, size)
    cov[..., :strip] = 0
    cov[..., 15:17] = 0
    return rgb * cov, cov, depth * cov


def test_a_side_strip_takes_the_view_beside_it_mirrored_and_counts_as_covered():
    rgb, cov, depth = render()
    out_rgb, out_cov, out_depth = fill_strips(rgb, cov, depth)
    for c in range(5):                                    # hole column c takes column 2 * 5 - 1 - c
        source = 9 - c
        torch.testing.assert_close(out_rgb[..., c], rgb[..., source])
        torch.testing.assert_close(out_depth[..., c], depth[..., source], rtol=1e-3, atol=1e-3)
    assert bool((out_cov[..., :5] == 1).all())
    assert bool((out_cov[..., 15:17] == 0).all()) and bool((out_rgb[..., 15:17] == 0).all())   # inside: a hole
    torch.testing.assert_close(out_rgb[..., 5:15], rgb[..., 5:15])                                # covered: as it was
    assert rgb.abs().sum() > 0 and bool((cov[..., :5] == 0).all())                                # inputs untouched


def test_shown_render_fills_strips_only_when_the_config_says_so():
    rgb, cov, depth = render()
    off = dataclasses.replace(TINY, memory_fill_strips=False, memory_fill_pinholes=0, memory_fill_disocclusions=False)
    on = dataclasses.replace(off, memory_fill_strips=True)
    assert bool((shown_render(rgb, cov, depth, off)[1][..., :5] == 0).all())
    assert bool((shown_render(rgb, cov, depth, on)[1][..., :5] == 1).all())
