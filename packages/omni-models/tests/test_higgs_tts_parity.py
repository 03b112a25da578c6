"""Parity of omni's real Higgs-TTS path with the reference implementations (``nox -s parity``).

A tiny random checkpoint is written in the published layout with transformers' own classes
(``Qwen3Model`` for the backbone, ``HiggsAudioV2TokenizerModel`` for the codec). Then:

- the codec: omni's encoder gives the reference's codes, omni's decoder the reference's
  waveform (non-streamed, exactly as the reference decodes); streamed with the decoder's
  receptive field as left context and held-back right context it stays within float error of
  it, chunk boundaries included (the published vocoder's 8 / 4 frames are measured too);
- generation: omni's engine (its continuous batch, through the stage objects) gives the same
  greedy codes as the reference loop (``higgs_reference.reference_generate``) for each request
  alone and for the same 8 mixed requests decoded in one batch (zero-shot, voice cloning with
  and without a transcript, different texts and limits); the first row's logits agree within
  1e-4.

The table printed at the end (``-s``) is the parity table of the report. Needs transformers >= 5
(the tokenizer's reference classes) and torchaudio's pure-Python resampling: the session's venv
only; elsewhere the module is skipped unless ``OMNI_REQUIRE_PARITY=1``.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

if os.environ.get("OMNI_REQUIRE_PARITY") != "1":
    pytest.importorskip("transformers.models.higgs_audio_v2_tokenizer", reason="the parity session's venv has transformers >= 5")

from higgs_checkpoint import AUDIO_VOCAB, NUM_CODEBOOKS, write_checkpoint
from higgs_reference import Collect, Payload, omni_batch_codes, reference_generate

from omni_models.common.limits import GenerationLimits
from omni_models.higgs_tts_real import stages

TABLE: list[tuple[str, str, int, str, str]] = []
CASES = [
    {"text": "hello there, how are you today?", "max_new_tokens": 40},
    {"text": "speech synthesis from text", "max_new_tokens": 24, "ref": 1.0},
    {"text": "the quick brown fox jumps over the lazy dog", "max_new_tokens": 48, "ref": 1.6, "ref_text": "a reference voice is cloned"},
    {"text": "omni", "max_new_tokens": 12},
    {"text": "numbers like 42 and 7 are read aloud", "max_new_tokens": 32, "ref": 0.6},
    {"text": "a reference voice is cloned, again and again", "max_new_tokens": 56, "ref": 2.0, "ref_text": "hello there"},
    {"text": "quick", "max_new_tokens": 20, "ref": 1.2, "ref_text": "speech"},
    {"text": "omni serves real checkpoints today", "max_new_tokens": 36},
]


def _wave(seconds: float, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    t = torch.arange(int(24000 * seconds)) / 24000
    return (0.3 * torch.sin(2 * torch.pi * (180 + 40 * seed) * t) + 0.05 * torch.randn(t.shape, generator=gen)).float()


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    written = write_checkpoint(tmp_path_factory.mktemp("higgs"), reference=True, shards=2, eoc_boost=1.35)
    path = str(written.root)
    pre = stages.build_preprocessing(model_path=path)
    encoder = stages.build_audio_encoder(model_path=path, device="cpu")
    engine = stages.build_tts_engine(model_path=path, device="cpu", temperature=0.0, chunk_frames=5, first_chunk_frames=2, max_seq_len=512)
    vocoder = stages.build_vocoder(model_path=path, device="cpu")
    return written, pre, encoder, engine, vocoder


def _prepare(pre, encoder, case: dict, seed: int) -> dict:
    data = {"text": case["text"], "max_new_tokens": case["max_new_tokens"], "temperature": 0.0}
    if "ref" in case:
        data.update(ref_audio=_wave(case["ref"], seed), ref_sample_rate=24000)
    if "ref_text" in case:
        data["ref_text"] = case["ref_text"]
    return encoder.process(pre.process(Payload(data))).data


def _reference(written, data: dict) -> tuple[torch.Tensor, torch.Tensor]:
    ids = stages.prompt_ids(data, data["ref_codes"])
    return reference_generate(written.reference_backbone, written.audio_embedding, ids, data["ref_codes"], n=NUM_CODEBOOKS, vocab=AUDIO_VOCAB, max_rows=data["limits"]["max_new_tokens"])


def test_codec_encode_and_decode_match_the_reference(model):
    written, _, encoder, _, _ = model
    ref = written.reference_codec
    equal = cases = 0
    worst = 0.0
    for i, seconds in enumerate((0.6, 1.0, 1.6, 2.4)):
        wave = torch.nn.functional.pad(_wave(seconds, i), (0, max(0, 24000 - int(24000 * seconds))))
        with torch.inference_mode():
            ours = encoder.codec.encode(wave)
            theirs = ref.encode(wave.view(1, 1, -1)).audio_codes[0]
            audio = encoder.codec.decode(theirs)[0]
            expected = ref.decode(theirs[None]).audio_values[0, 0]
        cases += 1
        equal += int(torch.equal(ours, theirs))
        worst = max(worst, float((audio - expected).abs().max()))
    TABLE.append(("higgs-tts (codec)", "encode (reference audio -> codes), decode (codes -> 24 kHz)", cases, f"{equal}/{cases}", f"{worst:.2e}"))
    assert equal == cases
    assert worst < 1e-4


def _stream(vocoder, codes: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    ctx = Collect(upstream_payload=Payload({}))
    chunks, start = [], 0
    for size in sizes:
        if start >= codes.shape[1]:
            break
        chunks.append({"codes": codes[:, start : start + size], "start_frame": start})
        start += size
    vocoder.consume(chunks, ctx)
    return torch.cat([c["audio"] for c in ctx.chunks])


def test_generation_matches_the_reference_alone_and_in_a_batch_of_8(model):
    written, pre, encoder, engine, vocoder = model
    prepared = [_prepare(pre, encoder, case, seed) for seed, case in enumerate(CASES)]
    expected, worst_logits = [], 0.0
    for data in prepared:
        codes, first = _reference(written, data)
        expected.append(codes)
        prompt = engine.batch.prompt(stages.prompt_ids(data, data["ref_codes"]), data["ref_codes"])
        hidden = engine.batch.model.run(prompt, torch.arange(prompt.shape[1]), _NoCacheAttend().attend, invariant=False)[0, -1]
        worst_logits = max(worst_logits, float((engine.batch.model.audio_logits(hidden[None])[0] - first).abs().max()))
    alone = []
    for data in prepared:
        ctx = Collect()
        engine.process(Payload(data), ctx)
        alone.append(torch.cat([c["codes"] for c in ctx.chunks], dim=1) if ctx.chunks else torch.zeros(NUM_CODEBOOKS, 0, dtype=torch.long))
    before = engine.scheduler.peak_batch
    prompts = [engine.batch.prompt(stages.prompt_ids(d, d["ref_codes"]), d["ref_codes"]) for d in prepared]
    batched = omni_batch_codes(engine, prompts, [GenerationLimits.from_dict(d["limits"]) for d in prepared])
    assert engine.scheduler.peak_batch == 8 > before
    clones = sum("ref" in c for c in CASES)
    equal_alone = sum(torch.equal(a, e) for a, e in zip(alone, expected))
    equal_batch = sum(torch.equal(b, e) for b, e in zip(batched, expected))
    lengths = sorted({e.shape[1] for e in expected})
    by_eoc = sum(e.shape[1] < c["max_new_tokens"] - (NUM_CODEBOOKS - 1) for e, c in zip(expected, CASES))
    assert 0 < by_eoc < len(CASES), "the cases must end both by EOC (and its wind-down) and by max_new_tokens"
    # the waveform of every request's codes: non-streamed, and streamed in chunks of 2, 5, 5, ... with
    # omni's default context (the decoder's receptive field on both sides) and with the published
    # vocoder's 8 frames of overlap and 4 held back, against the reference decoder's full decode
    full_err = peak = 0.0
    streamed_err = {"exact": 0.0, "8/4": 0.0, "8/0": 0.0}
    vocoders = {"exact": vocoder, "8/4": stages.build_vocoder(model_path=str(written.root), device="cpu", context_frames=8, lookahead_frames=4),
                "8/0": stages.build_vocoder(model_path=str(written.root), device="cpu", context_frames=8, lookahead_frames=0)}
    for codes in expected:
        with torch.inference_mode():
            reference_audio = written.reference_codec.decode(codes.clamp(max=31)[None]).audio_values[0, 0]
            full = vocoder.decoder.codec.decode(codes)[0]
        full_err = max(full_err, float((full - reference_audio).abs().max()))
        peak = max(peak, float(reference_audio.abs().max()))
        for name, voc in vocoders.items():
            streamed = _stream(voc, codes, [2] + [5] * codes.shape[1])
            assert streamed.shape == reference_audio.shape
            streamed_err[name] = max(streamed_err[name], float((streamed - reference_audio).abs().max()))
    frames = "/".join(str(n) for n in lengths)
    TABLE.append(("higgs-tts", f"greedy codes alone ({len(CASES) - clones} zero-shot, {clones} voice clones; {by_eoc} end by EOC; frames {frames})", len(CASES), f"{equal_alone}/{len(CASES)}", f"{full_err:.2e} (full decode)"))
    TABLE.append(("higgs-tts", "greedy codes in one batch of 8 mixed requests", len(CASES), f"{equal_batch}/{len(CASES)}",
                  f"streamed, chunks 2, 5, 5, ...: {streamed_err['exact']:.1e} with omni's default context (receptive field, both sides); "
                  f"{streamed_err['8/4']:.1e} with 8 left / 4 held back; {streamed_err['8/0']:.1e} with 8 left / none (signal peak {peak:.1e})"))
    TABLE.append(("higgs-tts (backbone)", "first-row audio logits vs transformers Qwen3Model + fused head", len(CASES), "max |diff|", f"{worst_logits:.2e}"))
    assert worst_logits < 1e-4
    assert equal_alone == len(CASES)
    assert equal_batch == len(CASES)
    assert full_err < 1e-4
    assert streamed_err["exact"] < 1e-4 * peak  # streamed equals the full decode up to float error, chunk edges included


class _NoCacheAttend:
    def attend(self, layer, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def teardown_module(module):
    if TABLE:
        lines = ["", "| model | part | cases | codes equal | waveform max error |", "|---|---|---|---|---|"]
        lines += [f"| {m} | {p} | {c} | {e} | {w} |" for m, p, c, e, w in TABLE]
        sys.stdout.write("\n".join(lines) + "\n")


def test_the_published_shapes_give_the_reference_parameter_trees():
    """At the published sizes (Qwen3 body of 36 layers, width 2560, 32/8 heads of 128, MLP 9728,
    vocabulary 151936, 8 x 1026 audio rows; the published tokenizer configuration), omni's modules
    have exactly the reference classes' parameter names and shapes (built on the meta device)."""
    from transformers import HiggsAudioV2TokenizerConfig, HiggsAudioV2TokenizerModel, Qwen3Config, Qwen3Model

    from omni_models.higgs_tts_real.backbone import HiggsBackbone
    from omni_models.higgs_tts_real.checkpoint import PUBLISHED_CODEC_CONFIG, AudioShape, BackboneShape
    from omni_models.higgs_tts_real.codec import CodecShape, HiggsCodec

    text = {"hidden_size": 2560, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
            "intermediate_size": 9728, "vocab_size": 151936}
    with torch.device("meta"):
        reference = Qwen3Model(Qwen3Config(**text)).state_dict()
        ours = HiggsBackbone(BackboneShape(2560, 36, 32, 8, 128, 9728, 151936, 1e-6, 1e6, 40960), AudioShape(8, 1026, True)).state_dict()
        codec_reference = HiggsAudioV2TokenizerModel(HiggsAudioV2TokenizerConfig(**PUBLISHED_CODEC_CONFIG)).state_dict()
        codec_ours = HiggsCodec(CodecShape.from_config(PUBLISHED_CODEC_CONFIG), PUBLISHED_CODEC_CONFIG["semantic_model_config"]).state_dict()
    ours = {("embed_tokens.weight" if k == "text_embedding.weight" else k): v for k, v in ours.items()}
    assert tuple(ours.pop("audio_embedding.weight").shape) == (8 * 1026, 2560)
    assert {k: tuple(v.shape) for k, v in ours.items()} == {k: tuple(v.shape) for k, v in reference.items()}
    # the reference's decoder_semantic / fc1 are training-only (never used to encode or decode); its
    # codebook EMA statistics are buffers omni does not read
    unused = ("decoder_semantic.", "fc1.", "semantic_model.masked_spec_embed")
    skipped = (".inited", ".cluster_size", ".embed_avg")
    codec_reference = {k: tuple(v.shape) for k, v in codec_reference.items() if not k.startswith(unused) and not k.endswith(skipped)}
    # weight norm: the reference keeps g and v (original0 / original1); omni folds them into one weight of v's shape
    codec_reference = {k.replace(".parametrizations.weight.original1", ".weight"): v for k, v in codec_reference.items() if not k.endswith("original0")}
    assert {k: tuple(v.shape) for k, v in codec_ours.items()} == codec_reference
    assert CodecShape.from_config(PUBLISHED_CODEC_CONFIG).num_quantizers == HiggsAudioV2TokenizerConfig(**PUBLISHED_CODEC_CONFIG).num_quantizers == 8


def test_resampling_matches_torchaudio():
    """The semantic model's input: omni's windowed-sinc resampler against torchaudio's (24 -> 16 kHz and
    the reference-audio rates a client may send)."""
    import torchaudio.functional as AF

    from omni_models.higgs_tts_real.resample import resample

    wave = torch.randn(2, 12345, generator=torch.Generator().manual_seed(5))  # unit variance, peak about 4
    errors = {}
    for source, target in ((24000, 16000), (16000, 24000), (44100, 24000), (48000, 24000), (22050, 24000)):
        ours, theirs = resample(wave, source, target), AF.resample(wave, source, target)
        assert ours.shape == theirs.shape
        errors[(source, target)] = float((ours - theirs).abs().max())
    client = max(v for k, v in errors.items() if k != (24000, 16000))
    TABLE.append(("higgs-tts (resampling)", "vs torchaudio: 24 -> 16 kHz (the semantic model's input); client rates 16/22.05/44.1/48 -> 24 kHz", 5, "—",
                  f"{errors[(24000, 16000)]:.1e}; {client:.1e} (unit-variance noise)"))
    assert errors[(24000, 16000)] < 1e-6
    assert client < 1e-4  # float32 rounding of long kernels (22.05 and 44.1 kHz reduce to 147/160 and 147/80 phases)
