"""Voxtral TTS's own stages: a preprocessing that refuses reference audio and puts every field the
engine needs in the payload, and the engine that reads them back. The vocoder is the shared one
(``omni_models.common.factories:build_vocoder``); the numbers are its row in ``common.catalog``.

preprocessing   text normalisation + byte tokens; the payload carries ``input_ids``, ``voice``
                and the generation limits (everything tts_generation needs, no module state)
tts_generation  AR transformer (KV cache) generating 8 parallel codebooks per 12.5 Hz frame,
                returned as ``codes`` in the payload
"""

from __future__ import annotations

from typing import Any

from omni_models.common.audio import VOICES as VOICES  # the preset voices omni serve lists (GET /v1/audio/voices)
from omni_models.common.audio import voice_index
from omni_models.common.catalog import spec_for
from omni_models.common.factories import ar_engine
from omni_models.common.limits import GenerationLimits
from omni_models.common.request import TextRequest, prepare_text_request
from omni_models.common.spec import knobs_for
from omni_models.common.stages import AREngine, require, with_data
from omni_runtime.errors import InvalidRequest

SPEC = spec_for("voxtral_tts")
MODEL = SPEC.name


class Preprocessing:
    def process(self, payload: Any, ctx: Any = None) -> Any:
        if payload.data.get("ref_audio") is not None:
            raise InvalidRequest(f"{MODEL} does not clone voices from ref_audio; choose a preset voice ({', '.join(VOICES)})", param="ref_audio")
        request = prepare_text_request(payload.data, frame_rate=SPEC.frame_rate, max_chars=SPEC.text.max_chars, max_seconds=SPEC.text.max_seconds)
        return with_data(
            payload,
            {
                "text": request.text,
                "input_ids": list(request.input_ids),
                "voice": payload.data.get("voice") or "default",
                "generation_limits": request.limits.to_dict(),
                "speed": request.speed,
                "seed": request.seed,
                "temperature": request.temperature,
                "top_k": request.top_k,
            },
        )


class TTSGeneration:
    def __init__(self, engine: AREngine, stage: str):
        self.engine, self.stage = engine, stage

    def process(self, payload: Any, ctx: Any) -> Any:
        data = payload.data
        voice = require(data, "voice", MODEL, self.stage)
        request = TextRequest(
            text=require(data, "text", MODEL, self.stage),
            input_ids=[int(i) for i in require(data, "input_ids", MODEL, self.stage)],
            limits=GenerationLimits.from_dict(require(data, "generation_limits", MODEL, self.stage)),
            voice_index=voice_index(voice),
            speed=float(require(data, "speed", MODEL, self.stage)),
            seed=int(require(data, "seed", MODEL, self.stage)),
            temperature=data.get("temperature"),
            top_k=data.get("top_k"),
        )
        codes = self.engine.collect(ctx, request, self.engine.model.voice(request.voice_index))
        return with_data(payload, {"codes": codes, "voice": voice, "frame_rate": SPEC.frame_rate})


def build_preprocessing() -> Preprocessing:
    return Preprocessing()


def build_tts_generation(device: str | None = None, model_path: str | None = None, stage_name: str = "tts_generation", **knobs: Any) -> TTSGeneration:
    settings = knobs_for(SPEC, "engine", knobs, stage_name)
    return TTSGeneration(ar_engine(SPEC, settings, settings.loader(device, model_path), stage_name), stage_name)
