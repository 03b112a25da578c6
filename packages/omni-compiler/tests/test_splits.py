"""omni_compiler.splits: the fully split placement a model's contract allows."""

from __future__ import annotations

import pytest
from compiler_helpers import fixture_dict

from omni_compiler import compile
from omni_compiler.splits import fraction_overrides, fully_split_overrides, local_groups
from omni_config import raw_config


def test_process_local_edges_group_stages_in_declaration_order():
    data = fixture_dict("qwen3_tts")
    assert local_groups(raw_config(data)) == [["preprocessing", "tts_engine"], ["vocoder"]]
    data["process_local_edges"].append({"src": "tts_engine", "dst": "vocoder", "reason": "r"})
    assert local_groups(raw_config(data)) == [["preprocessing", "tts_engine", "vocoder"]]


def test_the_fully_split_qwen3_compiles_with_the_contract_kept():
    data = fixture_dict("qwen3_tts")
    config = raw_config(data)
    split = fully_split_overrides(config)
    assert split == [
        "--stages.preprocessing.process", "solo_preprocessing",
        "--stages.tts_engine.process", "solo_preprocessing",
        "--stages.vocoder.process", "solo_vocoder",
    ]
    fractions = fraction_overrides(config)
    assert fractions == [
        "--stages.tts_engine.runtime.resources.total_gpu_memory_fraction", "0.50",
        "--stages.vocoder.runtime.resources.total_gpu_memory_fraction", "0.50",
    ]
    topology = compile(raw_config(data, split + fractions))
    assert [(p.name, p.stages) for p in topology.processes] == [("solo_preprocessing", ("preprocessing", "tts_engine")), ("solo_vocoder", ("vocoder",))]


def test_fractions_share_what_the_declared_ones_leave():
    data = fixture_dict("qwen3_tts")
    data["stages"][1]["runtime"] = {"resources": {"total_gpu_memory_fraction": 0.7}}
    assert fraction_overrides(raw_config(data)) == ["--stages.vocoder.runtime.resources.total_gpu_memory_fraction", "0.30"]
    data["stages"][1]["runtime"]["resources"]["total_gpu_memory_fraction"] = 1.0
    with pytest.raises(ValueError, match=r"no GPU memory left to declare for \['vocoder'\]"):
        fraction_overrides(raw_config(data))
