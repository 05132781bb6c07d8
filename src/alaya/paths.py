"""Where the shipped weights are, whatever the working directory.

Every default weights folder of the commands and loaders is ``default_weights(name)``: the
folder ``name`` under ``weights_dir()``, which is ``$ALAYA_WEIGHTS`` when set, else the
repository's ``weights/`` beside the package source (an editable install, ``make install``),
else ``weights/`` in the working directory (a wheel installed elsewhere, run from a checkout).
Paths a user gives stay as given: relative ones are relative to the working directory.
"""

from __future__ import annotations

import os
from pathlib import Path

WEIGHTS_ENV = "ALAYA_WEIGHTS"
REPO_WEIGHTS = Path(__file__).resolve().parents[2] / "weights"     # src/alaya/paths.py -> <repo>/weights


def weights_dir() -> Path:
    """The folder that holds the shipped weights (``$ALAYA_WEIGHTS``, the repository's, ``./weights``)."""
    if os.environ.get(WEIGHTS_ENV):
        return Path(os.environ[WEIGHTS_ENV]).expanduser()
    if REPO_WEIGHTS.is_dir():
        return REPO_WEIGHTS
    return Path("weights")


def default_weights(name: str) -> str:
    """The default folder of the shipped model ``name`` (``"student"``, ``"tiny_decoder"``, ...)."""
    return str(weights_dir() / name)
