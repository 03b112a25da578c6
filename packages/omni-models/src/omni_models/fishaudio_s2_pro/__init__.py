"""FishAudio S2-Pro (``fishaudio/s2-pro``): dual autoregressive transformer (slow AR over frames,
fast AR over the 10 codebooks of a frame) and a 44.1 kHz codec. Handoffs travel in the payload."""
