"""A stage that takes input appended to its running request (``RequestHandle.append``).

Each request's pieces collect in order until the final one; the stage emits one chunk per
piece as it arrives and returns the joined text. It refuses a piece ``"refuse"`` (a hook that
raises fails its request).
"""

from __future__ import annotations

import asyncio
from typing import Any

from omni_runtime import InvalidRequest, StageContext, StagePayload


class Collect:
    def __init__(self) -> None:
        self.pieces: dict[str, asyncio.Queue[tuple[Any, bool]]] = {}

    def _queue(self, rid: str) -> asyncio.Queue[tuple[Any, bool]]:
        return self.pieces.setdefault(rid, asyncio.Queue())

    def append(self, request_id: str, data: Any, final: bool) -> None:
        if data == "refuse":
            raise InvalidRequest("this piece is refused", param="text")
        self._queue(request_id).put_nowait((data, final))

    async def process(self, payload: StagePayload, ctx: StageContext) -> dict[str, Any]:
        texts = [payload.data["text"]]
        queue = self._queue(payload.request_id)
        try:
            while True:
                piece, final = await queue.get()
                if piece is not None:
                    texts.append(piece)
                    await ctx.aemit({"piece": piece})
                if final:
                    return {"text": "".join(texts)}
        finally:
            self.pieces.pop(payload.request_id, None)


def build_collect() -> Collect:
    return Collect()
