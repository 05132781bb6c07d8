"""The project's own prompts, whose embeddings ship with the package (``alaya.text.known``).

Every style's phrasings (``alaya.engine.styles``), the held-out paraphrases of the renderer
evaluation and the world model's action phrases: what renderers, servers, training and the
evaluation encode before any user types a word. They are gathered here, above the packages that
hold them, so that ``alaya.text`` stays below them all. ``python -m alaya.prompts`` rewrites
``alaya/text/known_prompts.safetensors`` with the model (after a phrasing is added).
"""

from __future__ import annotations

from alaya.data.actions import ACTION_PHRASES
from alaya.engine.styles import STYLES
from alaya.evaluation.render_eval import load_paraphrases


def known_prompts() -> list[str]:
    """The prompts ``alaya.text.encoder.KNOWN_FILE`` holds, sorted and without repeats."""
    prompts = [p for style in STYLES.values() for p in style.phrasings]
    prompts += [p for ps in load_paraphrases().values() for p in ps]
    prompts += [p for ps in ACTION_PHRASES.values() for p in ps]
    return sorted({p.strip() for p in prompts if p.strip()})


if __name__ == "__main__":
    from alaya.text.encoder import KNOWN_FILE
    from alaya.text.known import write_known
    print(f"wrote {write_known(known_prompts())} prompt embeddings to {KNOWN_FILE}")
