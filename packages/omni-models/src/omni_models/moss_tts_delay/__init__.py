"""MOSS-TTS Delay (``openmoss/moss-tts-delay``): one transformer predicting 8 codebooks in the delay
pattern, 24 kHz codec. Preprocessing hands prepared requests over a process-local queue."""
