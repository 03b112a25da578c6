"""MOSS-TTS Local (``openmoss/moss-tts-local``, split variant ``openmoss/moss-tts-local-split``):
a backbone plus a local (per-frame) transformer over 16 codebooks; 48 kHz stereo codec.
Preprocessing hands prepared requests to the AR stage through a process-local queue."""
