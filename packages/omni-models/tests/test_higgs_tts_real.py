"""The real Higgs-TTS path (``omni_models.higgs_tts_real``) on tiny checkpoints in the published
layout, written from omni's own modules (no transformers here; ``test_higgs_tts_parity`` proves
the same path against the reference classes).

A user relies on: ``--weights DIR`` in the published layout loads (one file or shards with an
index) and a broken directory is one error naming every file, key and fix; a request's codes do
not depend on the other requests in its batch, sampled or greedy; the vocoder's streamed and
batched decodes equal a full decode; ``omni synthesize --model bosonai/higgs-tts-3-4b-hf
--weights DIR`` (or the spec's id ``bosonai/higgs-tts-3-4b`` with that directory) writes audio
through the spec's topology, and a broken directory is refused before any process starts.
"""

from __future__ import annotations

import json
import shutil
import wave
from pathlib import Path

import pytest
import torch
from e2e_support import omni
from higgs_checkpoint import NUM_CODEBOOKS, write_checkpoint
from higgs_reference import Collect, Payload

from omni_models.common.limits import GenerationLimits
from omni_models.common.sampling import SamplingParams, generator_for
from omni_models.common.weights import CheckpointError
from omni_models.higgs_tts_real import stages
from omni_models.higgs_tts_real.checkpoint import PUBLISHED_CODEC_CONFIG, HiggsCheckpoint
from omni_models.higgs_tts_real.engine import HiggsSamplingParams
from omni_models.higgs_tts_real.loading import load_backbone, load_higgs_codec

pytestmark = pytest.mark.timeout(300)
TEXTS = ["hello there", "speech synthesis from text", "omni", "numbers like 42", "a reference voice is cloned", "quick brown fox", "today", "real checkpoints"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return write_checkpoint(tmp_path_factory.mktemp("higgs") / "ckpt", reference=False, shards=3).root


def _copy(checkpoint: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(checkpoint, tmp_path / "broken"))


def test_a_broken_directory_is_one_error_naming_every_file_key_and_fix(checkpoint, tmp_path):
    broken = _copy(checkpoint, tmp_path)
    config = json.loads((broken / "config.json").read_text())
    config["audio_encoder_config"]["num_codebooks"] = 8
    (broken / "config.json").write_text(json.dumps(config))
    index = json.loads((broken / "model.safetensors.index.json").read_text())
    del index["weight_map"]["body.layers.1.mlp.up_proj.weight"]
    (broken / "model.safetensors.index.json").write_text(json.dumps(index))
    shard = sorted(broken.glob("model-*.safetensors"))[-1]
    shard.unlink()
    tokenizer = json.loads((broken / "tokenizer.json").read_text())
    tokenizer["added_tokens"] = [t for t in tokenizer["added_tokens"] if t["content"] != "<|audio|>"]
    (broken / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(CheckpointError) as caught:
        HiggsCheckpoint.open(broken)
    message = str(caught.value)
    for part in (
        f"{broken}/config.json: audio_encoder_config.num_codebooks", "8, but the audio tokenizer has 4 codebooks",
        "body.layers.1.mlp.up_proj.weight", f"{broken}/{shard.name}: (file)", "download every shard the index lists",
        "added_tokens[<|audio|>]",
    ):
        assert part in message
    assert message.count("fix:") >= 4


def test_a_config_that_does_not_fit_the_weights_names_the_key_and_shapes(checkpoint, tmp_path):
    broken = _copy(checkpoint, tmp_path)
    config = json.loads((broken / "config.json").read_text())
    config["text_config"]["intermediate_size"] = 128
    (broken / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"layers\.0\.mlp\.gate_proj\.weight: shape \(96, 64\), config\.json gives \(128, 64\)"):
        load_backbone(str(broken), "cpu")


def test_without_audio_tokenizer_config_the_published_tokenizer_configuration_applies(checkpoint, tmp_path):
    from omni_models.higgs_tts_real.codec import CodecShape, HiggsCodec, receptive_frames

    published = _copy(checkpoint, tmp_path)
    shutil.rmtree(published / "audio_tokenizer")
    with pytest.raises(CheckpointError, match="4, but the audio tokenizer has 8 codebooks"):  # the tiny checkpoint has 4
        HiggsCheckpoint.open(published)
    shape = CodecShape.from_config(PUBLISHED_CODEC_CONFIG)
    assert (shape.hop, shape.frame_rate, shape.num_quantizers, shape.semantic_downsample, shape.hidden) == (960, 25, 8, 2, 1024)
    with torch.device("meta"):
        assert receptive_frames(HiggsCodec(shape).acoustic_decoder) == 11


def test_without_weights_the_snapshot_in_the_hugging_face_cache_is_used(checkpoint, tmp_path, monkeypatch):
    from omni_models.higgs_tts_real.hf_cache import cached_snapshot

    repo = tmp_path / "hub" / "models--bosonai--higgs-tts-3-4b"
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    with pytest.raises(CheckpointError, match=f"no snapshot of bosonai/higgs-tts-3-4b under {repo}"):
        cached_snapshot()
    for revision in ("0123abc", "4567def"):
        shutil.copytree(checkpoint, repo / "snapshots" / revision)
    with pytest.raises(CheckpointError, match="several snapshots and no refs/main"):
        cached_snapshot()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("4567def")
    assert cached_snapshot() == repo / "snapshots" / "4567def"
    # what each stage factory does when the runtime passes no model_path (no --weights)
    pre = stages.build_preprocessing(model_path=None)
    engine = stages.build_tts_engine(model_path=None, device="cpu", max_seq_len=256)
    assert torch.equal(engine.batch.model.audio_embedding.weight, load_backbone(str(checkpoint), "cpu").audio_embedding.weight)
    assert pre.process(Payload({"text": "hello"})).data["zero_shot_ids"][0] == pre.tokenizer.tts
    engine.scheduler.close()


def test_single_file_and_sharded_checkpoints_load_the_same(checkpoint, tmp_path):
    single = write_checkpoint(tmp_path / "single", reference=False, shards=1).root
    a, b = load_backbone(str(single), "cpu"), load_backbone(str(checkpoint), "cpu")
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def _prompts(engine, pre, count: int) -> tuple[list[torch.Tensor], list[GenerationLimits]]:
    gen = torch.Generator().manual_seed(3)
    prompts, limits = [], []
    for i in range(count):
        data = pre.process(Payload({"text": TEXTS[i], "max_new_tokens": 10 + 3 * i, "ref_text": "a voice" if i % 3 == 2 else None})).data
        ref = torch.randint(0, 32, (NUM_CODEBOOKS, 5 + i), generator=gen) if i % 2 else None  # codes as the audio_encoder sends them
        prompts.append(engine.batch.prompt(stages.prompt_ids(data, ref), ref))
        limits.append(GenerationLimits.from_dict(data["limits"]))
    return prompts, limits


def _run(engine, prompts, limits, params, together: bool) -> list[torch.Tensor]:
    scheduler = engine.scheduler
    out = []
    if together:
        with scheduler._cond:  # every request waits before the first admission: one batch
            streams = [scheduler.submit(p, lim, params, generator_for(7, i)) for i, (p, lim) in enumerate(zip(prompts, limits))]
        out = [torch.stack(list(s), dim=1) for s in streams]
    else:
        for i, (p, lim) in enumerate(zip(prompts, limits)):
            out.append(torch.stack(list(scheduler.submit(p, lim, params, generator_for(7, i))), dim=1))
    return out


@pytest.mark.parametrize("params", [SamplingParams(0.0, 0), SamplingParams(0.9, 12), HiggsSamplingParams(0.9, 12, 0.7)], ids=["greedy", "sampled", "nucleus"])
def test_a_request_gets_the_same_codes_alone_and_in_a_batch_of_8(checkpoint, params):
    pre = stages.build_preprocessing(model_path=str(checkpoint))
    engine = stages.build_tts_engine(model_path=str(checkpoint), device="cpu", max_seq_len=512)
    prompts, limits = _prompts(engine, pre, 8)
    alone = _run(engine, prompts, limits, params, together=False)
    assert engine.scheduler.peak_batch == 1
    together = _run(engine, prompts, limits, params, together=True)
    assert engine.scheduler.peak_batch == 8
    assert len({a.shape[1] for a in alone}) >= 4  # mixed lengths: the batch shrinks while others run on
    for a, b in zip(alone, together):
        assert torch.equal(a, b)
    engine.scheduler.close()


def test_a_vanishing_nucleus_samples_the_most_likely_code_and_a_bad_top_p_is_the_clients_error(checkpoint):
    from omni_runtime.errors import InvalidRequest

    pre = stages.build_preprocessing(model_path=str(checkpoint))
    engine = stages.build_tts_engine(model_path=str(checkpoint), device="cpu", max_seq_len=512)
    prompts, limits = _prompts(engine, pre, 3)
    greedy = _run(engine, prompts, limits, SamplingParams(0.0, 0), together=True)
    vanishing = _run(engine, prompts, limits, HiggsSamplingParams(1.5, 0, 1e-6), together=True)  # hot, but a nucleus of one code
    assert len(vanishing) == len(greedy) and all(torch.equal(a, b) for a, b in zip(vanishing, greedy))
    hot = _run(engine, prompts, limits, HiggsSamplingParams(1.5, 0, 1.0), together=True)
    assert not all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(hot, greedy))
    engine.scheduler.close()
    with pytest.raises(InvalidRequest) as bad:
        pre.process(Payload({"text": "hi", "top_p": 1.5}))
    assert bad.value.param == "top_p"


def test_the_vocoder_streams_and_batches_what_a_full_decode_gives(checkpoint):
    vocoder = stages.build_vocoder(model_path=str(checkpoint), device="cpu", max_batch_size=8)
    codec = load_higgs_codec(str(checkpoint), "cpu", False)
    codes = torch.randint(0, 32, (3, NUM_CODEBOOKS, 23), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        batched = codec.decode(codes)
        for i in range(3):
            assert (codec.decode(codes[i]) - batched[i]).abs().max() < 1e-4 * batched[i].abs().max()  # float error of other conv blockings
    ctx = Collect(upstream_payload=Payload({}))
    sizes, start, chunks = [3, 7, 7, 7], 0, []
    for size in sizes:
        chunks.append({"codes": codes[0, :, start : start + size], "start_frame": start})
        start += size
    summary = vocoder.consume(chunks, ctx).data
    streamed = torch.cat([c["audio"] for c in ctx.chunks])
    assert summary["num_samples"] == streamed.shape[0] == 23 * codec.shape.hop
    assert (streamed - batched[0, 0]).abs().max() < 1e-4 * batched[0, 0].abs().max()  # exact context both sides: float error only


def test_the_pipeline_keeps_the_spec_contract():
    from omni_compiler import compile as compile_topology
    from omni_config import load_model

    config = load_model("bosonai/higgs-tts-3-4b-hf")
    assert config.name == "bosonai/higgs-tts-3-4b"
    assert [(s.name, s.process) for s in config.stages] == [
        ("preprocessing", "tts_frontend"), ("audio_encoder", "tts_frontend"), ("tts_engine", "pipeline"), ("vocoder", "vocoder")
    ]
    fractions = {s.name: s.runtime.resources.total_gpu_memory_fraction for s in config.stages if s.gpu is not None}
    assert fractions == {"audio_encoder": 0.03, "tts_engine": 0.85, "vocoder": 0.10}
    print([s.stream_to for s in config.stages])
    assert not config.process_local_edges
    compile_topology(config, num_gpus=1)


def test_omni_synthesize_runs_the_checkpoint_under_both_ids_and_refuses_a_broken_one_before_start(checkpoint, tmp_path, monkeypatch):
    """``--model bosonai/higgs-tts-3-4b --weights DIR`` (the spec's id) with the published layout runs
    the real pipeline: the same audio as ``-hf``. Without ``--weights``, or with omni's own export
    layout, that id keeps its random weights of the real shape (``test_e2e_weights``). A broken
    checkpoint is one error naming every file, key and fix, exit 1, before any process starts."""
    audio = {}
    for name, model in (("hf", "bosonai/higgs-tts-3-4b-hf"), ("spec", "bosonai/higgs-tts-3-4b")):
        result = omni("synthesize", "hello there", "-o", f"{name}.wav", "--model", model, "--device", "cpu", "--weights", str(checkpoint), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        with wave.open(str(tmp_path / f"{name}.wav")) as wav:
            assert wav.getframerate() == 24000 and wav.getnframes() > 0 and wav.getnframes() % 960 == 0
        audio[name] = (tmp_path / f"{name}.wav").read_bytes()
    assert audio["spec"] == audio["hf"]
    broken = _copy(checkpoint, tmp_path)
    (broken / "tokenizer.json").unlink()
    index = json.loads((broken / "model.safetensors.index.json").read_text())
    del index["weight_map"]["body.layers.1.mlp.up_proj.weight"]
    (broken / "model.safetensors.index.json").write_text(json.dumps(index))
    for model in ("bosonai/higgs-tts-3-4b-hf", "bosonai/higgs-tts-3-4b"):
        result = omni("synthesize", "hello", "-o", "x.wav", "--model", model, "--device", "cpu", "--weights", str(broken), cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        for part in (f"{broken}/tokenizer.json: (file)", "model.safetensors.index.json: body.layers.1.mlp.up_proj.weight", "download the complete checkpoint"):
            assert part in result.stderr
        assert result.stderr.count("error:") == 1 and result.stderr.count("fix:") == 2
        assert "Traceback" not in result.stderr and "processes ready" not in result.stderr
        assert not (tmp_path / "x.wav").exists()
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    result = omni("synthesize", "hello", "-o", "x.wav", "--model", "bosonai/higgs-tts-3-4b-hf", "--device", "cpu", cwd=tmp_path)
    assert result.returncode == 1 and "no --weights given and the Hugging Face cache has no snapshot of bosonai/higgs-tts-3-4b" in result.stderr
    assert "Traceback" not in result.stderr and "processes ready" not in result.stderr


def _wav_bytes(seconds: float, rate: int = 16000) -> bytes:
    import io

    t = torch.arange(int(rate * seconds)) / rate
    samples = (0.3 * torch.sin(2 * torch.pi * 220 * t) * 32767).to(torch.int16)
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(samples.numpy().tobytes())
    return buffer.getvalue()


def test_voice_cloning_and_client_errors_through_the_runtime(checkpoint):
    """Real processes (tts_frontend, pipeline, vocoder): a 16 kHz WAV reference with its transcript is
    encoded by the audio_encoder and conditions generation; an explicit max_new_tokens beyond the
    context is the client's error naming the field."""
    from omni_config import load_model
    from omni_runtime import RequestFailed, Runtime

    config = load_model("bosonai/higgs-tts-3-4b-hf", ["--stages.tts_engine.factory_args.max_seq_len=256"])
    with Runtime.running(config, device="cpu", model_path=str(checkpoint)) as rt:
        base = {"text": "hello there", "temperature": 0.0, "max_new_tokens": 20}
        zero_shot = rt.synthesize(base)
        cloned = rt.synthesize({**base, "ref_audio": _wav_bytes(1.5), "ref_text": "a reference voice"})
        for result in (zero_shot, cloned):
            assert result["sample_rate"] == 24000 and result["audio"].shape[-1] == result["num_frames"] * 960 > 0
        assert not torch.equal(zero_shot["audio"][: 960 * 4], cloned["audio"][: 960 * 4])  # the reference conditions the codes
        with pytest.raises(RequestFailed) as failed:
            rt.synthesize({**base, "max_new_tokens": 400})
        assert failed.value.kind == "invalid_request" and failed.value.param == "max_new_tokens"
