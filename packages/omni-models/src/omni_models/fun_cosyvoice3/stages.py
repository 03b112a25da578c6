"""Fun-CosyVoice3 stages.

preprocessing  text normalisation + byte tokens, limits, the speaker embedding (CAM++-style
               encoder or a preset voice) and the reference's speech tokens (speech tokenizer; an uploaded
               or inline voice: computed once, then read from the voice cache);
               the prepared request stays in ``_PREPARED_REQUESTS`` (process-local)
tts_engine     speech-token LM (KV cache) generating one 6561-entry codebook at 25 Hz,
               streamed to the vocoder with the speaker embedding on the first chunk
vocoder        flow matching (tokens -> 50 Hz 80-bin mel) and a HiFi-GAN-shaped mel vocoder
               -> 24 kHz mono, streamed to the client
"""

from __future__ import annotations

from typing import Any

import torch

from omni_models.common import prepared
from omni_models.common.ar import ARConfig
from omni_models.common.audio import VOICES as VOICES  # the preset voices omni serve lists (GET /v1/audio/voices)
from omni_models.common.audio import reference_audio, resample
from omni_models.common.codec import CodecConfig
from omni_models.common.components import (
    Component,
    Loader,
    build_ar,
    build_codec_decoder,
    build_codec_encoder,
    build_rvq,
    build_speaker_encoder,
)
from omni_models.common.flow import NoiseStream
from omni_models.common.prepared import PreparedRequest, PreprocessingContext
from omni_models.common.request import TOKENIZER, prepare_text_request
from omni_models.common.sampling import SamplingParams, generator_for
from omni_models.common.speaker import SpeakerEncoderConfig
from omni_models.common.spec import EngineKnobs, LoaderKnobs, VocoderKnobs, apply_knobs
from omni_models.common.stages import AREngine, AudioFormat, CodecVocoder, require, with_data
from omni_models.common.voice_cache import reference_artefacts

from .handoff import _PREPARED_REQUESTS, _PREPROCESSING_CONTEXT, EDGE, MODEL  # the contract's module state
from .model import TokenFlowConfig, build_token_flow

TOKEN_RATE_HOP = 960  # 25 Hz speech tokens at 24 kHz
SPEECH_TOKENIZER = CodecConfig(sample_rate=24000, hop=TOKEN_RATE_HOP, channels=1, latent_dim=64, num_codebooks=1, codebook_size=6561)
MEL_VOCODER = CodecConfig(sample_rate=24000, hop=480, channels=1, latent_dim=80, num_codebooks=1, codebook_size=1)
SPEAKER = SpeakerEncoderConfig(embed_dim=64)
AR = ARConfig(num_codebooks=1, codebook_size=6561, layout="parallel", cond_dim=SPEAKER.embed_dim, max_seq_len=2048)
FLOW = TokenFlowConfig(vocab=6561, speaker_dim=SPEAKER.embed_dim, n_mels=80, token_mel_ratio=2)
TOKEN_RATE = SPEECH_TOKENIZER.frame_rate
MAX_CHARS = 400
MAX_SECONDS = 30.0
#: Knob defaults (the pipeline file declares the same with their types and ranges).
ENGINE = EngineKnobs(chunk_frames=25, first_chunk_frames=8, top_k=25)
VOCODER_KNOBS = ("load_format", "seed", "num_threads", "max_batch_size", "scheduler")


def components() -> dict[str, Component]:
    return {
        "campplus": (build_speaker_encoder, SPEAKER),
        "speech_tokenizer.encoder": (build_codec_encoder, SPEECH_TOKENIZER),
        "speech_tokenizer.quantizer": (build_rvq, SPEECH_TOKENIZER),
        "llm": (build_ar, AR),
        "flow": (build_token_flow, FLOW),
        "hift": (build_codec_decoder, MEL_VOCODER),
    }


class Preprocessing:
    def __init__(self, loader: Loader):
        self.device = loader.device
        self.speaker = loader.get(components(), "campplus")
        self.tokenizer_encoder = loader.get(components(), "speech_tokenizer.encoder")
        self.tokenizer_quantizer = loader.get(components(), "speech_tokenizer.quantizer")

    @torch.inference_mode()
    def process(self, payload: Any, ctx: Any = None) -> Any:
        data = payload.data
        text = prepare_text_request(data, frame_rate=TOKEN_RATE, max_chars=MAX_CHARS, max_seconds=MAX_SECONDS)
        ref = reference_audio(data, SPEECH_TOKENIZER.sample_rate)
        found = reference_artefacts(data, ref, self._encode,
                                    lambda: {"speaker": self.speaker.preset(text.voice_index), "prompt_tokens": torch.zeros(1, 0, dtype=torch.long)})
        speaker, tokens = found["speaker"], found["prompt_tokens"]
        prepared.put(_PREPARED_REQUESTS, payload.request_id, PreparedRequest(text, speaker.cpu(), tokens), model=MODEL)
        return with_data(payload, {"text": text.text, "num_prompt_tokens": tokens.shape[1]})


    def _encode(self, ref: torch.Tensor) -> dict[str, torch.Tensor]:
        """Both artefacts of a recording: the CAM++ speaker embedding and the speech tokenizer's prompt tokens."""
        ref = ref.to(self.device)
        speaker = self.speaker(resample(ref[None], SPEECH_TOKENIZER.sample_rate, SPEAKER.sample_rate)[0])
        return {"speaker": speaker, "prompt_tokens": self.tokenizer_quantizer.encode(self.tokenizer_encoder(ref)).cpu()}


class TTSEngine:
    def __init__(self, engine: AREngine):
        self.engine = engine

    def process(self, payload: Any, ctx: Any) -> Any:
        request = prepared.take(_PREPARED_REQUESTS, payload.request_id, model=MODEL, edge=EDGE)
        extra = {"speaker": request.speaker.to(torch.float32), "seed": request.text.seed}
        total = self.engine.stream(ctx, request.text, request.speaker, request.prompt_tokens, extra=extra)
        return with_data(payload, {"num_frames": total, "frame_rate": TOKEN_RATE})


class FlowFrontend:
    """Per request: the flow's noise stream (seeded by the request) and speaker embedding."""

    def __init__(self, flow: Any, seed: int, device: str):
        self.flow, self.seed, self.device = flow, seed, device

    def __call__(self, first_chunk: dict[str, Any]) -> Any:
        speaker = require(first_chunk, "speaker", MODEL, "vocoder").to(self.device)
        request_seed = int(require(first_chunk, "seed", MODEL, "vocoder"))
        noise = NoiseStream(generator_for(self.seed, request_seed, MODEL, "flow"), FLOW.n_mels)
        return lambda tokens: self.flow(tokens, speaker, noise)


def build_preprocessing(device: str | None = None, model_path: str | None = None, stage_name: str = "preprocessing", **knobs: Any) -> Preprocessing:
    loader = apply_knobs(LoaderKnobs(), knobs, model=MODEL, stage=stage_name).loader(device, model_path)
    stage = Preprocessing(loader)
    prepared.register(_PREPROCESSING_CONTEXT, MODEL, PreprocessingContext(speaker_dim=SPEAKER.embed_dim, tokenizer_vocab=TOKENIZER.vocab_size))
    return stage


def build_tts_engine(device: str | None = None, model_path: str | None = None, stage_name: str = "tts_engine", **knobs: Any) -> TTSEngine:
    prepared.context_of(_PREPROCESSING_CONTEXT, MODEL, EDGE).check(AR.cond_dim, AR.text_vocab, MODEL)
    settings = apply_knobs(ENGINE, knobs, model=MODEL, stage=stage_name)
    loader = settings.loader(device, model_path)
    return TTSEngine(
        AREngine(
            model_name=MODEL, model=loader.get(components(), "llm"), seed=settings.seed, params=SamplingParams(settings.temperature, settings.top_k),
            chunk_frames=settings.chunk_frames, first_chunk_frames=settings.first_chunk_frames, batching=settings.batching, stage=stage_name,
            schedule=settings.schedule(TOKEN_RATE),
        )
    )


def build_vocoder(device: str | None = None, model_path: str | None = None, stage_name: str = "vocoder", **knobs: Any) -> CodecVocoder:
    settings = apply_knobs(VocoderKnobs(), knobs, model=MODEL, stage=stage_name, names=VOCODER_KNOBS)
    loader = settings.loader(device, model_path)
    return CodecVocoder(
        max_batch_size=settings.max_batch_size, scheduler=settings.scheduler,
        model=MODEL, stage=stage_name, frontend=FlowFrontend(loader.get(components(), "flow"), settings.seed, loader.device),
        decoder=loader.get(components(), "hift"),
        audio=AudioFormat(MEL_VOCODER.sample_rate, MEL_VOCODER.channels), device=loader.device,
    )
