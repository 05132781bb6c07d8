"""A generated frame puts nothing where an observed frame saw through (``in_observed_free_space``,
``generated_insert(observed=)``): the start's view survives content generated far out."""

import numpy as np
import pytest
import torch

from alaya.models.memory_conditioning import (ObservedFrame, frame_image, generated_insert, in_observed_free_space,
                                              kinematic_view, to_image, to_latent)
from alaya.models.view_warp import pinhole

pytestmark = pytest.mark.usefixtures("one_torch_thread")

S = 32
K = pinhole(S, 70.0)


def observed(depth_value=4.0, sky_rows=0):
    depth = torch.full((S, S), depth_value)
    depth[:sky_rows] = 0
    return ObservedFrame(K, kinematic_view(torch.zeros(1, 3), 0.0, 1.4), depth)


def test_points_nearer_than_the_observed_surface_are_in_its_free_space():
    obs = observed(4.0)
    view = obs.view
    near = in_observed_free_space(torch.full((S, S), 2.0), K, view, obs, sky_depth=25.0)
    assert bool(near.all())                                           # 2 m in front of a wall seen at 4 m
    at = in_observed_free_space(torch.full((S, S), 3.9), K, view, obs, sky_depth=25.0)
    behind = in_observed_free_space(torch.full((S, S), 6.0), K, view, obs, sky_depth=25.0)
    assert not bool(at.any()) and not bool(behind.any())              # on the surface (tolerance) or past it
    assert not bool(in_observed_free_space(torch.zeros(S, S), K, view, obs, 25.0).any())   # nothing to insert


def test_outside_the_observed_view_nothing_is_known():
    obs = observed(4.0)
    turned = kinematic_view(torch.tensor([[0.0, 0.0, np.pi]]), 0.0, 1.4)     # looking back: behind the observer
    assert not bool(in_observed_free_space(torch.full((S, S), 2.0), K, turned, obs, 25.0).any())
    moved = kinematic_view(torch.tensor([[3.0, 0.0, 0.0]]), 0.0, 1.4)        # 3 m ahead, looking on
    assert not bool(in_observed_free_space(torch.full((S, S), 1.0), K, moved, obs, 25.0).any())   # the wall itself
    before = in_observed_free_space(torch.full((S, S), 0.3), K, moved, obs, 25.0)              # 0.7 m before it
    assert bool(before[S // 2 - 4:S // 2 + 4, S // 2 - 4:S // 2 + 4].all())


def test_the_observed_sky_is_seen_through_up_to_the_backdrop():
    obs = observed(4.0, sky_rows=10)
    far = torch.full((S, S), 10.0)
    mask = in_observed_free_space(far, K, obs.view, obs, sky_depth=25.0)
    assert bool(mask[:9].all()) and not bool(mask[11:].any())         # the sky rows only (10 m < 25 m)
    assert not bool(in_observed_free_space(torch.full((S, S), 30.0), K, obs.view, obs, 25.0).any())
    assert bool(in_observed_free_space(torch.full((S, S), 30.0), K, obs.view, obs, 0.0)[:9].all())   # no end


def test_a_generated_insert_leaves_out_what_lies_in_observed_free_space():
    obs = observed(4.0)
    rgb = torch.rand(1, 3, S, S)
    depth = torch.full((1, 1, S, S), 4.0)
    depth[..., :, :8] = 1.5                                           # a body guessed 2.5 m too near
    image = to_image(to_latent(frame_image(rgb, depth)))[0]
    args = (image, K, obs.view, None, False, 25.0, 0.5)
    _, plain, _ = generated_insert(*args)
    _, carved, _ = generated_insert(*args, observed=obs)
    assert bool((plain[:, :8] > 0).all()) and bool((carved[:, :8] == 0).all())
    torch.testing.assert_close(carved[:, 8:], plain[:, 8:])
