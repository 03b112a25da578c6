"""Higgs-TTS from its published checkpoint (``bosonai/higgs-tts-3-4b``): the Qwen3 backbone with
the fused multi-codebook audio embedding/head under omni's continuous batching, and the Higgs
Audio v2 tokenizer as the codec. Every handoff travels in the payload; no edge is process-local."""

from .resolve import resolve_published

__all__ = ["resolve_published"]
