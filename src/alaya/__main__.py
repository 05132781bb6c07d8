"""``python -m alaya``: the same as the ``alaya`` command."""

import sys

from alaya.cli import main

sys.exit(main())
