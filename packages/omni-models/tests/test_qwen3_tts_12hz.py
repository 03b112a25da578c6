"""Qwen3-TTS 12 Hz from a checkpoint directory: checks before start, request fields, batching, seeds.

(Exact agreement with the reference implementation is the ``parity`` session's job.)
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import wave
from pathlib import Path

import pytest
import torch
from qwen3_tts_12hz_checkpoint import write_checkpoint

from omni_models.qwen3_tts_12hz import stages
from omni_models.qwen3_tts_12hz.checkpoint import cached_snapshot, resolve, verify
from omni_models.qwen3_tts_12hz.spec import CheckpointError
from omni_runtime.errors import InvalidRequest

MODEL_ID = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("qwen3_12hz")
    return {
        "custom_voice": write_checkpoint(root / "cv", "custom_voice"),
        "voice_design": write_checkpoint(root / "vd", "voice_design"),
        "base": write_checkpoint(root / "base", "base"),
        "custom_voice_0b6": write_checkpoint(root / "cv06", "custom_voice", size="0b6"),
    }


class Ctx:
    cancelled = False
    deadline = None


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_verify_accepts_the_published_layout(checkpoints):
    for directory in checkpoints.values():
        verify(directory)


def test_missing_and_mismatched_files_are_one_error_naming_file_key_and_fix(checkpoints, tmp_path):
    broken = _copy(checkpoints["custom_voice"], tmp_path / "broken")
    (broken / "speech_tokenizer" / "config.json").unlink()
    config = json.loads((broken / "config.json").read_text())
    config["talker_config"]["intermediate_size"] = 96  # no longer the weights' shape
    (broken / "config.json").write_text(json.dumps(config))
    (broken / "merges.txt").unlink()
    with pytest.raises(CheckpointError) as caught:
        verify(broken)
    text = str(caught.value)
    assert "speech_tokenizer/config.json: missing" in text
    assert "merges.txt: missing" in text
    assert "key talker.model.layers.0.mlp.gate_proj.weight has shape [64, 32], config.json implies [96, 32]" in text
    assert text.count("fix:") >= 3


def test_missing_key_is_named(checkpoints, tmp_path):
    from safetensors.torch import load_file, save_file

    broken = _copy(checkpoints["base"], tmp_path / "nokey")
    tensors = load_file(str(broken / "model.safetensors"))
    del tensors["speaker_encoder.fc.weight"]
    save_file(tensors, str(broken / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"model.safetensors: key speaker_encoder.fc.weight is missing"):
        verify(broken)


def test_model_id_resolves_from_the_hugging_face_cache_without_network(checkpoints, tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    repo = cache / "models--Qwen--Qwen3-TTS-12Hz-1.7B-CustomVoice"
    _copy(checkpoints["custom_voice"], repo / "snapshots" / "0123abc")
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0123abc")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    assert cached_snapshot(MODEL_ID.lower()) == repo / "snapshots" / "0123abc"
    assert resolve(MODEL_ID, None) == str((repo / "snapshots" / "0123abc").resolve())
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(CheckpointError, match="--weights DIR"):
        resolve(MODEL_ID, None)


@pytest.mark.parametrize("model", [MODEL_ID, "qwen/qwen3-tts"])
def test_cli_refuses_a_broken_checkpoint_before_starting_any_process(checkpoints, tmp_path, model):
    broken = _copy(checkpoints["custom_voice"], tmp_path / "cli")
    (broken / "generation_config.json").unlink()
    result = subprocess.run(
        [sys.executable, "-m", "omni_runtime.cli", "synthesize", "hi", "-o", str(tmp_path / "o.wav"), "--model", model, "--weights", str(broken), "--device", "cpu"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert "generation_config.json: missing" in result.stderr
    assert "Traceback" not in result.stderr
    assert "process" not in result.stdout + result.stderr.split("generation_config.json")[0]


@pytest.fixture(scope="module")
def built(checkpoints):
    """Each variant's preprocessing and engine (built in this process, as the pipeline's one process does)."""
    out = {}
    for name, directory in checkpoints.items():
        pre = stages.build_preprocessing(model_path=str(directory))
        out[name] = (pre, stages.build_tts_engine(model_path=str(directory)).engine)
    return out


def _wav(seconds: float = 0.5) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        t = torch.arange(int(16000 * seconds)) / 16000
        out.writeframes((torch.sin(2 * torch.pi * 220 * t) * 12000).to(torch.int16).numpy().tobytes())
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("variant", "fields", "param"),
    [
        ("custom_voice", {"voice": "nobody"}, "voice"),
        ("custom_voice", {"voice": "vivian", "ref_text": "hello"}, "ref_text"),
        ("custom_voice_0b6", {"voice": "vivian", "instructions": "slowly"}, "instructions"),
        ("voice_design", {"voice": "vivian"}, "voice"),
        ("voice_design", {"language": "klingon"}, "language"),
        ("voice_design", {"top_p": 0}, "top_p"),
        ("voice_design", {"max_new_tokens": 100000}, "max_new_tokens"),
        ("base", {}, "ref_audio"),
        ("base", {"ref_audio": b"RIFF", "x_vector_only_mode": True}, "ref_audio"),
        ("base", {"ref_audio": b"RIFF"}, "ref_text"),
        ("base", {"instructions": "calm"}, "instructions"),
        ("custom_voice", {"voice": "vivian", "speed": 2.0}, "speed"),
    ],
)
def test_wrong_field_for_the_variant_is_a_400_naming_it(built, variant, fields, param):
    pre, _ = built[variant]
    with pytest.raises(InvalidRequest) as caught:
        pre.prepare({"text": "hello", **fields})
    assert caught.value.param == param


def test_defaults_come_from_generation_config(built):
    pre, _ = built["voice_design"]
    fields = pre.prepare({"text": "hello"}).fields
    assert (fields.talker.temperature, fields.talker.top_k, fields.talker.repetition_penalty) == (0.9, 50, 1.05)
    assert fields.sub.temperature == 0.9
    greedy = pre.prepare({"text": "hello", "temperature": 0}).fields
    assert greedy.talker.greedy and greedy.sub.greedy


def test_x_vector_cloning_runs(built):
    pre, engine = built["base"]
    prepared = pre.prepare({"text": "hello there", "ref_audio": _wav(), "x_vector_only_mode": True, "temperature": 0, "max_new_tokens": 8})
    assert prepared.inputs.x_vector is not None and prepared.context_codes is None
    assert engine.collect(prepared, Ctx()).shape == (7, 8)


def _batch(engine, prepared):
    with engine.scheduler._cond:
        streams = [engine.submit(p, Ctx(), chunked=False) for p in prepared]
    out = [None] * len(streams)
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, [f for f in streams[i]])) for i in range(len(streams))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [torch.stack(r) for r in out]


def test_sampled_codes_follow_the_seed_alone_and_in_a_batch_of_8(built):
    """A request's audio is a function of its seed: the same alone and inside any batch; another seed differs."""
    pre, engine = built["custom_voice"]
    requests = [{"text": f"sentence number {i} " * (1 + i % 3), "voice": ["vivian", "dylan"][i % 2], "seed": 100 + i, "max_new_tokens": 12 + i, "top_p": 0.9}
                for i in range(8)]
    prepared = [pre.prepare(r) for r in requests]
    alone = [engine.collect(p, Ctx()) for p in prepared]
    together = _batch(engine, prepared)
    assert engine.scheduler.peak_batch == 8
    for a, b in zip(alone, together):
        assert torch.equal(a, b)
    other = engine.collect(pre.prepare({**requests[0], "seed": 7}), Ctx())
    assert not torch.equal(other, alone[0])


def test_streaming_vocoder_emits_the_audio_of_every_frame(checkpoints, built):
    pre, engine = built["custom_voice"]
    sent: list = []

    class Emit(Ctx):
        def emit(self, chunk):
            sent.append(chunk)

    for seed in range(50):  # random weights: find a seed whose utterance outlasts the first two chunks
        sent.clear()
        frames = engine.stream(pre.prepare({"text": "hello", "voice": "vivian", "seed": seed, "max_new_tokens": 30}), Emit())
        if frames > 16:
            break
    assert frames > 16
    vocoder = stages.build_vocoder(model_path=str(checkpoints["custom_voice"]))
    audio = []

    class Sink(Ctx):
        upstream_payload = None

        def emit(self, chunk):
            audio.append(chunk["audio"])

    vocoder._stream(iter(sent), Sink())
    sizes = [c["codes"].shape[1] for c in sent]
    assert len(sizes) > 1 and sum(sizes) == frames  # chunk sizes follow the playback clock (timing), the frames do not
    assert sum(a.shape[-1] for a in audio) == frames * 1920
    # on the CPU the deadline vocoder takes a decode turn per chunk by playback deadline; fifo decodes at once; same audio
    assert vocoder.gate is not None and len(vocoder.gate.granted) == len(sent)
    deadline_audio, audio[:] = list(audio), []
    fifo = stages.build_vocoder(model_path=str(checkpoints["custom_voice"]), scheduler="fifo")
    assert fifo.gate is None
    fifo._stream(iter(sent), Sink())
    assert all(torch.equal(a, b) for a, b in zip(deadline_audio, audio, strict=True))


def test_every_published_id_resolves_to_the_pipeline_with_the_spec_contract():
    from importlib.metadata import entry_points

    from omni_config import load_model
    from omni_models.qwen3_tts_12hz.config import MODEL_IDS, Qwen3TTS12HzConfig

    models = {ep.name: ep.value for ep in entry_points(group="omni.models")}
    checks = {ep.name: ep.value for ep in entry_points(group="omni.checkpoints")}
    edges = [(e.src, e.dst) for e in Qwen3TTS12HzConfig().process_local_edges()]
    assert edges == [("preprocessing", "tts_engine")]
    for model_id in MODEL_IDS:
        assert models[model_id] == "omni_models.qwen3_tts_12hz:pipeline"
        assert checks[model_id] == "omni_models.qwen3_tts_12hz:resolve_checkpoint"
    published = load_model("Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign")  # the id as published, mixed case
    assert [s.name for s in published.stages] == ["preprocessing", "tts_engine", "vocoder"]
    engine = next(s for s in published.stages if s.name == "tts_engine")
    assert list(engine.stream_to) == ["vocoder"]


def test_omni_synthesize_serves_the_checkpoint_end_to_end(checkpoints, tmp_path):
    """The user's path: the CLI resolves and verifies the checkpoint, starts the pipeline's worker process,
    streams the engine's chunks through the vocoder and writes the audio. The old id ``qwen/qwen3-tts``
    (random weights of the real shape without --weights) given the published checkpoint serves the same."""
    audio_of = {}
    for model in (MODEL_ID, "qwen/qwen3-tts"):
        out = tmp_path / f"{model.replace('/', '_')}.wav"
        result = subprocess.run(
            [sys.executable, "-m", "omni_runtime.cli", "synthesize", "hello there", "-o", str(out), "--model", model, "--weights",
             str(checkpoints["custom_voice"]), "--device", "cpu", "--voice", "dylan", "--language", "chinese", "--seed", "3", "--max-new-tokens", "20"],
            capture_output=True, text=True, timeout=300,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        with wave.open(str(out)) as audio:
            assert audio.getframerate() == 24000
            frames = audio.getnframes()
        assert frames > 0 and frames % 1920 == 0 and frames <= 19 * 1920
        audio_of[model] = out.read_bytes()
    assert audio_of["qwen/qwen3-tts"] == audio_of[MODEL_ID]
