"""Dummy weights are deterministic; a local safetensors checkpoint of the same shapes loads
exactly, and a checkpoint that does not fit is refused with the key and shapes."""

import subprocess
import sys

import pytest
import torch
from helpers import build_stages, synthesize, topology
from models_table import CASES
from safetensors.torch import load_file, save_file

from omni_models.common.codec import CodecDecoder
from omni_models.common.components import Loader, export_dummy_checkpoint
from omni_models.common.weights import CheckpointError, init_dummy, load_safetensors
from omni_models.export import components_of


def _weight_stages(case):
    return [s.name for s in topology(case.folder, case.variant).stages if "load_format" in s.factory_args]


def test_dummy_weights_depend_only_on_the_seed():
    a = init_dummy(CodecDecoder(8, 480, 1, width=16), 5).state_dict()
    b = init_dummy(CodecDecoder(8, 480, 1, width=16), 5).state_dict()
    c = init_dummy(CodecDecoder(8, 480, 1, width=16), 6).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a if a[k].dim() > 1)


@pytest.mark.parametrize("case", [c for c in CASES if c.variant == "pipeline"], ids=lambda c: c.model_id)
def test_safetensors_checkpoint_round_trip_reproduces_dummy_weights(case, tmp_path):
    components = components_of(f"omni_models.{case.folder}")
    export_dummy_checkpoint(components, str(tmp_path), seed=77)
    keys = load_file(str(tmp_path / "model.safetensors")).keys()
    assert {k.split(".")[0] for k in keys} == {name.split(".")[0] for name in components}
    weight_stages = _weight_stages(case)
    from_ckpt = build_stages(
        case.folder, case.variant, {s: {"load_format": "safetensors", "seed": 77} for s in weight_stages}, model_path=str(tmp_path)
    )
    dummy = build_stages(case.folder, case.variant, {s: {"seed": 77} for s in weight_stages})
    request = {"text": "Checkpoint test.", "voice": "coral"}
    a = synthesize(case.folder, request, variant=case.variant, stages=from_ckpt).audio
    b = synthesize(case.folder, request, variant=case.variant, stages=dummy).audio
    assert torch.equal(a, b)


def test_checkpoint_with_wrong_shape_or_missing_keys_is_refused(tmp_path):
    module = init_dummy(CodecDecoder(8, 480, 1, width=16), 1)
    tensors = {f"dec.{k}": v for k, v in module.state_dict().items()}
    save_file(tensors, str(tmp_path / "model.safetensors"))
    loaded = load_safetensors(CodecDecoder(8, 480, 1, width=16), tmp_path, "dec")
    assert all(torch.equal(loaded.state_dict()[k], module.state_dict()[k]) for k in module.state_dict())

    bad = dict(tensors)
    bad["dec.post.weight"] = torch.zeros(3, 3, 3)
    del bad["dec.pre.0.bias"]
    bad["dec.extra"] = torch.zeros(1)
    save_file(bad, str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointError) as info:
        load_safetensors(CodecDecoder(8, 480, 1, width=16), tmp_path, "dec")
    message = str(info.value)
    assert str(tmp_path) in message and "component 'dec'" in message
    assert "missing dec.pre.0.bias" in message and "unexpected dec.extra" in message
    assert "dec.post.weight has shape (3, 3, 3), the model expects (1, 8, 7)" in message


def test_safetensors_needs_an_existing_directory_with_files(tmp_path):
    with pytest.raises(CheckpointError, match="needs model_path"):
        load_safetensors(CodecDecoder(8, 480, 1), None, "x")
    with pytest.raises(CheckpointError, match="is not a directory.*cannot be downloaded here"):
        load_safetensors(CodecDecoder(8, 480, 1), tmp_path / "nope", "x")
    with pytest.raises(CheckpointError, match="holds no \\*.safetensors file"):
        load_safetensors(CodecDecoder(8, 480, 1), tmp_path, "x")


def test_loader_validates_its_arguments():
    with pytest.raises(ValueError, match="load_format 'pt' is not supported; use one of: dummy, safetensors"):
        Loader.create("pt", None, 1, None)
    with pytest.raises(ValueError, match="num_threads"):
        Loader.create("dummy", None, 1, None, num_threads=0)
    # with --weights the runtime passes the checkpoint directory as model_path; dummy weights ignore it
    assert Loader.create("dummy", "qwen/qwen3-tts", 1, None).model_path is None


def test_export_cli_writes_a_loadable_directory(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "omni_models.export", "audar/audar-tts", str(tmp_path / "ckpt"), "--seed", "3"],
        check=False, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "ckpt" / "model.safetensors").is_file()
    bad = subprocess.run([sys.executable, "-m", "omni_models.export", "nobody/model", str(tmp_path)], check=False, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "unknown model 'nobody/model'" in bad.stderr and "Traceback" not in bad.stderr


def test_export_cli_says_its_version():
    import omni_models

    out = subprocess.run([sys.executable, "-m", "omni_models.export", "--version"], check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == f"python -m omni_models.export {omni_models.__version__}", out
