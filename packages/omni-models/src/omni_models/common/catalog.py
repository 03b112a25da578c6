"""The codec-token models, one row each: everything the shared stage factories need to know.

A pipeline file names its row with the fixed factory argument ``model`` (``factory_args:
{model: zonos2, ...}``); the handoff models (Qwen3-TTS, Fun-CosyVoice3, MOSS-TTS) read their row
in their own ``stages.py``. Adding a model is a row here plus its pipeline file
(docs/adding-a-model.md). The numbers are the real models' (sample rate, hop, codebooks,
layout); the network sizes are the small seeded stand-ins of ``common``.
"""

from __future__ import annotations

from .codec import CodecConfig
from .speaker import SpeakerEncoderConfig
from .spec import CodecTokenSpec, EngineKnobs, VocoderKnobs

SPEAKER = SpeakerEncoderConfig(embed_dim=64)

MODELS: tuple[CodecTokenSpec, ...] = (
    CodecTokenSpec(
        name="audar_tts", layout="parallel", lm="lm", codec_prefix="codec", reference="speaker", speaker=SPEAKER, streams=False,
        codec=CodecConfig(sample_rate=24000, hop=960, channels=1, latent_dim=64, num_codebooks=4, codebook_size=1024),
        engine=EngineKnobs(chunk_frames=1, first_chunk_frames=1), vocoder=VocoderKnobs(chunk_frames=12),
    ),
    CodecTokenSpec(
        name="zonos2", layout="delay", lm="backbone", codec_prefix="dac", reference="speaker", speaker=SPEAKER, streams=True,
        codec=CodecConfig(sample_rate=44100, hop=512, channels=1, latent_dim=64, num_codebooks=9, codebook_size=1024),
        engine=EngineKnobs(chunk_frames=43, first_chunk_frames=12), max_seq_len=3072,
    ),
    CodecTokenSpec(
        name="higgs_tts", layout="delay", lm="llm", codec_prefix="audio_tokenizer", reference="codes", encodes_reference_in="encoder_stage", streams=True,
        codec=CodecConfig(sample_rate=24000, hop=960, channels=1, latent_dim=64, num_codebooks=8, codebook_size=1024),
        engine=EngineKnobs(chunk_frames=12, first_chunk_frames=4),
    ),
    CodecTokenSpec(
        name="fishaudio_s2_pro", layout="depth", lm="dual_ar", codec_prefix="codec", reference="codes", encodes_reference_in="engine", streams=True,
        codec=CodecConfig(sample_rate=44100, hop=2048, channels=1, latent_dim=64, num_codebooks=10, codebook_size=1024),
        engine=EngineKnobs(chunk_frames=8, first_chunk_frames=3),
    ),
    CodecTokenSpec(
        name="voxtral_tts", layout="parallel", lm="backbone", codec_prefix="codec", reference="none", streams=False,
        codec=CodecConfig(sample_rate=24000, hop=1920, channels=1, latent_dim=64, num_codebooks=8, codebook_size=1024),
        engine=EngineKnobs(chunk_frames=1, first_chunk_frames=1), vocoder=VocoderKnobs(chunk_frames=6),
    ),
    CodecTokenSpec(
        name="moss_tts_delay", layout="delay", lm="model", codec_prefix="codec", reference="codes", encodes_reference_in="preprocessing", streams=True,
        codec=CodecConfig(sample_rate=24000, hop=960, channels=1, latent_dim=64, num_codebooks=8, codebook_size=1024),
        engine=EngineKnobs(chunk_frames=12, first_chunk_frames=4),
    ),
    CodecTokenSpec(
        name="moss_tts_local", layout="depth", lm="backbone", codec_prefix="codec", reference="codes", encodes_reference_in="preprocessing", streams=True,
        codec=CodecConfig(sample_rate=48000, hop=3840, channels=2, latent_dim=64, num_codebooks=16, codebook_size=1024),
        engine=EngineKnobs(chunk_frames=5, first_chunk_frames=2),
    ),
    CodecTokenSpec(
        name="qwen3_tts", layout="depth", lm="talker", codec_prefix="speech_tokenizer", reference="speaker", speaker=SPEAKER, streams=True,
        codec=CodecConfig(sample_rate=24000, hop=1920, channels=1, latent_dim=64, num_codebooks=16, codebook_size=2048),
        engine=EngineKnobs(chunk_frames=6, first_chunk_frames=2),
    ),
)


def spec_for(model: str) -> CodecTokenSpec:
    """The row named ``model``; an unknown name is an error listing the rows."""
    for spec in MODELS:
        if spec.name == model:
            return spec
    raise ValueError(f"no codec-token model {model!r} in omni_models.common.catalog; known: {', '.join(s.name for s in MODELS)}")
