"""Helpers for tests and benchmarks of omni-runtime (the runtime itself never imports this).

* :class:`LeakCheck` - no new ``/dev/shm`` entry and no child process left
  behind by a test (:mod:`.leakcheck`).
* :class:`Inbox` / :class:`Outbox` - blocking channels for a process without
  an event loop (:mod:`.channels`).
"""

from .channels import Inbox, Outbox
from .leakcheck import LeakCheck, descendants, shm_entries

__all__ = ["Inbox", "LeakCheck", "Outbox", "descendants", "shm_entries"]
