"""Admission at the request head: past ``--max-inflight`` a speech request is refused before its body is read.

The runtime refuses past its own bound too (``Runtime.submit`` raises
``Overloaded``), but only after the server has read the body, parsed the JSON
and validated it, all on the event loop the admitted requests need; at 10x
overload that work is what made the 429s slow. This gate is the outermost ASGI
layer: it counts the speech requests in flight (from the moment their whole
body is in until their response has ended, a streamed one included) and checks
the bound when a request's head arrives: a request over it gets its 429 with
``Retry-After`` at once, without a byte of its body read (uvicorn discards the
unread body and keeps the connection alive). Requests admitted together at
the head may overshoot by the few whose bodies are still arriving; the
runtime's own bound (the same number) refuses those.

A refusal is timed from the moment its head came off the socket (stamped by the
connection protocol, :data:`.guard.HEAD_AT`) to the moment its 429 was handed to
the socket: ``omni_overload_refusal_seconds{part="total"}``, the server's own share
of what a refused client waits (the rest is the client and the kernel); its
``part="queued"`` is the time until this gate first ran (the event loop busy
with other work, or the process waiting for a CPU).

A request without the server's API key is passed on untouched (the app answers
401 and takes no slot), so a refusal never tells an unauthenticated client more
than the 401 would.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
import uuid
from typing import Any

from .errors import RETRY_AFTER_S, error_body
from .guard import HEAD_AT

access_log = logging.getLogger("omni.access")
REFUSAL_BUCKETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
DEFAULT_MAX_INFLIGHT = 64
"""``omni serve``'s default bound on speech requests in flight (``--max-inflight``)."""


class AdmissionGate:
    """ASGI middleware bounding the speech requests in flight, checked when a request's head arrives."""

    def __init__(self, app: Any, *, path: str, limit: int, api_key: str | None = None, metrics: Any = None) -> None:
        if limit < 1:
            raise ValueError(f"the in-flight bound must be at least 1, got {limit}")
        self.app, self.path, self.limit, self.metrics = app, path, limit, metrics
        self.inflight = 0
        self._expected = f"Bearer {api_key}".encode() if api_key else None
        body = error_body(
            f"{limit} speech requests are in flight (--max-inflight {limit}); retry after {RETRY_AFTER_S} s",
            type="rate_limit_error", code="overloaded",
        )
        self._body = json.dumps(body).encode()
        self.refusal_seconds = None
        if metrics is not None and getattr(metrics, "registry", None) is not None:
            from prometheus_client import Histogram

            self.refusal_seconds = Histogram(
                "omni_overload_refusal_seconds",
                "A refused request (--max-inflight): total, from its head off the socket to its 429 handed to the socket; queued, until the gate ran.",
                ["part"], buckets=REFUSAL_BUCKETS, registry=metrics.registry,
            )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or not self._gated(scope):
            await self.app(scope, receive, send)
            return
        if self.inflight >= self.limit and self._authorized(scope):
            await self._refuse(scope, send, time.perf_counter())
            return
        taken = False

        async def counted() -> Any:
            # a slot is taken once the whole body is in: a client trickling its body holds a connection
            # (bounded by the body deadline and evicted first at the connection cap), never a slot
            nonlocal taken
            message = await receive()
            if not taken and message["type"] == "http.request" and not message.get("more_body", False):
                taken = True
                self.inflight += 1
            return message

        try:
            await self.app(scope, counted, send)
        finally:
            if taken:
                self.inflight -= 1

    def _gated(self, scope: Any) -> bool:
        path, root = scope.get("path", ""), scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        return path == self.path

    def _authorized(self, scope: Any) -> bool:
        if self._expected is None:
            return True
        given = next((value for name, value in scope.get("headers", ()) if name == b"authorization"), b"")
        return hmac.compare_digest(given, self._expected)

    async def _refuse(self, scope: Any, send: Any, reached: float) -> None:
        started = scope.get("extensions", {}).get(HEAD_AT) or reached
        request_id = next((value for name, value in scope.get("headers", ()) if name == b"x-request-id"), b"")
        if not request_id or len(request_id) > 128 or not request_id.isascii() or b" " in request_id:
            request_id = uuid.uuid4().hex.encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(self._body)).encode()),
            (b"retry-after", RETRY_AFTER_S.encode()),
            (b"x-request-id", request_id),
        ]
        await send({"type": "http.response.start", "status": 429, "headers": headers})
        await send({"type": "http.response.body", "body": self._body})
        took = time.perf_counter() - started
        if self.metrics is not None:
            self.metrics.observe_request(self.path, 429, took)
        if self.refusal_seconds is not None:
            self.refusal_seconds.labels(part="total").observe(took)
            self.refusal_seconds.labels(part="queued").observe(reached - started)
        access_log.info("POST %s 429 %.3fs model=- chars=- audio_s=- error=overloaded", self.path, took,
                        extra={"status": 429, "request_id": request_id.decode("ascii", "replace")})
