"""A tiny world model folder the world tests share (imported as ``tiny_world``)."""

from pathlib import Path

import numpy as np
import pytest
import torch

SIZE = 64


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Torch on one thread for a test module: the server runs a thread per session (as ``alaya
    play`` does), and the machine has few cores."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def tiny_world_folder(folder, starts: int = 3) -> Path:
    """A tiny random world model (``save_pretrained``) with ``starts`` distinct start frames in
    ``<folder>/starts/``; its weights are perturbed and the action inputs amplified, so that its
    frames depend on the actions."""
    from PIL import Image

    from alaya.models.world import WorldModel, WorldModelConfig
    torch.manual_seed(0)
    model = WorldModel(WorldModelConfig(widths=(16, 32), emb_dim=32))
    c = model.config
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        model.core.text_mlp[0].weight[:, c.text_dim:c.text_dim + c.action_history * c.action_dim] *= 30
    folder = Path(folder)
    model.save_pretrained(folder)
    (folder / "starts").mkdir()
    ramp = np.linspace(0, 255, SIZE)
    for i in range(starts):
        rgb = np.stack([np.add.outer(ramp, ramp) / 2, np.roll(ramp, 20 * i)[None].repeat(SIZE, 0),
                        np.full((SIZE, SIZE), 60.0 * i)], -1)
        Image.fromarray(rgb.astype(np.uint8)).save(folder / "starts" / f"{i:03d}.png")
    return folder


def record_tiny_episodes(root, episodes: int, frames: int = 8, size: int = 32) -> Path:
    """``episodes`` short game recordings (scripted players) in ``root``, for training tests."""
    from alaya.engine.game import GameConfig
    from alaya.engine.gameplay import GameplayConfig, record_gameplay
    record_gameplay(root, GameplayConfig(episodes=episodes, frames=frames, game=GameConfig(size=size, warmup_frames=10)),
                    progress=False)
    return Path(root)
