"""Voxtral TTS (``mistralai/voxtral-tts``): AR generation of 8 parallel codebooks at 12.5 Hz and a
24 kHz codec. The preprocessing output (input_ids, voice, generation limits) travels in the payload."""
