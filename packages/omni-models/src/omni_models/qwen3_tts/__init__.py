"""Qwen3-TTS (``qwen/qwen3-tts``): talker + code predictor over 16 codebooks at 12.5 Hz, 24 kHz.
Prepared requests are handed from preprocessing to the AR engine in process memory."""
