"""A still camera's memory: the frame shown at the last move (``frame_as_memory``) while the view
has not moved since (``same_view``), the memory's render when it has."""

import math

import numpy as np
import pytest
import torch

from alaya.models.memory_conditioning import frame_as_memory, kinematic_view, memory_latent, same_view
from alaya.models.world import WorldModel, WorldModelConfig

TINY = WorldModelConfig(memory=True, latent_channels=80, widths=(16, 32), emb_dim=32, steps=1,
                        memory_max_points=5000, memory_sky_depth=25.0)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_a_frame_as_its_own_memory_covers_geometry_and_a_stored_sky():
    rgb = torch.rand(1, 3, 8, 8)
    depth = torch.full((1, 1, 8, 8), 2.0)
    depth[..., :2, :] = 0                                        # sky rows
    m_rgb, cov, d = frame_as_memory(rgb, depth, 25.0)
    assert torch.equal(m_rgb, rgb) and bool((cov == 1).all())
    assert bool((d[..., :2, :] == 25.0).all()) and bool((d[..., 2:, :] == 2.0).all())
    m_rgb, cov, d = frame_as_memory(rgb, depth, 0.0)             # the sky not stored: not covered
    assert bool((cov[..., :2, :] == 0).all()) and bool((m_rgb[..., :2, :] == 0).all())
    assert bool((cov[..., 2:, :] == 1).all()) and torch.equal(d, depth)


def test_same_view_is_within_a_millimetre_scale_move_and_a_small_turn():
    pose = torch.tensor([[1.0, 2.0, 0.3]])
    a = kinematic_view(pose, -10.0, 1.4)
    assert same_view(a, a)
    assert same_view(a, kinematic_view(pose + torch.tensor([[1e-3, 0.0, 0.0]]), -10.0, 1.4))
    assert not same_view(a, kinematic_view(pose + torch.tensor([[0.01, 0.0, 0.0]]), -10.0, 1.4))
    assert not same_view(a, kinematic_view(pose + torch.tensor([[0.0, 0.0, math.radians(0.2)]]), -10.0, 1.4))
    assert not same_view(a, kinematic_view(pose, -10.5, 1.4))


def test_a_still_camera_is_shown_the_frame_of_its_last_move_a_moving_one_the_memory(monkeypatch):
    from alaya.data.actions import action_vector
    from alaya.runtime.world_session import WorldSession
    torch.manual_seed(0)
    frame = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    model = WorldModel(TINY)
    with torch.no_grad():
        model.core.out.bias[:64] = 0.3                           # a change from the memory ...
        model.core.out.bias[64:] = -1e6                          # ... and gate 0: the generated frame is shown
    session = WorldSession(model, size=32, backend="torch")
    session.reset(frame, depth=np.full((32, 32), 3.0, np.float32))
    seen = []
    frame_fn = session.backend.frame
    monkeypatch.setattr(session.backend, "frame", lambda anchor, *a: (seen.append(anchor), frame_fn(anchor, *a))[1])
    session.step(action_vector(1.0, 0.0, 0.0, 0.0, None))        # a walk: the memory's render
    shown = session._still_frame
    moved = memory_latent(*frame_as_memory(*shown, TINY.memory_sky_depth))
    for _ in range(3):
        session.step(np.zeros(8, np.float32))                    # standing: that frame, exactly, every time
    assert not torch.equal(seen[0], moved)
    assert all(torch.equal(seen[k], moved) for k in (1, 2, 3))   # not each newest frame: no drift adds up
    assert not torch.equal(memory_latent(*frame_as_memory(*session._shown, TINY.memory_sky_depth)), moved)


def test_a_factory_plays_at_its_weights_start_frame_size(tmp_path):
    """Without ``size`` a factory takes the size of the start frames shipped beside the weights
    (what ``alaya play --world`` and the env do), so the model card's example plays them."""
    import shutil

    from PIL import Image

    from alaya.runtime.world_factory import WorldSessionFactory
    from alaya.runtime.world_folder import load_start_frames
    folder = tmp_path / "model"
    WorldModel(TINY).save_pretrained(folder)
    (folder / "starts").mkdir()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(folder / "starts" / "0.png")
    factory = WorldSessionFactory.from_pretrained(folder, backend="torch")
    assert factory.size == 32
    session = factory.new("a golden sunset")
    session.reset(load_start_frames(folder)[0])
    assert session.step(np.zeros(8, np.float32)).shape == (32, 32, 3)
    shutil.rmtree(folder / "starts")
    assert WorldSessionFactory.from_pretrained(folder, backend="torch").size == 64   # no start frames: 64
    assert WorldSessionFactory.from_pretrained(folder, size=48, backend="torch").size == 48
