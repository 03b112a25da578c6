"""``/v1/audio/voices``: upload, list, read and delete cloned voices; resolve a request's voice to its artefacts.

An upload is decoded here (any format PyAV reads, bounded in bytes and seconds) and keyed
by content (:mod:`.voice_store`). When no artefacts exist for that key yet, the server
sends the recording through the runtime once, as a short synthesis of ``ref_text``
carrying ``voice_key``: the model's own encoder stage computes the speaker artefacts and
writes them to ``--voices-dir`` (``omni_models.common.voice_cache``); the parent never
runs model code. A second upload of the same recording, under any name, finds them and
computes nothing (``omni_voice_artefacts_total{outcome="reused"}``). A pipeline whose
stages store no artefacts, or refuse ``ref_audio``, does not clone voices: 400
``voice_cloning_unsupported``.

Every speech path (``/v1/audio/speech``, the batch and the WebSocket) calls
:meth:`VoiceResolver.resolve`: an uploaded voice named by id or name, or inline
``ref_audio``, becomes ``voice_key`` (+ the audio only while its artefacts do not exist).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import tempfile
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from prometheus_client import Counter

from ..errors import RequestFailed, RuntimeFailure
from .errors import APIError, bad_request, runtime_error
from .request import SpeechRequest
from .voice_store import (
    DEFAULT_MAX_UPLOAD_BYTES,
    DEFAULT_MAX_VOICE_SECONDS,
    MAX_REF_TEXT_CHARS,
    DecodedAudio,
    VoiceStore,
    check_name,
    decode_audio,
)
from .voices import served_voices

VOICES = "/v1/audio/voices"
log = logging.getLogger("uvicorn.error.omni")
_PREPARE_TEXT = "This is my voice."
_PREPARE_TIMEOUT_S = 300.0
_PREPARE_FRAMES = 4
"""Frames the preparing request may generate: the fewest every model accepts (Qwen3-TTS 12 Hz needs 3)."""


class VoiceResolver:
    """Uploaded voices of one server, and the one place a request's voice turns into ``voice_key``."""

    def __init__(self, runtime: Any, settings: Any, registry: Any) -> None:
        self.runtime, self.settings = runtime, settings
        voices_dir = getattr(settings, "voices_dir", None)
        if voices_dir is None:  # uploads last as long as this server
            self._tmp = tempfile.TemporaryDirectory(prefix="omni-voices-")
            voices_dir = self._tmp.name
        self.store = VoiceStore(voices_dir)
        self.max_upload_bytes = int(getattr(settings, "max_voice_upload_bytes", DEFAULT_MAX_UPLOAD_BYTES))
        self.max_seconds = float(getattr(settings, "max_voice_seconds", DEFAULT_MAX_VOICE_SECONDS))
        self.artefacts = Counter(
            "omni_voice_artefacts", "Speaker artefacts of cloned voices: computed by the model's encoder stage, or reused from --voices-dir.",
            ["model", "outcome"], registry=registry,
        )
        self._locks: dict[str, asyncio.Lock] = {}

    def _payload_keys(self, key: str) -> dict[str, Any]:
        return {"voice_key": key, "voices_dir": str(self.store.root)}

    async def resolve(self, speech: SpeechRequest) -> SpeechRequest:
        """``speech`` with an uploaded voice or inline ``ref_audio`` replaced by its content key."""
        extra = dict(speech.extra)
        raw = extra.pop("ref_audio", None)
        if raw is not None:
            loop = asyncio.get_running_loop()  # decoding and hashing up to 30 s of audio stays off the event loop
            audio = await loop.run_in_executor(None, decode_audio, raw, self.max_seconds, "ref_audio")
            key = await loop.run_in_executor(None, audio.content_key, speech.model)
            extra.update(self._payload_keys(key))
            if self.store.has_artefacts(key):
                self.artefacts.labels(model=speech.model, outcome="reused").inc()
            else:  # the model's stage computes and stores them with this request
                extra.update(_audio_fields(audio))
                self.artefacts.labels(model=speech.model, outcome="computed").inc()
            return dataclasses.replace(speech, extra=extra)
        if speech.voice is None:
            return speech
        record = self.store.find(speech.model, speech.voice)
        if record is None:
            return speech  # a preset voice: the model decides
        if not self.store.has_artefacts(record.key):
            raise APIError(409, f"voice {record.name!r} has no stored speaker artefacts (was --voices-dir changed?); upload it again",
                           param="voice", code="voice_unavailable")
        extra.update(self._payload_keys(record.key))
        if record.ref_text:
            extra.setdefault("ref_text", record.ref_text)
        return dataclasses.replace(speech, voice=None, extra=extra)

    async def upload(self, request: Request) -> JSONResponse:
        form = await _form(request, self.max_upload_bytes, max(60.0, float(self.settings.body_timeout)))
        model = str(form.get("model") or self.settings.models[0])
        if model not in self.settings.models:
            raise APIError(404, f"The model {model!r} does not exist on this server", param="model", code="model_not_found")
        name = check_name(str(form.get("name") or ""))
        if name.lower() in {v.lower() for v in served_voices(self.runtime, self.settings)}:
            raise APIError(409, f"{name!r} is a preset voice of this server; pick another name for an uploaded voice", param="name", code="voice_exists")
        ref_text = str(form.get("ref_text") or "")
        if len(ref_text) > MAX_REF_TEXT_CHARS:
            raise bad_request(f"ref_text is {len(ref_text)} characters; at most {MAX_REF_TEXT_CHARS}", param="ref_text", code="string_above_max_length")
        upload = form.get("file") or form.get("audio_sample")  # audio_sample: the openai client's client.audio.voices.create
        if upload is None or not hasattr(upload, "read"):
            raise bad_request("file is required: the reference recording as a multipart file field (or audio_sample)", param="file",
                              code="missing_required_parameter")
        data = await upload.read(self.max_upload_bytes + 1)
        if len(data) > self.max_upload_bytes:
            raise APIError(413, f"file is over {self.max_upload_bytes} bytes; send a shorter recording", param="file", code="file_too_large")
        loop = asyncio.get_running_loop()
        audio = await loop.run_in_executor(None, decode_audio, data, self.max_seconds, "file")
        key = await loop.run_in_executor(None, audio.content_key, model)
        if self.store.find(model, name) is not None:
            raise APIError(409, f"model {model!r} already has a voice named {name!r}; delete it first or pick another name", param="name", code="voice_exists")
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if self.store.has_artefacts(key):
                self.artefacts.labels(model=model, outcome="reused").inc()
            else:
                await self._compute(model, key, audio, ref_text)
                self.artefacts.labels(model=model, outcome="computed").inc()
        if not lock.locked():
            self._locks.pop(key, None)
        record = self.store.add(name, model, key, ref_text, audio)
        log.info("voice %s (%s) uploaded for %s: %.2f s, sha256 %s", record.id, name, model, audio.seconds, key[:12])
        return JSONResponse(record.card(), status_code=201)

    async def _compute(self, model: str, key: str, audio: DecodedAudio, ref_text: str) -> None:
        """One short request through the runtime: the model's encoder stage computes and stores the artefacts."""
        data = {"text": ref_text or _PREPARE_TEXT, "voice": None, "speed": 1.0, "stream": False, "max_new_tokens": _PREPARE_FRAMES,
                **self._payload_keys(key), **_audio_fields(audio)}
        if ref_text:
            data["ref_text"] = ref_text  # models that clone in context (Qwen3-TTS 12 Hz Base, Higgs-TTS) need the transcript
        try:
            handle = await self.runtime.submit(data)
            await asyncio.wait_for(handle.result(), _PREPARE_TIMEOUT_S)
        except RequestFailed as exc:
            if getattr(exc, "kind", "") == "invalid_request" and self.store.has_artefacts(key):
                # the stage stored the artefacts, then refused the preparing synthesis itself (Qwen3-TTS 12 Hz Base
                # without in-context cloning support): the voice is usable, the refusal reaches the requests that need it
                log.info("voice %s for %s: artefacts stored; the preparing request was refused: %s", key[:12], model, exc.message)
                return
            if getattr(exc, "kind", "") == "invalid_request":
                if getattr(exc, "param", None) == "ref_audio":  # the server checked the audio: the model takes none (Voxtral)
                    raise _unsupported(model, exc.message) from None
                raise APIError(400, f"the model refused the reference recording: {exc.message}", param="file", code="invalid_audio") from None
            raise runtime_error(exc) from None
        except RuntimeFailure:
            raise APIError(503, "the pipeline is not accepting requests (starting or stopping)", type="server_error", code="unavailable") from None
        except asyncio.TimeoutError:
            raise APIError(504, "computing the speaker artefacts took too long", type="server_error", code="deadline_exceeded") from None
        if not self.store.has_artefacts(key):
            raise _unsupported(model, "its stages stored no speaker artefacts for the recording")

    def listing(self, presets: tuple[str, ...], model: str | None) -> dict[str, Any]:
        data: list[dict[str, Any]] = []
        for served in self.settings.models:
            if model is not None and served != model:
                continue
            data += [{"id": v, "object": "voice", "name": v, "model": served, "type": "builtin"} for v in presets]
            data += [record.card() for record in self.store.list(served)]
        return {"object": "list", "data": data, "models": list(self.settings.models)}


def _unsupported(model: str, why: str) -> APIError:
    return bad_request(f"model {model!r} does not clone voices ({why}); use a preset voice (GET /v1/audio/voices)",
                       param="model", code="voice_cloning_unsupported")


def _audio_fields(audio: DecodedAudio) -> dict[str, Any]:
    # a numpy array: same bytes on the wire as a tensor, and the worker decodes it into one (the server never loads torch)
    return {"ref_audio": audio.samples.copy(), "ref_sample_rate": audio.sample_rate}


async def _form(request: Request, limit: int, timeout: float) -> Any:
    """The multipart form, its whole body bounded by ``limit`` (+ 64 KiB for the fields) and ``timeout``, declared length or not."""
    from starlette.formparsers import MultiPartException, MultiPartParser

    bound = limit + 64 * 1024
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > bound:
        raise _too_large(limit)
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise bad_request("send the voice as multipart/form-data with fields file, name and ref_text", code="invalid_content_type")

    async def bounded() -> AsyncIterator[bytes]:
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > bound:
                raise _too_large(limit)
            yield chunk

    parser = MultiPartParser(request.headers, bounded(), max_files=1, max_fields=8, max_part_size=64 * 1024)
    try:
        return await asyncio.wait_for(parser.parse(), timeout)
    except asyncio.TimeoutError:
        raise APIError(408, f"the upload did not arrive within {timeout:g} s", code="request_timeout", headers={"Connection": "close"}) from None
    except MultiPartException as exc:
        raise bad_request(f"the multipart body could not be read: {exc}", code="invalid_multipart") from None


def _too_large(limit: int) -> APIError:
    return APIError(413, f"voice uploads are limited to {limit} bytes; send a shorter recording", param="file",
                    code="request_too_large", headers={"Connection": "close"})


def install_voice_routes(app: FastAPI, resolver: VoiceResolver, metrics: Any) -> None:
    """``POST`` / ``GET /v1/audio/voices/{id}`` / ``DELETE``; the list stays in app.py's route, which calls :meth:`listing`."""

    @app.post(VOICES, status_code=201)
    async def upload(request: Request) -> JSONResponse:
        try:
            response = await resolver.upload(request)
        except APIError as exc:
            metrics.count(VOICES, exc.status)
            raise
        metrics.count(VOICES, 201)
        return response

    @app.get(VOICES + "/{voice_id}")
    async def get_voice(voice_id: str) -> JSONResponse:
        record = resolver.store.get(voice_id)
        if record is None:
            metrics.count(VOICES + "/{id}", 404)
            raise APIError(404, f"no uploaded voice with id {voice_id!r} (GET {VOICES} lists them)", param="voice_id", code="voice_not_found")
        metrics.count(VOICES + "/{id}", 200)
        return JSONResponse(record.card())

    @app.delete(VOICES + "/{voice_id}")
    async def delete_voice(voice_id: str) -> JSONResponse:
        record = resolver.store.delete(voice_id)
        if record is None:
            metrics.count(VOICES + "/{id}", 404)
            raise APIError(404, f"no uploaded voice with id {voice_id!r} (GET {VOICES} lists them)", param="voice_id", code="voice_not_found")
        metrics.count(VOICES + "/{id}", 200)
        return JSONResponse({"id": record.id, "object": "audio.voice.deleted", "deleted": True})
