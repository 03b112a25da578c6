"""Fun-CosyVoice3 (``funaudiollm/fun-cosyvoice3``): an LM over 25 Hz speech tokens, then a
flow-matching model (tokens -> 50 Hz mel) and a HiFi-GAN-shaped vocoder at 24 kHz. Prepared
requests are handed from preprocessing to the LM in process memory."""
