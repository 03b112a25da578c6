"""The ``omni`` command line (console script ``omni = omni_runtime.cli:main``).

* :mod:`.main` - the subcommands (``serve``, ``synthesize``, ``topology``, ``bench``) and exit codes.
* :mod:`.selection` - which pipeline a command runs (``--config``/``--model``/``--weights``).
* :mod:`.args` - backend options and number types the subcommands share.
* :mod:`.errors` - the known user mistakes and their one-line messages.
* :mod:`.output` - where audio goes (file or stdout) and in which format.
"""

from .main import main

__all__ = ["main"]
