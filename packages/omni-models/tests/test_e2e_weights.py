"""``omni synthesize --model ID --weights DIR``: a local safetensors checkpoint, written here from
the model's own state dicts, is what every weight-loading stage reads (in every process)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from e2e_support import omni
from safetensors.torch import save_file

from omni_models.common.components import Loader
from omni_models.export import components_of

MODEL = "bosonai/higgs-tts-3-4b"  # three processes, every one of them loads weights
TEXT = "Weights from a local checkpoint."
pytestmark = pytest.mark.timeout(300)


def _write_checkpoint(directory: Path, scale: dict[str, float] | None = None) -> Path:
    """The seeded modules' state dicts under ``<component>.`` prefixes; ``scale`` perturbs components."""
    components = components_of("omni_models.higgs_tts")
    loader = Loader()
    tensors = {}
    for name in components:
        factor = (scale or {}).get(name, 1.0)
        for key, value in loader.get(components, name).state_dict().items():
            tensors[f"{name}.{key}"] = (value * factor if value.is_floating_point() else value).contiguous()
    directory.mkdir()
    save_file(tensors, str(directory / "model.safetensors"))
    return directory


def _synthesize(tmp_path: Path, name: str, *args: str) -> bytes:
    result = omni("synthesize", TEXT, "-o", name, "--model", MODEL, "--device", "cpu", *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "deprecated" not in result.stderr
    return (tmp_path / name).read_bytes()


def test_weights_dir_is_loaded_by_every_weight_stage(tmp_path: Path) -> None:
    dummy = _synthesize(tmp_path, "dummy.wav")
    same = _write_checkpoint(tmp_path / "same")
    assert _synthesize(tmp_path, "same.wav", "--weights", str(same)) == dummy  # the file holds exactly the seeded weights

    # a vocoder-only change in the file changes the audio: the vocoder process read the file, not its seed
    changed = _write_checkpoint(tmp_path / "changed", scale={"audio_tokenizer.decoder": 0.5})
    assert _synthesize(tmp_path, "changed.wav", "--weights", str(changed)) != dummy


def test_weights_that_do_not_fit_name_the_key(tmp_path: Path) -> None:
    checkpoint = tmp_path / "other"
    checkpoint.mkdir()
    save_file({"llm.unrelated": importlib.import_module("torch").zeros(2)}, str(checkpoint / "model.safetensors"))
    result = omni("synthesize", TEXT, "-o", "x.wav", "--model", MODEL, "--device", "cpu", "--weights", str(checkpoint), cwd=tmp_path)
    assert result.returncode == 2
    assert f"checkpoint {str(checkpoint)!r} does not fit component" in result.stderr
    assert not (tmp_path / "x.wav").exists()


def test_weights_on_a_pipeline_without_weights_is_refused(tmp_path: Path) -> None:
    checkpoint = _write_checkpoint(tmp_path / "ckpt")
    result = omni("synthesize", TEXT, "-o", "x.wav", "--model", "omni/espeak", "--weights", str(checkpoint), cwd=tmp_path)
    assert result.returncode == 1
    assert "no stage of omni/espeak loads weights" in result.stderr and "Traceback" not in result.stderr


def test_model_path_naming_a_checkpoint_says_to_use_weights(tmp_path: Path) -> None:
    checkpoint = _write_checkpoint(tmp_path / "ckpt")
    result = omni("synthesize", TEXT, "-o", "x.wav", "--model-path", str(checkpoint), cwd=tmp_path)
    assert result.returncode == 1
    assert f"fix:  --weights {checkpoint}" in result.stderr and "Traceback" not in result.stderr
