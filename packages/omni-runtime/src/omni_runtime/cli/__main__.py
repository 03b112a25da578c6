"""``python -m omni_runtime.cli``: the same as the ``omni`` console script."""

import sys

from .main import main

sys.exit(main())
