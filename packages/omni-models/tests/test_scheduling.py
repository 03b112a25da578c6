"""The deadline scheduler that protects playback (issue 22): batched prefill, deadline order,
a first chunk that adapts to load, the vocoder's turn order, and streamed audio that joins
without gaps or clicks against the non-streamed output, per layout."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from helpers import FakeCtx, StagePayload, build_stages, synthesize
from test_batching import LAYOUTS, Request, codes_of, tiny_model

from omni_models.common.batch import DecodeBatch
from omni_models.common.playback import DecodeGate, Schedule, ScheduleKnobError, vocoder_gate
from omni_models.common.scheduler import BatchLimits, FrameStream, StepScheduler


def _decode(batch: DecodeBatch) -> dict[object, list[list[int]]]:
    frames: dict[object, list[list[int]]] = {owner: [] for owner in batch.rows}
    while batch:
        for result in batch.step():
            if result.frame is not None:
                frames[result.owner].append(result.frame)
    return frames


@pytest.mark.parametrize("layout", LAYOUTS)
def test_batched_prefill_gives_the_same_codes_as_one_at_a_time(layout):
    model = tiny_model(layout)
    requests = [Request(i) for i in range(5)]  # different prompt lengths, limits and samplers
    with torch.inference_mode():
        one_by_one = DecodeBatch(model)
        for r in requests:
            one_by_one.join(r.i, *r.args(model))
        together = DecodeBatch(model)
        rows = together.join_many([(r.i, *r.args(model)) for r in requests])
        assert [row.position for row in rows] == [r.args(model)[0].shape[1] for r in requests]
        for r in requests:
            assert torch.equal(one_by_one.rows[r.i].hidden, together.rows[r.i].hidden), f"request {r.i}: prefill state differs"
        expected, got = _decode(one_by_one), _decode(together)
    for r in requests:
        assert len(expected[r.i]) >= 8 and expected[r.i] == got[r.i], f"request {r.i}: codes differ after a batched prefill"


def test_the_deadline_scheduler_prefills_new_requests_in_one_forward_and_fifo_one_by_one():
    model = tiny_model("parallel")
    for policy, expected in (("deadline", 4), ("fifo", 1)):
        scheduler = StepScheduler(model, schedule=Schedule(policy))
        try:
            with scheduler._cond:  # hold the loop so all four wait together
                streams = [scheduler.submit(*Request(i).args(model)) for i in range(4)]
            for stream in streams:
                codes_of(stream)
            assert max(scheduler.prefills) == expected, (policy, scheduler.prefills)
        finally:
            scheduler.close()


@pytest.mark.parametrize(("policy", "first"), [("deadline", "stream"), ("fifo", "plain")])
def test_a_due_stream_overtakes_a_non_streaming_request(policy, first):
    """One slot (max_batch_size 1), busy: a non-streamed request arrives, then a stream. Deadline
    admits the stream first (its first chunk is due); fifo keeps the order of arrival."""
    model = tiny_model("parallel")
    scheduler = StepScheduler(model, limits=BatchLimits(max_batch_size=1), schedule=Schedule(policy))
    order: list[str] = []
    try:
        release = threading.Event()
        busy = scheduler.submit(*Request(0, 12, 12).args(model), cancelled=release.is_set)
        next(busy)  # the slot is taken
        with scheduler._cond:
            plain = scheduler.submit(*Request(1, 8, 8).args(model))
            stream = scheduler.submit(*Request(2, 8, 8).args(model), chunking=(1, 4))
            release.set()

        def first_frame(name: str, frames: FrameStream) -> None:
            next(iter(frames))
            order.append(name)
            list(frames)

        threads = [threading.Thread(target=first_frame, args=pair) for pair in (("plain", plain), ("stream", stream))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        list(busy)
    finally:
        scheduler.close()
    assert order[0] == first, order


def test_a_non_streamed_request_sits_out_while_a_stream_is_due_and_its_codes_do_not_change():
    model = tiny_model("delay")
    plain_request, stream_request = Request(1, 40, 40), Request(2, 20, 20)
    alone = StepScheduler(model)
    try:
        expected = codes_of(alone.submit(*plain_request.args(model)))
    finally:
        alone.close()
    # a due stream: its listener is always about to run dry (frame rate far above what the engine makes)
    scheduler = StepScheduler(model, schedule=Schedule("deadline", frame_rate=1e6, due_margin_s=10.0))
    try:
        plain = scheduler.submit(*plain_request.args(model))
        head = [next(plain) for _ in range(3)]
        stream = scheduler.submit(*stream_request.args(model), chunking=(2, 4))
        streamed = list(stream.chunks())
        rest = list(plain)
        assert scheduler.sat_out > 0, "the non-streamed request never sat out"
        assert torch.equal(torch.stack(head + rest, dim=1), expected)
        assert sum(c.shape[1] for c in streamed) >= 20
    finally:
        scheduler.close()


@pytest.mark.parametrize("policy", ["deadline", "fifo"])
def test_a_new_streams_first_chunk_goes_ahead_of_a_stream_with_audio_to_spare(policy):
    """A steady stream whose listener holds seconds of audio (1 frame = 1 s here) sits out while a
    new stream (delay layout: several steps before its first frame) awaits its first chunk, so
    those steps are a batch of one; under fifo it steps along. Neither stream's codes change."""
    model = tiny_model("delay")
    steady_request, new_request = Request(1, 40, 40), Request(2, 12, 12)
    alone = StepScheduler(model)
    try:
        expected = [codes_of(alone.submit(*r.args(model))) for r in (steady_request, new_request)]
    finally:
        alone.close()
    scheduler = StepScheduler(model, schedule=Schedule(policy, frame_rate=1.0, due_margin_s=0.1))
    try:
        with scheduler._cond:  # hold the loop: the steady stream's first chunk is handed over before the new stream joins
            steady = scheduler.submit(*steady_request.args(model), chunking=(1, 4))
        head = next(iter(steady))
        with scheduler._cond:
            made_at_join = steady._made  # a step already under way may still add one frame
            fresh = scheduler.submit(*new_request.args(model), chunking=(1, 4))
            seen: list[int] = []
            hand_over = fresh._hand_over

            def first_hand_over() -> None:  # scheduler thread: how far the steady stream got meanwhile
                if not seen:
                    seen.append(steady._made - made_at_join)
                hand_over()

            fresh._hand_over = first_hand_over
        got_fresh = codes_of(fresh)
        got_steady = torch.stack([head, *steady], dim=1)
    finally:
        scheduler.close()
    assert torch.equal(got_steady, expected[0]) and torch.equal(got_fresh, expected[1])
    warmup = model.config.num_codebooks  # steps the delay layout takes to a new request's first frame
    if policy == "fifo":
        assert seen[0] >= warmup - 1, ("under fifo the steady stream steps along", seen)
    else:
        assert seen[0] <= 1 and scheduler.sat_out >= warmup - 1, (seen, scheduler.sat_out)


def test_a_stream_starting_on_a_busy_engine_gets_a_small_first_chunk_then_ramps_up():
    stream = FrameStream(lambda: False, None, chunking=(3, 6))
    stream.start_small(1)
    for i in range(20):
        stream._put([i])
    stream._finish()
    assert [c.shape[1] for c in stream.chunks()] == [1, 2, 4, 6, 6, 1]
    idle = FrameStream(lambda: False, None, chunking=(3, 6))
    for i in range(20):
        idle._put([i])
    idle._finish()
    assert [c.shape[1] for c in idle.chunks()] == [3, 6, 6, 5]


@pytest.mark.parametrize(
    ("interval_s", "sizes"),
    [
        (0.02, [1, 2, 6, 8, 8, 5]),  # 5x real time: chunks reach chunk_frames by the fourth
        (0.05, [1, 2, 2, 3, 4, 6, 8, 4]),  # 2x: chunks grow as the listener's buffer grows
        (0.125, [1, 2, 8, 8, 8, 3]),  # slower than real time: it cannot keep up, so full chunks
    ],
)
def test_chunks_after_the_first_fit_the_listeners_playback_clock(monkeypatch, interval_s, sizes):
    import omni_models.common.playback as playback_module
    import omni_models.common.scheduler as scheduler_module

    now = [100.0]
    monkeypatch.setattr(scheduler_module.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(playback_module.time, "monotonic", lambda: now[0])
    stream = FrameStream(lambda: False, None, chunking=(1, 8), frame_rate=10.0)  # 100 ms of audio per frame
    stream.fit_to_playback(0.0)
    for i in range(30):
        now[0] += interval_s
        stream._put([i])
    stream._finish()
    assert [c.shape[1] for c in stream.chunks()] == sizes


def test_a_stream_inside_its_margin_ramps_its_chunks_instead_of_shrinking_them(monkeypatch):
    """The listener holds less than the margin (for the vocoder and the wire) from the start: 1-frame
    chunks would multiply the downstream work per second of audio and never build a buffer, so the
    chunks double until the listener has the margin, then fit its clock, and never shrink again."""
    import omni_models.common.playback as playback_module
    import omni_models.common.scheduler as scheduler_module

    now = [100.0]
    monkeypatch.setattr(scheduler_module.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(playback_module.time, "monotonic", lambda: now[0])
    stream = FrameStream(lambda: False, None, chunking=(1, 8), frame_rate=10.0)  # 100 ms of audio per frame
    stream.fit_to_playback(0.5)  # a margin longer than the first chunk's audio
    for i in range(30):
        now[0] += 0.01  # 10x real time
        stream._put([i])
    stream._finish()
    sizes = [c.shape[1] for c in stream.chunks()]
    assert sizes == [1, 2, 4, 6, 8, 8, 1], sizes  # the last is what was left at the end


def test_scheduling_knobs_are_validated_with_the_fix():
    with pytest.raises(ScheduleKnobError) as err:
        StepScheduler(tiny_model("parallel"), schedule=Schedule("edf", 0), stage="tts_engine")
    message = str(err.value)
    assert "factory_args.scheduler: 'edf'" in message and "deadline or fifo" in message
    assert "factory_args.busy_first_chunk_frames: 0" in message
    with pytest.raises(ScheduleKnobError) as both:  # batch and schedule knobs wrong together: all of them named
        StepScheduler(tiny_model("parallel"), limits=BatchLimits(max_batch_size=0), schedule=Schedule("edf"), stage="tts_engine")
    assert "factory_args.max_batch_size: 0" in str(both.value) and "factory_args.scheduler: 'edf'" in str(both.value)
    with pytest.raises(ScheduleKnobError, match="deadline or fifo"):
        vocoder_gate("lifo", "cpu", False)
    assert vocoder_gate("fifo", "cpu", False) is None and vocoder_gate("deadline", "cuda:0", False) is None
    assert isinstance(vocoder_gate("deadline", "cpu", False), DecodeGate)


def test_the_decode_gate_grants_turns_earliest_due_first():
    gate = DecodeGate(1)
    started = threading.Event()

    def holder() -> None:
        with gate.turn(0.0):
            started.set()
            time.sleep(0.3)  # the others queue behind this turn

    waiting = [threading.Thread(target=holder)]
    waiting[0].start()
    started.wait(10)

    def take(due: float) -> None:
        with gate.turn(due):
            pass

    for due in (30.0, 10.0, 20.0):
        waiting.append(threading.Thread(target=take, args=(due,)))
        waiting[-1].start()
    for t in waiting:
        t.join(10)
    assert gate.granted[-3:] == [10.0, 20.0, 30.0]


@pytest.mark.parametrize(("folder", "layout"), [("fun_cosyvoice3", "parallel"), ("higgs_tts", "delay"), ("qwen3_tts", "depth")])
def test_streamed_chunks_join_without_gaps_or_clicks_against_the_non_streamed_output(folder, layout):
    """Frames streamed in chunks of 1 then 2, decoded chunk by chunk, give exactly as many samples
    as one non-streamed decode of the whole, the same values to float rounding, and the same
    step across every join: nothing dropped, repeated or discontinuous."""
    stages = build_stages(folder, overrides={"tts_engine": {"chunk_frames": 2, "first_chunk_frames": 1}})
    assert stages["tts_engine"].engine.model.config.layout == layout
    text = "Every chunk joins the next one exactly."
    streamed = synthesize(folder, {"text": text}, stages=stages)
    engine_stage = next(name for name in streamed.emitted if streamed.emitted[name] and "codes" in streamed.emitted[name][0])
    chunks = streamed.emitted[engine_stage]
    assert len(chunks) > 3
    codes = torch.cat([c["codes"] for c in chunks], dim=1)
    assert [c["start_frame"] for c in chunks] == [sum(c["codes"].shape[1] for c in chunks[:i]) for i in range(len(chunks))]
    vocoder = stages["vocoder"]
    ctx = FakeCtx("whole", "vocoder")
    extra = {k: v for k, v in chunks[0].items() if k not in ("codes", "start_frame")}
    vocoder.chunk_frames = codes.shape[1]  # the non-streamed output: one decode of all frames
    vocoder.process(StagePayload("whole", {**extra, "codes": codes}), ctx)
    (whole,) = [c["audio"] for c in ctx.emitted]
    assert streamed.audio.shape == whole.shape, "the streamed audio has a gap or extra samples"
    # the same samples up to float rounding of the decoder's convolutions over a chunk versus the whole (measured <= 1.5e-7)
    torch.testing.assert_close(streamed.audio, whole, atol=1e-6, rtol=0)
    # no click at a join: the step across each chunk boundary is the one the whole decode has there
    edges = torch.cumsum(torch.tensor([c["audio"].shape[-1] for c in streamed.chunks]), 0)[:-1]
    for edge in edges.tolist():
        assert abs(float(streamed.audio[..., edge] - streamed.audio[..., edge - 1]) - float(whole[..., edge] - whole[..., edge - 1])) < 1e-4


def test_a_stream_that_sits_out_resumes_in_time_to_make_its_whole_next_chunk():
    """A stream may sit out only while its listener holds more than the margin plus the steps its
    next chunk still needs: with 12 frames to make at 50 ms a step, 0.5 s of audio left is not
    enough (it would resume 0.1 s before running dry and hand the chunk over 0.5 s late), while at
    1 ms a step it is."""
    from omni_models.common.scheduler import _can_wait, _needs_steps

    stream = FrameStream(lambda: False, None, chunking=(1, 12), frame_rate=12.5)
    stream._put([0])  # the first chunk: one frame (80 ms of audio); the next ones hold 12
    assert stream.frames_to_next_chunk() == 12
    now = stream.clock.started
    stream.clock.seconds = 0.5 + 0.1  # its listener holds 0.6 s from `now`; the margin is 0.1 s
    assert not _can_wait(stream, now, margin=0.1, step_s=0.05) and _needs_steps(stream, now, 0.1, 0.05)
    assert _can_wait(stream, now, margin=0.1, step_s=0.001) and not _needs_steps(stream, now, 0.1, 0.001)
    fresh = FrameStream(lambda: False, None, chunking=(1, 12), frame_rate=12.5)
    assert _needs_steps(fresh, time.monotonic(), 0.1, 0.0) and not _can_wait(fresh, time.monotonic(), 0.1, 0.0)  # awaits its first chunk


def test_the_scheduler_measures_its_step_time_rising_at_once_and_falling_slowly():
    model = tiny_model("delay")
    scheduler = StepScheduler(model, schedule=Schedule("deadline", frame_rate=12.5))
    try:
        list(scheduler.submit(*Request(1, 8, 8).args(model)))
        assert scheduler.step_s > 0
        slow = scheduler.step_s = 1.0
        steps = scheduler.steps
        list(scheduler.submit(*Request(2, 8, 8).args(model)))
        assert 0 < scheduler.step_s < slow  # fast steps pull it down ...
        assert scheduler.step_s >= slow * 0.8 ** (scheduler.steps - steps)  # ... by a fifth each, not at once
    finally:
        scheduler.close()


def test_the_step_time_of_a_batch_size_never_measured_is_estimated_on_the_high_side():
    scheduler = StepScheduler(tiny_model("delay"), schedule=Schedule("deadline", frame_rate=12.5))
    try:
        assert scheduler.step_time(4) == 0.0  # nothing measured yet: no reason to refuse a small first chunk
        scheduler._step_s_by_rows.update({1: 0.010, 6: 0.030})
        assert scheduler.step_time(1) == 0.010
        assert scheduler.step_time(4) == 0.030  # the nearest larger batch measured
        assert scheduler.step_time(24) == pytest.approx(0.060)  # 6 -> 24 rows: sqrt(4) x 30 ms
    finally:
        scheduler.close()


def test_a_stream_starts_small_on_a_busy_engine_only_while_steps_can_outrun_its_listener():
    """80 ms frames: a 1-frame first chunk is followed by a 2-frame one, which must take at most half
    of the 80 ms to make (20 ms a step); a slower engine keeps the idle first chunk (4 frames)."""
    fast = FrameStream(lambda: False, None, chunking=(4, 12), frame_rate=12.5)
    fast.start_small(1, step_s=0.015)
    slow = FrameStream(lambda: False, None, chunking=(4, 12), frame_rate=12.5)
    slow.start_small(1, step_s=0.025)
    assert fast.frames_to_next_chunk() == 1 and slow.frames_to_next_chunk() == 4
