"""``python -m omni_runtime.bench``: ``omni bench`` without the ``omni`` front end."""

import sys

from .report import main

sys.exit(main())
