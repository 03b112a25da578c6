"""No-op stages for latency checks: each passes its payload on untouched."""

from __future__ import annotations

from omni_runtime import StageContext, StagePayload


class Noop:
    async def process(self, payload: StagePayload, ctx: StageContext) -> StagePayload:
        return payload


def build_noop() -> Noop:
    return Noop()
