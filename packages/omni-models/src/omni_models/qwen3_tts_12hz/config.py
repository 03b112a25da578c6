"""Config class of the Qwen3-TTS 12 Hz checkpoints: its pipeline file, whose ``process_local_edges`` is the contract."""

from __future__ import annotations

from omni_models.common.config import ModelConfig

#: The published ids served by this pipeline (the ``omni.models`` and ``omni.checkpoints`` entry names, lower case).
MODEL_IDS = (
    "qwen/qwen3-tts-12hz-0.6b-base",
    "qwen/qwen3-tts-12hz-1.7b-base",
    "qwen/qwen3-tts-12hz-0.6b-customvoice",
    "qwen/qwen3-tts-12hz-1.7b-customvoice",
    "qwen/qwen3-tts-12hz-1.7b-voicedesign",
)


class Qwen3TTS12HzConfig(ModelConfig):
    model_id = "qwen/qwen3-tts-12hz-1.7b-customvoice"
    package = "omni_models.qwen3_tts_12hz"
