"""Preprocessing and AR stages around a process-local ``PreparedRequestQueue`` (MOSS-TTS Local and Delay).

Both MOSS models prepare the same thing (the text request and the reference recording's prompt
codes) and hand it to the AR stage through a queue in module memory. Each model's ``handoff``
module owns its queue, because that module memory is the process-local state its contract
declares; the factories pass the queue in, so the stage logic lives here once. omni-lint follows
the queue from the factory's argument into these methods, so removing the declared
``preprocessing -> tts_engine`` edge is still caught for each model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .audio import reference_audio
from .codec import CodecConfig
from .components import Component, Loader
from .factories import ar_engine
from .queue import PreparedRequestQueue
from .request import TextRequest, prepare_text_request
from .spec import CodecTokenSpec, knobs_for
from .stages import AREngine, with_data
from .voice_cache import reference_artefacts

PROMPT_CODES = "prompt_codes"


@dataclass(frozen=True)
class PreparedRequest:
    """What crosses the queue: it never leaves the process, so it needs no wire form."""

    text: TextRequest
    prompt_codes: torch.Tensor


class QueuedPreprocessing:
    """Text and reference audio -> prompt codes, published into the model's queue.

    The prompt codes of a voice the server keyed (uploaded, or inline ``ref_audio``) are
    encoded once and then read from the voice cache (``voice_cache``).

    The slot is begun before any work and aborted on any failure, so the AR stage never pops a
    half-prepared request and a failed request leaves no slot behind.
    """

    def __init__(
        self, loader: Loader, components: dict[str, Component], codec: CodecConfig, queue: PreparedRequestQueue, *, max_chars: int, max_seconds: float
    ):
        self.device = loader.device
        self.encoder = loader.get(components, "codec.encoder")
        self.quantizer = loader.get(components, "codec.quantizer")
        self.codec = codec
        self.max_chars = max_chars
        self.max_seconds = max_seconds
        self.queue = queue

    @torch.inference_mode()
    def _prepare(self, data: dict[str, Any]) -> PreparedRequest:
        text = prepare_text_request(data, frame_rate=self.codec.frame_rate, max_chars=self.max_chars, max_seconds=self.max_seconds)
        ref = reference_audio(data, self.codec.sample_rate)
        found = reference_artefacts(data, ref, lambda wave: {PROMPT_CODES: self._encode(wave)},
                                    lambda: {PROMPT_CODES: torch.zeros(self.codec.num_codebooks, 0, dtype=torch.long)})
        return PreparedRequest(text, found[PROMPT_CODES])

    def _encode(self, wave: torch.Tensor) -> torch.Tensor:
        return self.quantizer.encode(self.encoder(wave.to(self.device))).cpu()

    def process(self, payload: Any, ctx: Any = None) -> Any:
        self.queue.begin(payload.request_id)
        try:
            prepared = self._prepare(payload.data)
            self.queue.publish(payload.request_id, prepared)
        except BaseException:
            self.queue.abort(payload.request_id)
            raise
        return with_data(payload, {"text": prepared.text.text, "num_prompt_frames": prepared.prompt_codes.shape[1]})


class QueuedTTSEngine:
    """Pops the prepared request (an error naming the edge if this process has none) and streams codes."""

    def __init__(self, engine: AREngine, frame_rate: float, queue: PreparedRequestQueue):
        self.engine = engine
        self.frame_rate = frame_rate
        self.queue = queue

    def process(self, payload: Any, ctx: Any) -> Any:
        prepared = self.queue.pop(payload.request_id)
        request = prepared.text
        total = self.engine.stream(ctx, request, self.engine.model.voice(request.voice_index), prepared.prompt_codes)
        return with_data(payload, {"num_frames": total, "frame_rate": self.frame_rate})


def build_queued_preprocessing(spec: CodecTokenSpec, queue: PreparedRequestQueue, device: str | None, model_path: str | None, stage: str, knobs: dict[str, Any]) -> QueuedPreprocessing:
    """The preprocessing stage of ``spec`` publishing into the model's own ``queue``."""
    loader = knobs_for(spec, "loader", knobs, stage).loader(device, model_path)
    return QueuedPreprocessing(loader, spec.components(), spec.codec, queue, max_chars=spec.text.max_chars, max_seconds=spec.text.max_seconds)


def build_queued_engine(spec: CodecTokenSpec, queue: PreparedRequestQueue, device: str | None, model_path: str | None, stage: str, knobs: dict[str, Any]) -> QueuedTTSEngine:
    """The AR stage of ``spec`` popping from the model's own ``queue``."""
    settings = knobs_for(spec, "engine", knobs, stage)
    return QueuedTTSEngine(ar_engine(spec, settings, settings.loader(device, model_path), stage), spec.frame_rate, queue)
