"""Ming-Omni-TTS stages.

preprocessing     text normalisation + byte tokens, limits, voice, and the reference recording
                  at 44.1 kHz, all in the payload
reference_encode  speaker encoder -> ``spk_emb`` ``[64]`` and the audio VAE encoder ->
                  ``prompt_latent`` ``[32, frames]``, both sent as tensors in the payload (an
                  uploaded or inline voice: computed once, then read from the voice cache)
tts_engine        AR transformer (KV cache) with a flow-matching head generating 25 Hz
                  continuous latents, streamed to audio_decode
audio_decode      latent decoder: 25 Hz latents -> 44.1 kHz mono, streamed to the client
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from omni_models.common.audio import VOICES as VOICES  # the preset voices omni serve lists (GET /v1/audio/voices)
from omni_models.common.audio import resample
from omni_models.common.codec import CodecConfig
from omni_models.common.components import Component, Loader, build_codec_decoder, build_codec_encoder, build_speaker_encoder
from omni_models.common.flow import NoiseStream
from omni_models.common.preprocessing import ReferencePreprocessing
from omni_models.common.request import TextRequest
from omni_models.common.sampling import generator_for
from omni_models.common.speaker import SpeakerEncoderConfig
from omni_models.common.spec import LoaderKnobs, VocoderKnobs, apply_knobs
from omni_models.common.stages import AudioFormat, CodecVocoder, is_cancelled, require, with_data
from omni_models.common.stages import chunk_frames as group_frames
from omni_models.common.voice_cache import reference_artefacts

from .model import LatentARConfig, build_latent_ar, generate_latents

MODEL = "ming_omni_tts"
VAE = CodecConfig(sample_rate=44100, hop=1764, channels=1, latent_dim=32, num_codebooks=1, codebook_size=1)
SPEAKER = SpeakerEncoderConfig(embed_dim=64)
AR = LatentARConfig(latent_dim=VAE.latent_dim, cond_dim=SPEAKER.embed_dim)
MAX_CHARS = 400
MAX_SECONDS = 30.0


def components() -> dict[str, Component]:
    return {
        "speaker_encoder": (build_speaker_encoder, SPEAKER),
        "audio_vae.encoder": (build_codec_encoder, VAE),
        "audio_vae.decoder": (build_codec_decoder, VAE),
        "llm": (build_latent_ar, AR),
    }


class ReferenceEncode:
    def __init__(self, loader: Loader):
        self.device = loader.device
        self.speaker = loader.get(components(), "speaker_encoder")
        self.encoder = loader.get(components(), "audio_vae.encoder")

    @torch.inference_mode()
    def process(self, payload: Any, ctx: Any = None) -> Any:
        data = dict(payload.data)
        wave = require(data, "ref_wave", MODEL, "reference_encode")
        found = reference_artefacts(data, wave, self._encode, lambda: {
            "spk_emb": self.speaker.preset(int(require(data, "voice_index", MODEL, "reference_encode"))),
            "prompt_latent": torch.zeros(VAE.latent_dim, 0),
        })
        del data["ref_wave"]
        for name, tensor in found.items():
            data[name] = tensor.detach().to("cpu", torch.float32).contiguous()
        return with_data(payload, data)

    def _encode(self, wave: torch.Tensor) -> dict[str, torch.Tensor]:
        """Both artefacts of a recording: the speaker embedding and the VAE's prompt latents."""
        wave = wave.to(self.device)
        return {"spk_emb": self.speaker(resample(wave[None], VAE.sample_rate, SPEAKER.sample_rate)[0]), "prompt_latent": self.encoder(wave)}


class TTSEngine:
    def __init__(self, loader: Loader, chunk_frames: int, first_chunk_frames: int):
        self.seed = loader.seed
        self.model = loader.get(components(), "llm")
        self.chunk_frames, self.first_chunk_frames = chunk_frames, first_chunk_frames

    def process(self, payload: Any, ctx: Any) -> Any:
        data = payload.data
        request = TextRequest.from_data(data)
        spk_emb = require(data, "spk_emb", MODEL, "tts_engine")
        prompt_latent = require(data, "prompt_latent", MODEL, "tts_engine")
        if not isinstance(spk_emb, torch.Tensor) or tuple(spk_emb.shape) != (SPEAKER.embed_dim,):
            raise ValueError(f"{MODEL}: spk_emb must be a float tensor of shape ({SPEAKER.embed_dim},)")
        if not isinstance(prompt_latent, torch.Tensor) or prompt_latent.dim() != 2 or prompt_latent.shape[0] != VAE.latent_dim:
            raise ValueError(f"{MODEL}: prompt_latent must be a float tensor of shape ({VAE.latent_dim}, frames)")
        with torch.inference_mode():
            prompt = self.model.prompt(request.input_ids, spk_emb, prompt_latent)
        noise = NoiseStream(generator_for(self.seed, request.seed, MODEL, "flow"), VAE.latent_dim)
        latents = generate_latents(self.model, prompt, request.limits, noise, cancelled=lambda: is_cancelled(ctx))
        total = emit_latents(ctx, latents, first=self.first_chunk_frames, size=self.chunk_frames)
        return with_data(payload, {"num_frames": total, "frame_rate": VAE.frame_rate})


def emit_latents(ctx: Any, latents: Any, *, first: int, size: int) -> int:
    """Stream latent frames as ``{"latents": [latent_dim, n], "start_frame"}`` chunks."""
    total = 0
    for start, chunk in group_frames(latents, first, size):
        ctx.emit({"latents": chunk.to("cpu", torch.float32), "start_frame": start})
        total += chunk.shape[1]
    return total


def build_preprocessing() -> ReferencePreprocessing:
    return ReferencePreprocessing(VAE.frame_rate, VAE.sample_rate, MAX_CHARS, MAX_SECONDS)


@dataclass(frozen=True)
class LatentEngineKnobs(LoaderKnobs):
    """The latent engine's knobs (the pipeline file declares the same with types and ranges)."""

    chunk_frames: int = 10
    first_chunk_frames: int = 3


DECODE_KNOBS = ("load_format", "seed", "num_threads", "max_batch_size", "scheduler")


def build_reference_encode(device: str | None = None, model_path: str | None = None, stage_name: str = "reference_encode", **knobs: Any) -> ReferenceEncode:
    return ReferenceEncode(apply_knobs(LoaderKnobs(), knobs, model=MODEL, stage=stage_name).loader(device, model_path))


def build_tts_engine(device: str | None = None, model_path: str | None = None, stage_name: str = "tts_engine", **knobs: Any) -> TTSEngine:
    settings = apply_knobs(LatentEngineKnobs(), knobs, model=MODEL, stage=stage_name)
    if settings.chunk_frames < 1 or settings.first_chunk_frames < 1:
        raise ValueError(f"chunk_frames and first_chunk_frames must be >= 1, got {settings.chunk_frames} and {settings.first_chunk_frames}")
    return TTSEngine(settings.loader(device, model_path), settings.chunk_frames, settings.first_chunk_frames)


def build_audio_decode(device: str | None = None, model_path: str | None = None, stage_name: str = "audio_decode", **knobs: Any) -> CodecVocoder:
    settings = apply_knobs(VocoderKnobs(), knobs, model=MODEL, stage=stage_name, names=DECODE_KNOBS)
    loader = settings.loader(device, model_path)
    return CodecVocoder(
        max_batch_size=settings.max_batch_size, scheduler=settings.scheduler,
        model=MODEL, stage=stage_name, frontend=lambda first_chunk: (lambda latents: latents),
        decoder=loader.get(components(), "audio_vae.decoder"),
        audio=AudioFormat(VAE.sample_rate, VAE.channels), device=loader.device, key="latents",
    )
