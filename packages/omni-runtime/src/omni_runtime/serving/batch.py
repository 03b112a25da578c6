"""``POST /v1/audio/speech/batch``: 1 to 32 speech requests in one body, each answered on its own.

Body: ``{"items": [<speech body>, ...], <defaults>}`` where every item is what
``POST /v1/audio/speech`` takes (``model``, ``response_format``, ``voice``, ``speed`` ...
given at the top level are defaults for every item). Every valid item is submitted to
the runtime before any is awaited, so the engine admits them together and batches their
decode steps. The answer is JSON (chosen over a zip so a client needs no archive reader
and errors sit beside the audio): ``{"object": "list", "data": [...]}`` in item order,
each entry either ``{"index", "object": "speech", "response_format", "sample_rate",
"channels", "audio_seconds", "audio": <base64 file>}`` or ``{"index", "error": <OpenAI
envelope fields>}``. One bad item never fails the others; the status is 200 whenever the
batch itself is well-formed.
"""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from ..errors import RequestFailed, RuntimeFailure
from .audio import encode
from .errors import APIError, bad_request, runtime_error
from .speech import Disconnected, guarded, read_body
from .streaming import ClientGone, cancel_quietly, until_disconnect
from .synthesis import collect_audio
from .timestamps import WordLog, check_timestamps

BATCH = "/v1/audio/speech/batch"
MAX_ITEMS = 32
_DEFAULTS = ("model", "response_format", "voice", "speed", "instructions", "seed", "max_new_tokens", "timestamps")


def _items(body: dict[str, Any]) -> list[Any]:
    items = body.get("items")
    if not isinstance(items, list) or not items:
        raise bad_request(f"items is required: a list of 1 to {MAX_ITEMS} speech requests", param="items", code="missing_required_parameter")
    if len(items) > MAX_ITEMS:
        raise bad_request(f"items holds {len(items)} requests; a batch takes at most {MAX_ITEMS}. Split it", param="items", code="too_many_items")
    unknown = sorted(set(body) - {"items", *_DEFAULTS})
    if unknown:
        raise bad_request(f"unknown batch field(s) {', '.join(unknown)}; item fields go inside each item", param=unknown[0], code="invalid_value")
    return items


async def _one(runtime: Any, voices: Any, item: Any, defaults: dict[str, Any], settings: Any) -> tuple[Any, Any]:
    """Validate and submit one item: ``(handle, speech)`` or raise its APIError."""
    from .request import parse_speech

    if not isinstance(item, dict):
        raise bad_request(f"each item must be a JSON object, got {type(item).__name__}", param="items", code="invalid_value")
    if item.get("stream") or item.get("stream_format"):
        raise bad_request("a batch item cannot stream; drop stream and stream_format", param="stream_format", code="invalid_value")
    speech = parse_speech({**defaults, **item}, settings.models, settings.limits)
    check_timestamps(speech.extra, getattr(runtime, "topology", None))
    speech = await voices.resolve(speech)
    try:
        return await runtime.submit(speech.entry_data()), speech
    except RequestFailed as exc:
        raise runtime_error(exc) from None
    except RuntimeFailure:
        raise APIError(503, "the pipeline is not accepting requests (starting or stopping)", type="server_error", code="unavailable") from None


async def _collect(handle: Any, speech: Any, index: int) -> dict[str, Any]:
    words = WordLog() if speech.extra.get("timestamps") == "word" else None
    try:
        audio = await guarded(collect_audio(handle, words))
        data = encode(audio, speech.response_format)
    except APIError as exc:
        return {"index": index, **exc.body()}
    except Disconnected:
        return {"index": index, **APIError(499, "the item was cancelled", type="server_error", code="cancelled").body()}
    timed = {} if words is None else {"words": words.words}
    return {
        **timed,
        "index": index, "object": "speech", "model": speech.model, "response_format": speech.response_format,
        "sample_rate": audio.sample_rate, "channels": audio.channels, "audio_seconds": round(audio.frames / audio.sample_rate, 4),
        "audio": base64.b64encode(data).decode("ascii"),
    }


def install_batch_route(app: FastAPI) -> None:
    @app.post(BATCH)
    async def speech_batch(request: Request) -> JSONResponse:
        from .request import parse_body

        state = request.app.state
        runtime, settings, metrics, voices = state.runtime, state.settings, state.metrics, state.voices
        started = time.perf_counter()
        try:
            raw = await read_body(request, settings.limits.max_body_bytes * MAX_ITEMS, settings.body_timeout)
            body = parse_body(raw)
            items = _items(body)
        except APIError as exc:
            metrics.observe_request(BATCH, exc.status, time.perf_counter() - started)
            raise
        except Disconnected:
            metrics.observe_request(BATCH, 499, time.perf_counter() - started)
            return JSONResponse({}, status_code=499)
        defaults = {k: body[k] for k in _DEFAULTS if k in body}
        results: list[dict[str, Any] | None] = [None] * len(items)
        submitted: list[tuple[int, Any, Any]] = []
        for index, item in enumerate(items):  # submit all before awaiting any: the engine batches what is admitted together
            try:
                handle, speech = await _one(runtime, voices, item, defaults, settings)
                submitted.append((index, handle, speech))
            except APIError as exc:
                results[index] = {"index": index, **exc.body()}
        handles = [h for _, h, _ in submitted]
        try:
            done = await until_disconnect(request, _CancelAll(handles), asyncio.gather(*(_collect(h, s, i) for i, h, s in submitted)))
        except (ClientGone, asyncio.CancelledError):
            metrics.observe_request(BATCH, 499, time.perf_counter() - started)
            return JSONResponse({}, status_code=499)
        for entry in done:
            results[entry["index"]] = entry
            if "audio_seconds" in entry:
                metrics.observe_audio(entry["model"], entry["audio_seconds"])
        metrics.observe_request(BATCH, 200, time.perf_counter() - started)
        return JSONResponse({"object": "list", "data": results})


class _CancelAll:
    """What :func:`until_disconnect` cancels when the client leaves: every item of the batch."""

    def __init__(self, handles: list[Any]) -> None:
        self.handles = handles
        self.request_id = ",".join(str(getattr(h, "request_id", "?")) for h in handles)

    async def cancel(self) -> None:
        for handle in self.handles:
            await cancel_quietly(handle)
