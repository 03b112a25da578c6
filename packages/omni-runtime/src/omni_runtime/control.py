"""Control messages (cancel, credit, shutdown, peer list, heartbeat): sent, and never lost in silence.

A control message is best effort by nature: a cancel to a process that just
died, or a credit for a request that just finished, has nobody left to act on
it. But an operator must be able to see that one did not arrive: a failed
send is logged once per (kind, peer, request) at WARNING with the request and
the peer, and counted by kind and peer (the parent's counts are
``omni_control_send_failures_total`` in ``/metrics``). The parent and every
worker send their control messages through one of these. A worker's failures
since its last report ride on its next heartbeat (:meth:`ControlSender.take_unreported`,
given back with :meth:`ControlSender.unreported_again` when that heartbeat is
not delivered either); the parent adds them up per sending process
(``omni_worker_control_send_failures_total``).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from . import envelope as E

_REMEMBERED = 4096
"""How many (kind, peer, request) failures are remembered to log each once."""


class ControlSender:
    """Sends the parent's control messages over its plane; counts and logs those that fail."""

    def __init__(self, timeout: float = 1.0, logger: str = "omni.runtime") -> None:
        self.timeout = timeout
        self._log = logging.getLogger(logger)
        self.failures: Counter[tuple[str, str]] = Counter()
        """Failed sends by (message kind, peer instance)."""
        self._plane: Any = None
        self._logged: dict[tuple[str, str, str], None] = {}
        self._unreported: Counter[tuple[str, str]] = Counter()

    def attach(self, plane: Any) -> None:
        """Send over ``plane`` from now on (set once the backend opened it)."""
        self._plane = plane

    async def send(self, peer: str, header: dict[str, Any], data: Any = None, timeout: float | None = None) -> bool:
        """Send one control message to ``peer``; False (logged once, counted) when it could not be sent."""
        if self._plane is None:
            return False
        try:
            await self._plane.outbox(peer).send(header, data, timeout=self.timeout if timeout is None else timeout)
        except Exception as exc:  # noqa: BLE001 - a control message must not fail its caller
            self.failed(peer, header, exc)
            return False
        return True

    def failed(self, peer: str, header: dict[str, Any], exc: BaseException) -> None:
        kind = str(header.get(E.KIND, "?"))
        rid = str(header.get(E.RID, ""))
        self.failures[(kind, peer)] += 1
        self._unreported[(kind, peer)] += 1
        key = (kind, peer, rid)
        if key in self._logged:
            return
        self._logged[key] = None
        while len(self._logged) > _REMEMBERED:
            self._logged.pop(next(iter(self._logged)))
        self._log.warning(
            "could not send %s%s to process %s: %s: %s",
            kind,
            f" for request {rid}" if rid else "",
            peer,
            type(exc).__name__,
            exc,
        )

    def counts(self) -> dict[tuple[str, str], int]:
        return dict(self.failures)

    def take_unreported(self) -> list[list[Any]]:
        """Failures since the last call as ``[[kind, peer, count], ...]`` (codec-ready; empty when none), now counted as reported."""
        out = [[kind, peer, count] for (kind, peer), count in sorted(self._unreported.items())]
        self._unreported.clear()
        return out

    def unreported_again(self, taken: list[list[Any]]) -> None:
        """The report carrying ``taken`` was not delivered: send those counts with the next one."""
        for kind, peer, count in taken:
            self._unreported[(kind, peer)] += count


def add_reported(into: Counter[tuple[str, str, str]], sender: str, report: Any) -> None:
    """Add a worker's ``[[kind, peer, count], ...]`` (from its heartbeat) to ``into`` by (sender, kind, peer); malformed rows are skipped."""
    if not isinstance(report, list):
        return
    for row in report:
        if isinstance(row, list) and len(row) == 3 and isinstance(row[0], str) and isinstance(row[1], str) and type(row[2]) is int and row[2] > 0:
            into[(sender, row[0], row[1])] += row[2]

