"""Config class of ``funaudiollm/fun-cosyvoice3``: its pipeline file, whose ``process_local_edges`` is the contract."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class FunCosyVoice3Config(ModelConfig):
    model_id = "funaudiollm/fun-cosyvoice3"
    package = "omni_models.fun_cosyvoice3"
