"""What each model is (the registered-models table of the package README), as test parameters."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelCase:
    model_id: str
    folder: str
    variant: str
    sample_rate: int
    channels: int
    codebooks: int | None  # None: continuous latents (Ming)
    engine: str
    vocoder: str
    streams: bool  # engine => vocoder (stream_to) rather than a plain ->
    config_class: str


CASES = (
    ModelCase("bosonai/higgs-tts-3-4b", "higgs_tts", "pipeline", 24000, 1, 8, "tts_engine", "vocoder", True, "HiggsTTSConfig"),
    ModelCase("fishaudio/s2-pro", "fishaudio_s2_pro", "pipeline", 44100, 1, 10, "tts_engine", "vocoder", True, "FishAudioS2ProConfig"),
    ModelCase("mistralai/voxtral-tts", "voxtral_tts", "pipeline", 24000, 1, 8, "tts_generation", "vocoder", False, "VoxtralTTSConfig"),
    ModelCase("inclusionai/ming-omni-tts", "ming_omni_tts", "pipeline", 44100, 1, None, "tts_engine", "audio_decode", True, "MingOmniTTSConfig"),
    ModelCase("openmoss/moss-tts-local", "moss_tts_local", "pipeline", 48000, 2, 16, "tts_engine", "vocoder", True, "MossTTSLocalConfig"),
    ModelCase("openmoss/moss-tts-local-split", "moss_tts_local", "pipeline_split", 48000, 2, 16, "tts_engine", "vocoder", True, "MossTTSLocalSplitConfig"),
    ModelCase("qwen/qwen3-tts", "qwen3_tts", "pipeline", 24000, 1, 16, "tts_engine", "vocoder", True, "Qwen3TTSConfig"),
    ModelCase("openmoss/moss-tts-delay", "moss_tts_delay", "pipeline", 24000, 1, 8, "tts_engine", "vocoder", True, "MossTTSDelayConfig"),
    ModelCase("audar/audar-tts", "audar_tts", "pipeline", 24000, 1, 4, "tts_engine", "vocoder", False, "AudarTTSConfig"),
    ModelCase("funaudiollm/fun-cosyvoice3", "fun_cosyvoice3", "pipeline", 24000, 1, 1, "tts_engine", "vocoder", True, "FunCosyVoice3Config"),
    ModelCase("zyphra/zonos2", "zonos2", "pipeline", 44100, 1, 9, "tts_engine", "vocoder", True, "Zonos2Config"),
)

IDS = [c.model_id for c in CASES]
