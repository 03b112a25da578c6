"""Zonos2 (``zyphra/zonos2``): speaker embedding, an AR transformer over 9 codebooks in the delay
pattern at ~86 Hz, and a 44.1 kHz DAC-style codec. All stage state travels in the payload."""
