"""Audar-TTS (``audar/audar-tts``): reference speaker embedding, an AR transformer over 4 parallel
codebooks at 25 Hz and a 24 kHz codec. All stage state travels in StagePayload.data."""
