"""Input appended to a running request: the parent's half of ``RequestHandle.append``.

A piece of input goes to the process(es) running the request's entry stage on
the route a cancel takes: the same outbox as the entry payload, so the pieces
arrive after it and in order. Whether the entry stage takes appended input is
what its worker reported at ready (:class:`~.reports.StageReports`); a stage
without the hook is refused here, before anything is sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import envelope as E
from ..control import ControlSender
from ..errors import AppendRefused, RequestFailed
from ..routing import Router
from .reports import StageReports
from .requests import Inflight


@dataclass(frozen=True, eq=False)
class InputAppender:
    """Sends appended input for requests of one topology's entry stage."""

    entry: str
    router: Router
    control: ControlSender
    reports: StageReports
    send_timeout: float

    def supported(self) -> bool:
        """Whether the entry stage's stage object has an ``append`` hook (False before its worker is ready)."""
        return self.entry in self.reports.appendable

    async def __call__(self, req: Inflight, data: Any, final: bool) -> None:
        if not self.supported():
            raise AppendRefused(
                f"the model's entry stage {self.entry!r} does not take appended input (its stage object has no append hook); "
                "send the whole input in one request", reason="not_supported")
        header = E.header(E.APPEND, rid=req.rid, stage=self.entry, has_data=True)
        if final:
            header[E.FINAL] = True
        for target in self.router.targets(self.entry, req.binding):
            if not await self.control.send(target.instance, header, data, timeout=self.send_timeout):
                if req.future.done():
                    raise AppendRefused(f"request {req.rid} has finished; its input can no longer grow", reason="finished")
                raise RequestFailed(f"could not send appended input to process {target.instance}", kind="unavailable")
