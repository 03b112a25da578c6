"""Continuous batching in the AR engine and the vocoder: requests join and leave a running batch,
and a request's codes are the same alone and in any batch."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest
import torch
from helpers import FakeCtx, StagePayload, build_stages, synthesize

from omni_config import ConfigError
from omni_models.common.ar import ARConfig, ARModel
from omni_models.common.codec import CodecDecoder, StreamingDecode
from omni_models.common.combine import Combiner
from omni_models.common.frame_stream import FIT_SHARE
from omni_models.common.limits import GenerationLimits
from omni_models.common.sampling import SamplingParams, generator_for
from omni_models.common.scheduler import BatchKnobError, BatchLimits, FrameStream, StepScheduler
from omni_models.common.weights import init_dummy

LAYOUTS = ("parallel", "delay", "depth")


def tiny_model(layout: str, max_seq_len: int = 512) -> ARModel:
    config = ARConfig(num_codebooks=4, codebook_size=64, layout=layout, dim=32, layers=2, heads=4, max_seq_len=max_seq_len, cond_dim=8, depth_dim=16)
    return init_dummy(ARModel(config), 5).eval()


@dataclass(frozen=True)
class Request:
    """A seeded request; ``i`` varies its text length, voice, limits and sampling parameters."""

    i: int
    min_frames: int = 8
    max_frames: int = 24

    def args(self, model: ARModel) -> tuple:
        with torch.inference_mode():
            prompt = model.prompt(list(range(3, 12 + 5 * self.i)), torch.randn(8, generator=torch.Generator().manual_seed(self.i)))
        limits = GenerationLimits(self.min_frames + self.i % 3, self.max_frames + 2 * self.i)
        params = SamplingParams(temperature=(0.0, 0.7, 1.0)[self.i % 3], top_k=(50, 10, 0)[self.i % 3])
        return prompt, limits, params, generator_for("test", self.i)


def codes_of(stream: FrameStream) -> torch.Tensor:
    frames = list(stream)
    return torch.stack(frames, dim=1) if frames else torch.zeros(0, 0, dtype=torch.long)


def run_together(scheduler: StepScheduler, streams: list[FrameStream]) -> list[torch.Tensor]:
    out: list[torch.Tensor | None] = [None] * len(streams)

    def drain(i: int) -> None:
        out[i] = codes_of(streams[i])

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(len(streams))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(o is not None for o in out)
    return out  # type: ignore[return-value]


@pytest.fixture(params=LAYOUTS)
def engine(request):
    model = tiny_model(request.param)
    scheduler = StepScheduler(model, name=f"test-{request.param}")
    yield model, scheduler
    scheduler.close()


def alone(model: ARModel, request: Request) -> torch.Tensor:
    scheduler = StepScheduler(model)
    try:
        return codes_of(scheduler.submit(*request.args(model)))
    finally:
        scheduler.close()


def test_a_request_gets_identical_codes_alone_and_inside_a_batch_of_8(engine):
    model, scheduler = engine
    requests = [Request(i) for i in range(8)]
    expected = [alone(model, r) for r in requests]
    batched = run_together(scheduler, [scheduler.submit(*r.args(model)) for r in requests])
    assert scheduler.peak_batch == 8, "all eight requests should have decoded in one batch"
    for i, (a, b) in enumerate(zip(expected, batched)):
        assert a.shape[1] >= 8, f"request {i} produced too few frames to compare"
        assert torch.equal(a, b), f"request {i}: batched codes differ from the same request alone"
    # greedy, low-temperature and plain sampling all took part
    assert {r.args(model)[2].temperature for r in requests} == {0.0, 0.7, 1.0}


def test_requests_join_and_leave_the_running_batch_between_steps(engine):
    model, scheduler = engine
    long, short, late = Request(0, 60, 60), Request(1, 6, 6), Request(2, 10, 10)
    expected = {r: alone(model, r) for r in (long, short, late)}
    streams = {long: scheduler.submit(*long.args(model)), short: scheduler.submit(*short.args(model))}
    seen = {long: [], short: [], late: []}
    # the long request is mid-generation when the late one joins
    for _ in range(20):
        seen[long].append(next(streams[long]))
    assert scheduler.batch.rows, "the long request should still be running"
    steps_before_join = scheduler.steps
    streams[late] = scheduler.submit(*late.args(model))
    for r in (short, late):
        seen[r] = list(streams[r])
    seen[long] += list(streams[long])
    for r, frames in seen.items():
        assert torch.equal(torch.stack(frames, dim=1), expected[r]), f"request {r.i} changed by joining or leaving"
    # the short request left after its frames while the long one went on; the late one joined mid-way
    assert expected[short].shape[1] < 20 < expected[long].shape[1]
    assert scheduler.steps > steps_before_join and scheduler.peak_batch >= 2
    assert not scheduler.batch.rows


def test_cancelling_one_request_leaves_the_others_unchanged(engine):
    model, scheduler = engine
    requests = [Request(i, 30, 30) for i in range(4)]
    expected = [alone(model, r) for r in requests]
    stop = threading.Event()
    streams = []
    for r in requests:
        prompt, limits, params, gen = r.args(model)
        cancelled = stop.is_set if r.i == 2 else (lambda: False)
        streams.append(scheduler.submit(prompt, limits, params, gen, cancelled=cancelled))
    partial = [next(streams[2]) for _ in range(5)]
    stop.set()
    rest = run_together(scheduler, streams)
    cancelled_codes = torch.cat([torch.stack(partial, dim=1), rest[2]], dim=1) if rest[2].numel() else torch.stack(partial, dim=1)
    assert cancelled_codes.shape[1] < expected[2].shape[1], "the cancelled request should stop early"
    assert torch.equal(cancelled_codes, expected[2][:, : cancelled_codes.shape[1]])
    for i in (0, 1, 3):
        assert torch.equal(rest[i], expected[i]), f"request {i} changed when request 2 was cancelled"


def test_a_caller_that_abandons_its_stream_leaves_the_batch():
    model = tiny_model("parallel")
    scheduler = StepScheduler(model)
    try:
        stream = scheduler.submit(*Request(0, 200, 200).args(model))
        next(stream)
        stream.cancel()
        deadline = time.monotonic() + 10
        while scheduler.batch.rows and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not scheduler.batch.rows
        assert scheduler._reserved == 0
    finally:
        scheduler.close()


def test_a_request_past_its_deadline_fails_and_frees_its_slot():
    model = tiny_model("delay")
    scheduler = StepScheduler(model)
    try:
        prompt, limits, params, gen = Request(0, 200, 200).args(model)
        stream = scheduler.submit(prompt, limits, params, gen, deadline=time.monotonic() - 1)
        with pytest.raises(TimeoutError, match="deadline"):
            list(stream)
        ok = codes_of(scheduler.submit(*Request(1).args(model)))
        assert ok.shape[1] > 0 and scheduler._reserved == 0
    finally:
        scheduler.close()


def test_a_batch_of_mixed_models_or_layouts_is_refused_at_construction():
    delay, depth = tiny_model("delay"), tiny_model("depth")
    with pytest.raises(TypeError, match="one model.*layouts delay, depth|layouts delay, depth.*one engine per model"):
        StepScheduler([delay, depth])
    with pytest.raises(TypeError, match="one engine per model"):
        StepScheduler(delay.decoder)
    scheduler = StepScheduler(delay)
    try:
        wide = torch.zeros(1, 5, 48)
        with pytest.raises(ValueError, match=r"prompt must be \[1, T, 32\] for this model"):
            scheduler.submit(wide, GenerationLimits(1, 2), SamplingParams(), generator_for(0))
    finally:
        scheduler.close()


def test_batch_knobs_are_validated_with_every_problem_named():
    model = tiny_model("parallel")
    with pytest.raises(BatchKnobError) as err:
        StepScheduler(model, limits=BatchLimits(max_batch_size=0, max_batch_tokens=100), stage="tts_engine")
    text = str(err.value)
    assert "factory_args.max_batch_size: 0 is not allowed" in text
    assert "factory_args.max_batch_tokens: 100 is not allowed" in text and "model's context (512)" in text
    assert "fix:  set stages.tts_engine.factory_args.max_batch_size to 1 or more" in text
    for bad in (True, 2.5, "8", -3):
        with pytest.raises(BatchKnobError, match="max_batch_size"):
            BatchLimits(max_batch_size=bad).check(512, "tts_engine")  # type: ignore[arg-type]
    BatchLimits(max_batch_size=1, max_batch_tokens=512).check(512, "tts_engine")


def test_model_factories_take_the_knobs_from_factory_args():
    stages = build_stages("higgs_tts", overrides={"tts_engine": {"max_batch_size": 3, "max_batch_tokens": 4096}})
    assert stages["tts_engine"].engine.scheduler.limits == BatchLimits(3, 4096)
    # a bad value never reaches the factory: the pipeline's knob declarations refuse it first ...
    with pytest.raises(ConfigError, match="stages.tts_engine.factory_args.max_batch_size"):
        build_stages("qwen3_tts", overrides={"tts_engine": {"max_batch_size": 0}})
    with pytest.raises(ConfigError, match="stages.vocoder.factory_args.max_batch_size"):
        build_stages("qwen3_tts", overrides={"vocoder": {"max_batch_size": 0}})
    # ... and a direct call (no config) still gets the factory's own check, naming the knob
    from omni_models.common.factories import build_tts_engine, build_vocoder

    with pytest.raises(BatchKnobError, match="stages.tts_engine.factory_args.max_batch_size"):
        build_tts_engine("higgs_tts", max_batch_size=0)
    with pytest.raises(BatchKnobError, match="stages.vocoder.factory_args.max_batch_size"):
        build_vocoder("higgs_tts", max_batch_size=0)


def test_max_batch_size_and_tokens_bound_the_running_batch():
    model = tiny_model("delay")
    requests = [Request(i) for i in range(5)]
    expected = [alone(model, r) for r in requests]
    # each of these requests reserves one 256-position span, so 512 tokens hold two of them
    for limits, peak in ((BatchLimits(max_batch_size=1), 1), (BatchLimits(max_batch_size=3), 3), (BatchLimits(max_batch_size=8, max_batch_tokens=512), 2)):
        scheduler = StepScheduler(model, limits=limits)
        try:
            got = run_together(scheduler, [scheduler.submit(*r.args(model)) for r in requests])
        finally:
            scheduler.close()
        assert scheduler.peak_batch == peak
        assert all(torch.equal(a, b) for a, b in zip(expected, got))


def test_a_request_too_long_for_the_context_is_refused_at_submit():
    model = tiny_model("delay", max_seq_len=64)
    scheduler = StepScheduler(model)
    try:
        prompt = model.prompt(list(range(3, 40)), None)
        with pytest.raises(ValueError, match="exceeds the model's context of 64"):
            scheduler.submit(prompt, GenerationLimits(10, 30), SamplingParams(), generator_for(0))
    finally:
        scheduler.close()


@pytest.mark.parametrize("scheduler", ["fifo", "deadline"])
def test_a_model_stage_streams_the_same_audio_when_requests_run_concurrently(scheduler):
    """Through the real stage objects: Qwen3-TTS requests submitted from 4 threads at once give
    the audio each gives alone, chunked as the stage's first_chunk_frames/chunk_frames say
    (fifo), or with a first chunk that adapts to load and ramps up to chunk_frames (deadline)."""
    stages = build_stages("qwen3_tts", overrides={"tts_engine": {"scheduler": scheduler}, "vocoder": {"scheduler": scheduler}})
    texts = [f"Concurrent request number {n} has its own words." for n in range(4)]
    alone_results = [synthesize("qwen3_tts", {"text": t}, stages=stages, request_id=f"a{n}") for n, t in enumerate(texts)]
    together: list = [None] * 4

    def run(n: int) -> None:
        together[n] = synthesize("qwen3_tts", {"text": texts[n]}, stages=stages, request_id=f"b{n}")

    threads = [threading.Thread(target=run, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert stages["tts_engine"].engine.scheduler.peak_batch > 1
    for a, b in zip(alone_results, together):
        codes_a = [c["codes"] for c in a.emitted["tts_engine"]]
        codes_b = [c["codes"] for c in b.emitted["tts_engine"]]
        sizes_b = [c.shape[1] for c in codes_b]
        if scheduler == "fifo":
            assert codes_a[0].shape[1] == 2 and all(c.shape[1] == 6 for c in codes_a[1:-1])
            assert sizes_b == [c.shape[1] for c in codes_a]
        else:  # one frame first on a busy engine, then ramping (or handed over early when playback runs dry), never above chunk_frames
            assert sizes_b[0] in (1, 2) and max(sizes_b) <= 6, sizes_b
    if scheduler == "deadline":
        engine = stages["tts_engine"].engine.scheduler
        # a small first chunk only while a step of the batch makes the next (2-frame) chunk in at most
        # half the first chunk's audio (FrameStream.start_small); a slower machine keeps 2 frames
        too_slow = 2 * engine.step_time(len(texts)) > FIT_SHARE / engine.schedule.frame_rate
        started_small = any(b.emitted["tts_engine"][0]["codes"].shape[1] == 1 for b in together)
        assert started_small or too_slow, f"no request started small on the busy engine (step {engine.step_time(len(texts)) * 1e3:.1f} ms)"
        assert torch.equal(torch.cat(codes_a, dim=1), torch.cat(codes_b, dim=1))
        torch.testing.assert_close(a.audio, b.audio)


def test_vocoder_chunks_arriving_together_share_one_forward_and_keep_their_own_context():
    decoder = init_dummy(CodecDecoder(16, 480, 1, width=32), 9).eval()
    calls = []

    def run_batch(latents: torch.Tensor) -> torch.Tensor:
        calls.append(latents.shape[0])
        time.sleep(0.02)  # a slow forward, so the other threads' chunks queue behind it
        with torch.inference_mode():
            return decoder(latents)

    combiner = Combiner(run_batch, max_batch=8)
    latents = [torch.randn(16, 20, generator=torch.Generator().manual_seed(n)) for n in range(6)]
    results: list = [None] * 6

    def stream(n: int) -> None:
        s = StreamingDecode(decoder, combiner)
        results[n] = torch.cat([s.push(latents[n][:, i : i + 4]) for i in range(0, 20, 4)], dim=-1)

    threads = [threading.Thread(target=stream, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(calls) == 30 and len(calls) < 30 and max(calls) > 1, calls
    with torch.inference_mode():
        for n in range(6):
            torch.testing.assert_close(results[n], decoder(latents[n]), atol=1e-5, rtol=1e-4)


def test_a_failing_batched_forward_fails_every_caller_in_it():
    def broken(latents: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("decoder exploded")

    combiner = Combiner(broken)
    with pytest.raises(RuntimeError, match="decoder exploded"):
        combiner(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="max_batch must be an integer >= 1"):
        Combiner(broken, max_batch=0)


def test_vocoder_batches_on_request_only_on_the_cpu():
    stages = build_stages("higgs_tts")
    assert stages["vocoder"].combiner is None  # CPU default: each request decodes on its own thread
    batched = build_stages("higgs_tts", overrides={"vocoder": {"max_batch_size": 4}})
    assert batched["vocoder"].combiner.max_batch == 4
    result = synthesize("higgs_tts", {"text": "Batched vocoder, same audio."}, stages=batched)
    plain = synthesize("higgs_tts", {"text": "Batched vocoder, same audio."}, stages=stages)
    torch.testing.assert_close(result.audio, plain.audio, atol=1e-5, rtol=1e-4)
    ctx = FakeCtx("r", "vocoder")
    codes = torch.cat([c["codes"] for c in plain.emitted["tts_engine"]], dim=1)
    out = batched["vocoder"].process(StagePayload("r", {"codes": codes}), ctx)
    assert out.data["num_frames"] == codes.shape[1]


def test_a_request_may_carry_its_own_sampling_parameters():
    from omni_runtime.errors import InvalidRequest

    stages = build_stages("higgs_tts")

    def codes(data: dict) -> torch.Tensor:
        result = synthesize("higgs_tts", {"text": "Per-request sampling.", **data}, stages=stages)
        return torch.cat([c["codes"] for c in result.emitted["tts_engine"]], dim=1)

    greedy = [codes({"temperature": 0, "seed": s}) for s in (1, 2)]
    sampled = [codes({"seed": s}) for s in (1, 2)]
    assert torch.equal(greedy[0][:, :4], greedy[1][:, :4]), "greedy decoding must not depend on the seed"
    assert not torch.equal(sampled[0][:, :4], sampled[1][:, :4])
    for field, bad in (("temperature", -1), ("temperature", "hot"), ("top_k", 2.5), ("top_k", True)):
        with pytest.raises(InvalidRequest) as err:
            synthesize("higgs_tts", {"text": "x", field: bad}, stages=stages)
        assert err.value.param == field
