"""A stand-in for the text model's package, for ``ModelProcess`` tests (put on the child's
PYTHONPATH): FAKE_MINILM_LOAD_S seconds of pure-Python work at import (as transformers' imports
are), FAKE_MINILM_MISSING to fail like a missing dependency; embeddings from the text's hash."""

import hashlib
import os
import time

import torch

_end = time.perf_counter() + float(os.environ.get("FAKE_MINILM_LOAD_S", "0"))
while time.perf_counter() < _end:
    pass
if os.environ.get("FAKE_MINILM_MISSING"):
    raise ImportError("No module named 'sentence_transformers'")


class _Model:
    def encode(self, texts, convert_to_tensor=True, normalize_embeddings=True, show_progress_bar=False):
        seeds = [int(hashlib.sha1(t.encode()).hexdigest()[:8], 16) for t in texts]
        out = torch.stack([torch.randn(384, generator=torch.Generator().manual_seed(s)) for s in seeds])
        return out / out.norm(dim=-1, keepdim=True) if normalize_embeddings else out


def load_model(device="cpu"):
    return _Model()
