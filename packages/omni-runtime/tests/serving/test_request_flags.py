"""``omni synthesize``'s request-field flags and the published-checkpoint hook of the CLI."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest

from omni_runtime.cli import checkpoints
from omni_runtime.cli.request_flags import add_request_flags, request_fields
from omni_runtime.cli.selection import UserError


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_request_flags(parser)
    return parser.parse_args(list(argv))


def test_only_the_given_flags_enter_the_request(tmp_path):
    wav = tmp_path / "me.wav"
    wav.write_bytes(b"RIFF....")
    fields = request_fields(_parse("--language", "english", "--temperature", "0", "--top-k", "5", "--ref-audio", str(wav), "--x-vector-only-mode"))
    assert fields == {"language": "english", "temperature": 0.0, "top_k": 5, "ref_audio": b"RIFF....", "x_vector_only_mode": True}
    assert request_fields(_parse()) == {}


def test_a_missing_reference_recording_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="--ref-audio"):
        request_fields(_parse("--ref-audio", str(tmp_path / "nope.wav")))


def test_checkpoint_hook_runs_the_models_resolver(monkeypatch):
    calls = []

    def resolver(model, weights):
        calls.append((model, weights))
        if weights == "bad":
            raise ValueError("DIR/config.json: missing\n  fix:  copy it")
        if weights == "published":  # served by another registered pipeline
            return checkpoints.Checkpoint("/published", pipeline="org/model-real")
        if weights == "export":  # not a published checkpoint: the model runs as registered
            return None
        return "/resolved"

    entry = SimpleNamespace(name="org/model", load=lambda: resolver)
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: [entry] if group == "omni.checkpoints" else [])
    assert checkpoints.resolve_weights("Org/Model", None) == "/resolved"
    assert checkpoints.resolve_weights("other/model", "DIR") == "DIR"
    with pytest.raises(checkpoints.CheckpointProblem, match="config.json: missing"):
        checkpoints.resolve_weights("org/model", "bad")
    assert checkpoints.resolve_checkpoint("org/model", "published") == checkpoints.Checkpoint("/published", "org/model-real")
    assert checkpoints.resolve_checkpoint("org/model", "export") == checkpoints.Checkpoint("export", None)
    assert checkpoints.resolve_checkpoint("org/model", None).pipeline is None
    assert calls[:2] == [("Org/Model", None), ("org/model", "bad")]
