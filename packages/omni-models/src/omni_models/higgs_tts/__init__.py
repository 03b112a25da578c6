"""Higgs-TTS (``bosonai/higgs-tts-3-4b``): text + reference audio tokens -> 8-codebook delay-pattern
codes -> 24 kHz audio. Every handoff travels in the payload."""
