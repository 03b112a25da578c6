"""Qwen3-TTS 12 Hz (``Qwen/Qwen3-TTS-12Hz-{0.6B,1.7B}-{Base,CustomVoice,VoiceDesign}``) from its
published checkpoint: talker + code predictor at 12.5 Hz over 16 codebooks, the 12 Hz codec's
decoder at 24 kHz. Prepared requests are handed from preprocessing to the engine in process memory."""

from .checkpoint import resolve as resolve_checkpoint

__all__ = ["resolve_checkpoint"]
