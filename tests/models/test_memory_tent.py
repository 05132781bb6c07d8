"""The scene memory's colour blend against the engine: a smaller tent keeps magnified edges
crisper, a half-pixel smallest radius keeps a walking step as sharp as the engine's frame."""

import pytest
import torch

from alaya.models.scene_memory import SceneMemory, SceneMemoryConfig
from memory_shots import SIZE, held_game, moved, psnr, shot

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def game():
    yield from held_game()


def test_a_smaller_tent_keeps_magnified_edges_crisper_and_the_inserting_view_exact(game):
    """Walked up to, a tent of 0.5 or 0 blends fewer magnified points: more of the frame's
    high frequencies (Laplacian variance) come back than with the full tent; at the inserting
    view every tent gives the frame back (to its uint8 colours)."""
    view, K = game.world_to_camera, game.K
    rgb, depth = shot(game, view)
    near = moved(view)
    near[2, 3] += 2.0                                        # 2 m ahead
    lap = torch.tensor([[[[0.0, 1, 0], [1, -4, 1], [0, 1, 0]]]])
    energy = {}
    for tent in (1.0, 0.5, 0.0):
        memory = SceneMemory(SceneMemoryConfig(tent=tent))
        memory.insert(rgb, depth, K, view, time=0)
        same = memory.render(K, view, SIZE, SIZE)
        covered = same.coverage.bool()
        assert psnr(same.rgb, rgb, covered) >= 45.0          # (uint8 colours)
        r = memory.render(K, near, SIZE, SIZE)
        inner = -torch.nn.functional.max_pool2d(-r.coverage[None], 3, 1, 1)[0, 0, 1:-1, 1:-1] > 0   # not hole edges
        energy[tent] = float(torch.nn.functional.conv2d(r.rgb.mean(0)[None, None], lap)[0, 0][inner].var())
    assert energy[0.0] > energy[0.5] > 1.3 * energy[1.0]
    with pytest.raises(ValueError, match="tent"):
        SceneMemoryConfig(tent=-1.0)


def test_a_half_pixel_tent_keeps_a_step_forward_as_sharp_as_the_engine(game):
    """One walking frame's step (0.1 m) shifts most pixels by a fraction of a pixel: a tent at least
    a pixel wide blends each pixel's nearest points (bilinear resampling, softer than the engine's
    frame); a half-pixel smallest radius keeps each pixel's own point, so the render keeps the
    engine's high frequencies, and it is no further from the engine's frame."""
    view, K = game.world_to_camera, game.K
    rgb, depth = shot(game, view)
    ahead = moved(view)
    ahead[2, 3] += 0.1
    truth, _ = shot(game, ahead)
    lap = torch.tensor([[[[0.0, 1, 0], [1, -4, 1], [0, 1, 0]]]])
    energy = lambda x, m: float(torch.nn.functional.conv2d(x.mean(0)[None, None], lap)[0, 0][m].var())  # noqa: E731
    got = {}
    for r0 in (1.0, 0.5):
        memory = SceneMemory(SceneMemoryConfig(tent=0.5, tent_min_radius=r0))
        memory.insert(rgb, depth, K, view, time=0)
        r = memory.render(K, ahead, SIZE, SIZE)
        inner = -torch.nn.functional.max_pool2d(-r.coverage[None], 3, 1, 1)[0, 0, 1:-1, 1:-1] > 0
        got[r0] = energy(r.rgb, inner), psnr(r.rgb, truth, r.coverage.bool()), energy(truth, inner)
    (soft, psnr_soft, real), (sharp, psnr_sharp, _) = got[1.0], got[0.5]
    assert soft < 0.85 * real
    assert sharp > 1.1 * soft and 0.85 * real < sharp < 1.1 * real
    assert psnr_sharp > psnr_soft - 0.5
    with pytest.raises(ValueError, match="tent_min_radius"):
        SceneMemoryConfig(tent_min_radius=0.25)
    from alaya.train.world_memory import memory_key          # caches rendered before the field keep their key
    assert memory_key(SceneMemoryConfig(tent_min_radius=1.0), 25.0) == memory_key(SceneMemoryConfig(), 25.0)
    assert memory_key(SceneMemoryConfig(tent_min_radius=0.5), 25.0) != memory_key(SceneMemoryConfig(), 25.0)
