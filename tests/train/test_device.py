"""Which device a run trains on, and the loop on an explicitly named device."""

import json

import pytest
import torch

from alaya.train.loop import TrainConfig, Trainer, batch_to, module_device, resolve_device


def test_auto_is_the_cpu_without_a_gpu_and_for_recipes_that_stay_on_it(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto", on_any_device=False) == torch.device("cpu")


def test_auto_takes_the_local_rank_gpu_when_there_is_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert resolve_device("auto") == torch.device("cuda", 3)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)


def test_bad_and_unavailable_devices_are_refused_with_the_reason(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="no CUDA device"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="WorldModel's recipe trains on the CPU only"):
        resolve_device("cuda", on_any_device=False, recipe="WorldModel's recipe")
    for name in ("banana", "meta"):
        with pytest.raises(ValueError, match="TrainConfig.device"):
            resolve_device(name)


def test_a_cpu_run_moves_batches_trains_and_hands_back_a_cpu_model(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    w_true = torch.tensor([[1.0, -2.0, 0.5]])

    def loss_fn(m, index):
        x = torch.randn(16, 3, generator=torch.Generator().manual_seed(index))
        x, y = batch_to(m, x, x @ w_true.T)
        return ((m(x) - y) ** 2).mean(), {}

    cfg = TrainConfig(run_dir=str(tmp_path), steps=150, batch_size=16, lr=0.1, warmup=1, device="cpu",
                      progress=False, ckpt_every=50)
    trainer = Trainer(model, cfg, loss_fn, on_any_device=True)
    assert trainer.device == torch.device("cpu")
    out = trainer.run()
    assert module_device(out) == torch.device("cpu")
    assert torch.allclose(out.weight, w_true, atol=0.1)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["train"]["device"] == "cpu"
