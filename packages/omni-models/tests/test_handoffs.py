"""Each model's handoff exactly as the spec says: process-local state where declared (and a
loud, edge-naming failure when it is missing), complete payloads everywhere else."""

import importlib
import json
import subprocess
import sys
import textwrap

import pytest
import torch
from helpers import FakeCtx, StagePayload, build_stages, synthesize

from omni_models.common.queue import HandoffError

EDGE_MESSAGE = "the handoff preprocessing -> tts_engine is process-local; keep both stages in one process"


@pytest.fixture(scope="module")
def stages():
    cache = {}

    def get(folder):
        if folder not in cache:
            cache[folder] = build_stages(folder)
        return cache[folder]

    return get


@pytest.mark.parametrize("folder", ["qwen3_tts", "fun_cosyvoice3", "moss_tts_local", "moss_tts_delay"])
def test_engine_without_prepared_state_fails_naming_the_edge(folder, stages):
    engine = stages(folder)["tts_engine"]
    with pytest.raises(HandoffError) as info:
        engine.process(StagePayload("never-prepared", {"text": "hello"}), FakeCtx("never-prepared", "tts_engine"))
    message = str(info.value)
    assert message.startswith(f"{folder}: no prepared request for never-prepared")
    assert EDGE_MESSAGE in message


@pytest.mark.parametrize("folder", ["qwen3_tts", "fun_cosyvoice3"])
def test_engine_builder_refuses_to_build_without_the_preprocessing_context(folder, monkeypatch):
    module = importlib.import_module(f"omni_models.{folder}.stages")
    monkeypatch.setattr(module, "_PREPROCESSING_CONTEXT", {})  # this process never built preprocessing
    with pytest.raises(HandoffError, match=f"{folder}: no preprocessing context in this process.*{EDGE_MESSAGE}"):
        module.build_tts_engine()


@pytest.mark.parametrize("folder", ["qwen3_tts", "fun_cosyvoice3"])
def test_prepared_requests_are_consumed_once_and_not_rebuilt(folder, stages):
    built = stages(folder)
    payload = StagePayload("once", {"text": "hello there"})
    out = built["preprocessing"].process(payload, FakeCtx("once", "preprocessing"))
    handoff = importlib.import_module(f"omni_models.{folder}.handoff")
    assert "once" in handoff._PREPARED_REQUESTS
    assert "input_ids" not in out.data, "the prepared request is not duplicated into the payload"
    built["tts_engine"].process(out, FakeCtx("once", "tts_engine"))
    assert "once" not in handoff._PREPARED_REQUESTS
    with pytest.raises(HandoffError, match="no prepared request for once"):
        built["tts_engine"].process(out, FakeCtx("once", "tts_engine"))
    with pytest.raises(HandoffError, match="already prepared"):
        built["preprocessing"].process(StagePayload("twice", {"text": "a"}), None)
        built["preprocessing"].process(StagePayload("twice", {"text": "a"}), None)
    handoff._PREPARED_REQUESTS.pop("twice", None)


@pytest.mark.parametrize("folder", ["moss_tts_local", "moss_tts_delay"])
def test_moss_preprocessing_failure_aborts_its_queue_slot(folder, stages):
    handoff = importlib.import_module(f"omni_models.{folder}.handoff")
    pre = stages(folder)["preprocessing"]
    with pytest.raises(ValueError, match="unknown voice"):
        pre.process(StagePayload("bad", {"text": "hi", "voice": "nobody"}), None)
    assert "bad" not in handoff.PREPARED_QUEUE
    with pytest.raises(HandoffError, match="cannot publish request bad: it was aborted"):
        handoff.PREPARED_QUEUE.publish("bad", object())
    with pytest.raises(HandoffError, match="no prepared request for bad \\(it was aborted\\)"):
        stages(folder)["tts_engine"].process(StagePayload("bad", {}), FakeCtx("bad", "tts_engine"))


def test_forbidden_split_fails_loudly_in_a_separate_process():
    """What a split of preprocessing -> tts_engine would do: a process that builds only the engine."""
    script = textwrap.dedent(
        """
        import torch
        from omni_models.moss_tts_delay import stages as moss
        from omni_models.qwen3_tts import stages as qwen
        from omni_models.common.queue import HandoffError
        try:
            qwen.build_tts_engine()
        except HandoffError as exc:
            print("QWEN:", exc)
        engine = moss.build_tts_engine()
        from dataclasses import dataclass
        @dataclass
        class P:
            request_id: str
            data: dict
        try:
            engine.process(P("r1", {"text": "hi"}), None)
        except HandoffError as exc:
            print("MOSS:", exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(": ", 1) for line in out.stdout.strip().splitlines())
    assert lines["QWEN"].startswith("qwen3_tts: no preprocessing context in this process") and EDGE_MESSAGE in lines["QWEN"]
    assert lines["MOSS"].startswith("moss_tts_delay: no prepared request for r1") and EDGE_MESSAGE in lines["MOSS"]


def test_voxtral_payload_carries_input_ids_voice_and_limits_as_plain_values(stages):
    built = stages("voxtral_tts")
    out = built["preprocessing"].process(StagePayload("v1", {"text": "Hello 2 you", "voice": "echo", "speed": 1.0}), None)
    data = out.data
    assert data["voice"] == "echo"
    assert data["input_ids"][0] == 1 and data["input_ids"][-1] == 2
    assert set(data["generation_limits"]) == {"min_new_tokens", "max_new_tokens"}
    # plain JSON-able values only: nothing hides in process memory
    restored = json.loads(json.dumps(data))
    ctx = FakeCtx("v1", "tts_generation")
    gen = built["tts_generation"].process(StagePayload("v1", restored), ctx)
    limits = restored["generation_limits"]
    assert limits["min_new_tokens"] <= gen.data["codes"].shape[1] <= limits["max_new_tokens"]
    direct = built["tts_generation"].process(out, FakeCtx("v1", "tts_generation"))
    assert torch.equal(direct.data["codes"], gen.data["codes"])
    with pytest.raises(RuntimeError, match="voxtral_tts: stage tts_generation needs payload field 'generation_limits'"):
        built["tts_generation"].process(StagePayload("v1", {k: v for k, v in restored.items() if k != "generation_limits"}), ctx)


def test_ming_reference_encode_sends_spk_emb_and_prompt_latent_as_tensors(stages):
    built = stages("ming_omni_tts")
    ref = 0.2 * torch.randn(44100, generator=torch.Generator().manual_seed(0))
    out = built["preprocessing"].process(StagePayload("m1", {"text": "Hi", "ref_audio": ref, "ref_sample_rate": 44100}), None)
    assert isinstance(out.data["ref_wave"], torch.Tensor)
    enc = built["reference_encode"].process(out, None)
    assert "ref_wave" not in enc.data
    spk, latent = enc.data["spk_emb"], enc.data["prompt_latent"]
    assert spk.dtype == torch.float32 and spk.shape == (64,) and spk.is_contiguous()
    assert latent.dtype == torch.float32 and latent.shape == (32, 25) and latent.is_contiguous()
    # a copy of the tensors (what crosses a process) drives the engine to the same latents
    copied = StagePayload("m1", {**enc.data, "spk_emb": spk.clone(), "prompt_latent": latent.clone()})
    a, b = FakeCtx("m1", "tts_engine"), FakeCtx("m1", "tts_engine")
    built["tts_engine"].process(enc, a)
    built["tts_engine"].process(copied, b)
    assert torch.equal(torch.cat([c["latents"] for c in a.emitted], 1), torch.cat([c["latents"] for c in b.emitted], 1))
    with pytest.raises(ValueError, match="spk_emb must be a float tensor of shape \\(64,\\)"):
        built["tts_engine"].process(StagePayload("m1", {**enc.data, "spk_emb": torch.zeros(3)}), a)


@pytest.mark.parametrize("folder,encoder", [("audar_tts", "reference_encoder"), ("zonos2", "speaker_encode")])
def test_audar_and_zonos2_carry_the_speaker_embedding_in_the_payload(folder, encoder, stages):
    result = synthesize(folder, {"text": "Hello", "voice": "sage"}, stages=stages(folder))
    emb = result.trace[encoder].data["speaker_embedding"]
    assert emb.shape == (64,) and torch.isclose(emb.norm(), torch.tensor(1.0), atol=1e-4)
    assert "ref_wave" not in result.trace[encoder].data


def test_higgs_carries_the_reference_waveform_then_codes(stages):
    built = stages("higgs_tts")
    ref = 0.2 * torch.randn(48000, generator=torch.Generator().manual_seed(1))
    pre = built["preprocessing"].process(StagePayload("h1", {"text": "Hi", "ref_audio": ref, "ref_sample_rate": 48000}), None)
    assert pre.data["ref_wave"].shape == (24000,)  # resampled to 24 kHz
    enc = built["audio_encoder"].process(pre, None)
    assert enc.data["ref_codes"].shape == (8, 25) and enc.data["ref_codes"].dtype == torch.int64


def test_moss_split_codec_placement():
    from omni_models.common.spec import VocoderKnobs

    def codec_placement(device, codec_device):
        return VocoderKnobs(codec_device=codec_device).codec_placement("moss_tts_local", device)

    assert codec_placement("cpu", "cuda:1") == "cpu"
    assert codec_placement(None, "cuda:1") == "cpu"
    assert codec_placement("cuda:0", None) == "cuda:0"
    if torch.cuda.device_count() < 2:
        with pytest.raises(ValueError, match="codec_device 'cuda:1' does not exist"):
            codec_placement("cuda:0", "cuda:1")
    else:
        assert codec_placement("cuda:0", "cuda:1") == "cuda:1"


@pytest.mark.parametrize("folder", ["qwen3_tts", "fun_cosyvoice3"])
def test_stale_prepared_requests_are_dropped(folder, stages, monkeypatch):
    handoff = importlib.import_module(f"omni_models.{folder}.handoff")
    pre = stages(folder)["preprocessing"]
    pre.process(StagePayload("stale", {"text": "a"}), None)
    monkeypatch.setattr(importlib.import_module("omni_models.common.prepared"), "PREPARED_TTL_S", -1.0)
    pre.process(StagePayload("fresh", {"text": "b"}), None)
    assert "stale" not in handoff._PREPARED_REQUESTS
    handoff._PREPARED_REQUESTS.pop("fresh", None)
