"""A process's restart policy (``processes.<P>.restart``) and the budget it allows.

The defaults are the schema's (:class:`omni_config.schema.RestartPolicyConfig`),
so a topology compiled without a ``restart`` entry gets exactly what the
config documents. Restarts are counted in a sliding window; each further
restart inside the window waits twice as long as the one before (up to
:data:`MAX_BACKOFF_S`), the way Kubernetes backs off a crash-looping pod.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

MAX_BACKOFF_S = 30.0


@dataclass(frozen=True)
class RestartPolicy:
    max_restarts: int = 5
    window_s: float = 60.0
    backoff_s: float = 1.0

    @classmethod
    def from_topology(cls, restart: dict[str, Any]) -> RestartPolicy:
        """The compiled process's ``restart`` data over the schema's defaults."""
        from omni_config.schema import RestartPolicyConfig

        config = RestartPolicyConfig(**(restart or {}))
        return cls(config.max_restarts, config.window_s, config.backoff_s)


class RestartBudget:
    """Restarts of one instance within the policy's window."""

    def __init__(self, policy: RestartPolicy, clock=time.monotonic) -> None:
        self.policy = policy
        self._clock = clock
        self._recent: deque[float] = deque()

    def _trim(self, now: float) -> None:
        while self._recent and now - self._recent[0] > self.policy.window_s:
            self._recent.popleft()

    def take(self) -> float | None:
        """Spend one restart: the delay before it, or ``None`` when the budget is spent."""
        now = self._clock()
        self._trim(now)
        if len(self._recent) >= self.policy.max_restarts:
            return None
        self._recent.append(now)
        return min(self.policy.backoff_s * (2 ** (len(self._recent) - 1)), MAX_BACKOFF_S)

    @property
    def used(self) -> int:
        self._trim(self._clock())
        return len(self._recent)
