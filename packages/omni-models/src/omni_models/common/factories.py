"""The stage factories every codec-token model shares, each reading its model's catalog row.

A pipeline file points a stage here and names its row with the fixed factory argument
``model``; the other ``factory_args`` are the stage's knobs (declared with type and range next
to them, so omni-config checked them before this runs). The runtime adds ``device``,
``model_path`` (``--weights``) and ``stage_name`` because the signatures name them.

preprocessing     text request + the reference recording at its encoder's rate (payload)
speaker_encoder   reference (or preset voice) -> ``speaker_embedding`` (payload)
audio_encoder     reference -> ``ref_codes`` through the codec encoder (payload)
                  (both compute an uploaded or inline voice once and then read it from the
                  voice cache, ``voice_cache``; so does an engine that encodes the reference)
tts_engine        the AR engine over the model's codebook layout; streams chunks to the
                  vocoder (``streams``) or returns all ``codes``
vocoder           the streaming codec decoder -> audio chunks for the client
"""

from __future__ import annotations

from typing import Any

import torch

from .audio import VOICES as VOICES  # the preset voices omni serve lists (GET /v1/audio/voices)
from .catalog import spec_for
from .preprocessing import ReferencePreprocessing
from .request import TextRequest
from .sampling import SamplingParams
from .spec import CodecTokenSpec, EngineKnobs, knobs_for
from .stages import AREngine, AudioFormat, CodecVocoder, SpeakerEncoderStage, require, with_data
from .voice_cache import VOICE_KEY, reference_artefacts

REF_CODES = "ref_codes"


def ar_engine(spec: CodecTokenSpec, knobs: EngineKnobs, loader: Any, stage: str) -> AREngine:
    """The model's AR transformer under the continuous-batching engine, with the stage's knobs."""
    return AREngine(
        model_name=spec.name, model=spec.load(loader, "lm"), seed=knobs.seed, params=SamplingParams(knobs.temperature, knobs.top_k),
        chunk_frames=knobs.chunk_frames, first_chunk_frames=knobs.first_chunk_frames, batching=knobs.batching, stage=stage,
        schedule=knobs.schedule(spec.frame_rate),
    )


class ReferenceCodesEncoder:
    """``ref_wave`` -> ``ref_codes`` ``[K, frames]`` (empty for a preset voice); the wave leaves the payload.

    A voice the server keyed (``voice_key``: an uploaded voice or inline ``ref_audio``) is encoded
    once and then read from the voice cache, in whichever stage holds this encoder (its own
    ``audio_encoder`` stage, or the engine of a model that encodes there).
    """

    def __init__(self, spec: CodecTokenSpec, loader: Any, stage: str):
        self.spec, self.stage, self.device = spec, stage, loader.device
        self.encoder = spec.load(loader, "encoder")
        self.quantizer = spec.load(loader, "quantizer")

    @torch.inference_mode()
    def encode(self, wave: torch.Tensor | None) -> torch.Tensor:
        if wave is None:
            return torch.zeros(self.spec.codec.num_codebooks, 0, dtype=torch.long)
        return self.quantizer.encode(self.encoder(wave.to(self.device))).cpu()

    def codes(self, data: dict[str, Any], wave: torch.Tensor | None) -> torch.Tensor:
        """``encode(wave)``, through the voice cache when the request carries a voice key."""
        found = reference_artefacts(data, wave, lambda ref: {REF_CODES: self.encode(ref)}, lambda: {REF_CODES: self.encode(None)})
        return found[REF_CODES]

    def process(self, payload: Any, ctx: Any = None) -> Any:
        data = dict(payload.data)
        data[REF_CODES] = self.codes(data, require(data, "ref_wave", self.spec.name, self.stage))
        del data["ref_wave"]
        return with_data(payload, data)


class CodecTokenEngine:
    """The AR stage: conditions on ``speaker_embedding`` or the preset voice, prompts with the
    reference's codes where the model has them, and streams or returns the generated codes."""

    def __init__(self, spec: CodecTokenSpec, engine: AREngine, stage: str, reference: ReferenceCodesEncoder | None = None):
        self.spec, self.engine, self.stage, self.reference = spec, engine, stage, reference

    def process(self, payload: Any, ctx: Any) -> Any:
        data, spec = payload.data, self.spec
        request = TextRequest.from_data(data)
        if spec.reference == "speaker":
            cond = require(data, "speaker_embedding", spec.name, self.stage)
        else:
            cond = self.engine.model.voice(request.voice_index)
        prompt = None
        if spec.encodes_reference_in == "encoder_stage":
            prompt = require(data, REF_CODES, spec.name, self.stage)
        elif self.reference is not None:
            wave = require(data, "ref_wave", spec.name, self.stage)
            prompt = None if wave is None and VOICE_KEY not in data else self.reference.codes(data, wave)
        if spec.streams:
            total = self.engine.stream(ctx, request, cond, prompt)
            return with_data(payload, {"num_frames": total, "frame_rate": spec.frame_rate})
        codes = self.engine.collect(ctx, request, cond, prompt)
        return with_data(payload, {"codes": codes, "frame_rate": spec.frame_rate})


def build_preprocessing(model: str) -> ReferencePreprocessing:
    spec = spec_for(model)
    return ReferencePreprocessing(spec.frame_rate, spec.reference_sample_rate, spec.text.max_chars, spec.text.max_seconds)


def build_speaker_encoder(model: str, device: str | None = None, model_path: str | None = None, stage_name: str = "speaker_encoder", **knobs: Any) -> SpeakerEncoderStage:
    spec = spec_for(model)
    loader = knobs_for(spec, "loader", knobs, stage_name).loader(device, model_path)
    return SpeakerEncoderStage(spec.load(loader, "speaker_encoder"), loader.device, spec.name, stage_name)


def build_audio_encoder(model: str, device: str | None = None, model_path: str | None = None, stage_name: str = "audio_encoder", **knobs: Any) -> ReferenceCodesEncoder:
    spec = spec_for(model)
    return ReferenceCodesEncoder(spec, knobs_for(spec, "loader", knobs, stage_name).loader(device, model_path), stage_name)


def build_tts_engine(model: str, device: str | None = None, model_path: str | None = None, stage_name: str = "tts_engine", **knobs: Any) -> CodecTokenEngine:
    spec = spec_for(model)
    settings = knobs_for(spec, "engine", knobs, stage_name)
    loader = settings.loader(device, model_path)
    reference = ReferenceCodesEncoder(spec, loader, stage_name) if spec.encodes_reference_in == "engine" else None
    return CodecTokenEngine(spec, ar_engine(spec, settings, loader, stage_name), stage_name, reference)


def build_vocoder(model: str, device: str | None = None, model_path: str | None = None, stage_name: str = "vocoder", **knobs: Any) -> CodecVocoder:
    spec = spec_for(model)
    settings = knobs_for(spec, "vocoder", knobs, stage_name)
    loader = settings.loader(settings.codec_placement(spec.name, device), model_path)
    quantizer = spec.load(loader, "quantizer")
    return CodecVocoder(
        max_batch_size=settings.max_batch_size, scheduler=settings.scheduler, model=spec.name, stage=stage_name, frontend=lambda first_chunk: quantizer.decode,
        decoder=spec.load(loader, "decoder"), audio=AudioFormat(spec.codec.sample_rate, spec.codec.channels),
        device=loader.device, chunk_frames=settings.chunk_frames,
    )
