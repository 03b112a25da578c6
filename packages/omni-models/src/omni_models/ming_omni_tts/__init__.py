"""Ming-Omni-TTS (``inclusionai/ming-omni-tts``): an AR transformer generating continuous 44.1 kHz
audio latents with a flow-matching head, conditioned on a speaker embedding and a prompt latent."""
