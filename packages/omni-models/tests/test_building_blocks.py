import torch

from omni_models.common.ar import ARConfig, ARModel
from omni_models.common.batch import generate_frames
from omni_models.common.codec import CodecDecoder, StreamingDecode, upsample_factors
from omni_models.common.delay import DelayAligner, apply_delay, revert_delay
from omni_models.common.flow import FlowEstimator, NoiseStream
from omni_models.common.limits import GenerationLimits
from omni_models.common.sampling import SamplingParams, generator_for, sample
from omni_models.common.transformer import Decoder, TransformerConfig
from omni_models.common.weights import init_dummy


def test_kv_cache_decoding_equals_full_causal_forward():
    decoder = init_dummy(Decoder(TransformerConfig(dim=32, layers=2, heads=4, max_seq_len=64)), 1)
    x = torch.randn(1, 12, 32)
    full = decoder(x)
    cache = decoder.new_cache()
    parts = [decoder(x[:, :5], cache)] + [decoder(x[:, i : i + 1], cache) for i in range(5, 12)]
    assert cache.length == 12
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-4)


def test_sequence_longer_than_the_cache_is_a_clear_error():
    decoder = Decoder(TransformerConfig(dim=32, layers=1, heads=4, max_seq_len=8))
    cache = decoder.new_cache()
    decoder(torch.randn(1, 8, 32), cache)
    try:
        decoder(torch.randn(1, 1, 32), cache)
    except ValueError as exc:
        assert "exceeds the model's max_seq_len 8" in str(exc)
    else:
        raise AssertionError("no error")


def test_delay_pattern_round_trip_and_streaming_alignment():
    codes = torch.randint(0, 100, (4, 7))
    steps = apply_delay(codes, bos=101, pad=102)
    assert steps.shape == (4, 10)
    assert steps[3, :3].eq(101).all() and steps[0, 7:].eq(102).all()
    torch.testing.assert_close(revert_delay(steps), codes)
    aligner = DelayAligner(4)
    frames = [f for f in (aligner.push(steps[:, s]) for s in range(steps.shape[1])) if f is not None]
    torch.testing.assert_close(torch.stack(frames, dim=1), codes)


def _frames(layout: str, k: int, limits: GenerationLimits, seed: int = 0) -> torch.Tensor:
    cfg = ARConfig(num_codebooks=k, codebook_size=50, layout=layout, dim=32, layers=1, max_seq_len=256, cond_dim=8, depth_dim=16)
    model = init_dummy(ARModel(cfg), 3).eval()
    prompt = model.prompt([1, 40, 41, 2], torch.randn(8, generator=torch.Generator().manual_seed(1)))
    frames = list(generate_frames(model, prompt, limits, SamplingParams(), generator_for(seed)))
    return torch.stack(frames, dim=1)


def test_each_layout_generates_k_codebooks_within_limits_deterministically():
    for layout in ("parallel", "delay", "depth"):
        limits = GenerationLimits(10, 20)
        codes = _frames(layout, 5, limits)
        assert codes.shape[0] == 5 and 10 <= codes.shape[1] <= 20, layout
        assert codes.dtype == torch.int64 and codes.min() >= 0 and codes.max() < 50, layout
        torch.testing.assert_close(codes, _frames(layout, 5, limits))
        assert not torch.equal(codes[:, :10], _frames(layout, 5, limits, seed=1)[:, :10]), layout


def test_delay_layout_reaches_max_and_stops_exactly():
    codes = _frames("delay", 4, GenerationLimits(30, 30))
    assert codes.shape == (4, 30)


def test_generation_stops_when_cancelled():
    cfg = ARConfig(num_codebooks=2, codebook_size=50, dim=32, layers=1, max_seq_len=256, cond_dim=8)
    model = init_dummy(ARModel(cfg), 3).eval()
    calls = []

    def cancelled():
        calls.append(1)
        return len(calls) > 3

    frames = list(generate_frames(model, model.prompt([1, 2], None), GenerationLimits(50, 100), SamplingParams(), generator_for(0), cancelled))
    assert len(frames) == 3


def test_top_k_sampling_never_leaves_the_top_k():
    logits = torch.arange(100, dtype=torch.float32)
    gen = generator_for(5)
    picks = {int(sample(logits, SamplingParams(temperature=1.0, top_k=3), gen)) for _ in range(200)}
    assert picks <= {97, 98, 99} and len(picks) > 1
    assert int(sample(logits, SamplingParams(temperature=0.0), gen)) == 99


def test_upsample_factors_multiply_to_the_hop():
    for hop in (480, 512, 960, 1764, 1920, 2048, 3840, 882):
        factors = upsample_factors(hop)
        assert 1 <= len(factors) <= 4
        prod = 1
        for f in factors:
            prod *= f
        assert prod == hop


def test_streaming_decode_equals_full_decode_for_any_chunking():
    decoder = init_dummy(CodecDecoder(16, 960, 2, width=32), 9).eval()
    latents = torch.randn(16, 23)
    with torch.inference_mode():
        full = decoder(latents)
    assert full.shape == (2, 23 * 960) and full.abs().max() <= 1.0
    for sizes in ([23], [1] * 23, [4, 7, 12], [2, 1, 20]):
        stream = StreamingDecode(decoder)
        out, start = [], 0
        for n in sizes:
            out.append(stream.push(latents[:, start : start + n]))
            start += n
        torch.testing.assert_close(torch.cat(out, dim=-1), full, atol=1e-5, rtol=1e-4)


def test_flow_noise_stream_is_chunking_independent():
    a = NoiseStream(generator_for(1), 4)
    b = NoiseStream(generator_for(1), 4)
    torch.testing.assert_close(torch.cat([a.take(3), a.take(70), a.take(1)]), b.take(74))
    est = init_dummy(FlowEstimator(4, 6), 2)
    cond = torch.randn(10, 6)
    noise = torch.randn(10, 4)
    whole = est.solve(cond, noise, 4)
    parts = torch.cat([est.solve(cond[:3], noise[:3], 4), est.solve(cond[3:], noise[3:], 4)])
    torch.testing.assert_close(whole, parts, atol=1e-5, rtol=1e-4)


def test_request_too_long_for_the_context_is_refused_before_generating():
    import pytest

    cfg = ARConfig(num_codebooks=4, codebook_size=50, layout="delay", dim=32, layers=1, max_seq_len=64, cond_dim=8)
    model = init_dummy(ARModel(cfg), 3).eval()
    prompt = model.prompt(list(range(3, 40)), None)
    with pytest.raises(ValueError, match="plus up to 33 generated ones exceeds the model's context of 64"):
        next(generate_frames(model, prompt, GenerationLimits(10, 30), SamplingParams(), generator_for(0)))
