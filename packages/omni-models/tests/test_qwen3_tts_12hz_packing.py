"""The real 12 Hz talker under the deadline scheduler: requests admitted together are prefilled in one
packed forward, and rows may sit out steps, without changing any request's codes."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest
import torch
from qwen3_tts_12hz_checkpoint import EngineContext, build_variants, sine_wav
from tp_support import in_turns, qwen3_step_codes

from omni_models.common.limits import GenerationLimits
from omni_models.qwen3_tts_12hz.text import reference_text

Ctx = EngineContext


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_variants(tmp_path_factory.mktemp("qwen3_packing"), ("custom_voice", "base"))


def _requests(pre, variant: str) -> list:
    """Four requests of different lengths; Base: in-context cloning (reference frames made up: the tiny
    checkpoint has no codec encoder), half of them greedy."""
    texts = ["a short one", "a somewhat longer sentence than that", "third", "the fourth request has the most words of all"]
    if variant == "custom_voice":
        return [pre.prepare({"text": t, "voice": ["vivian", "dylan"][i % 2], "seed": 30 + i, "max_new_tokens": 14 + i, "top_p": 0.9})
                for i, t in enumerate(texts)]
    ref_codes = torch.randint(0, 60, (6, 8), generator=torch.Generator().manual_seed(0))
    ref_ids = tuple(pre.tokenizer.encode(reference_text("hi")))
    out = []
    for i, t in enumerate(texts):
        prepared = pre.prepare({"text": t, "ref_audio": sine_wav(), "x_vector_only_mode": True, "seed": 40 + i, "max_new_tokens": 14 + i,
                                **({"temperature": 0} if i % 2 else {})})
        out.append(dataclasses.replace(prepared, inputs=dataclasses.replace(prepared.inputs, ref_codes=ref_codes, ref_ids=ref_ids)))
    return out


def _together(engine, prepared, *, chunked: bool = False) -> list[torch.Tensor]:
    with engine.scheduler._cond:  # all waiting before the scheduler thread looks: admitted together
        streams = [engine.submit(p, Ctx(), chunked=chunked) for p in prepared]
    out: list = [None] * len(streams)
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, list(streams[i]))) for i in range(len(streams))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [torch.stack(r) for r in out]


@pytest.mark.parametrize("variant", ["custom_voice", "base"])
def test_requests_prefilled_in_one_forward_make_the_codes_of_one_at_a_time_prefill(built, variant):
    pre, engine = built[variant]
    prepared = _requests(pre, variant)
    alone = [engine.collect(p, Ctx()) for p in prepared]
    assert engine.scheduler.prefills[-1] == 1
    together = _together(engine, prepared)
    assert engine.scheduler.prefills[-1] == len(prepared)  # the deadline scheduler packed them into one forward
    for a, b in zip(alone, together):
        assert torch.equal(a, b)


def test_rows_that_sit_out_steps_make_the_codes_they_make_stepping_every_time(built):
    pre, engine = built["custom_voice"]
    prepared = _requests(pre, "custom_voice")
    every = qwen3_step_codes(engine, prepared, lambda step, owners: None)
    subsets = qwen3_step_codes(engine, prepared, in_turns)  # each step a different subset sits out
    assert all(len(every[i]) >= 3 for i in every)  # every row made frames across steps others sat out
    assert subsets == every


def test_deadline_scheduler_packs_prefills_and_lets_streams_with_audio_to_spare_sit_out(built):
    """Streams that got ahead of their listeners sit out while a newly arrived stream waits for its first
    chunk; every stream's codes stay those it makes alone."""
    pre, engine = built["custom_voice"]
    scheduler = engine.scheduler

    def running(seed: int):  # EOS blocked (min_new_tokens): the random tiny talker would stop within a few frames
        p = pre.prepare({"text": "a long running stream", "voice": "vivian", "seed": seed, "max_new_tokens": 600})
        return dataclasses.replace(p, fields=dataclasses.replace(p.fields, limits=GenerationLimits(600, 600)))

    long = [running(50), running(51)]
    late = pre.prepare({"text": "the late arrival", "voice": "dylan", "seed": 60, "max_new_tokens": 20})
    alone = [engine.collect(p, Ctx()) for p in [*long, late]]
    sat_out = scheduler.sat_out
    with scheduler._cond:
        streams = [engine.submit(p, Ctx()) for p in long]
    got: list[list[torch.Tensor]] = [[], [], []]

    def read(i: int) -> None:
        got[i].extend(streams[i].chunks())

    threads = [threading.Thread(target=read, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60  # the tiny talker runs far ahead of real time: the listeners get audio to spare
    while min(s._made for s in streams) < 40 and time.monotonic() < deadline:
        time.sleep(0.002)
    assert scheduler.prefills[-1] == 2  # admitted together: one packed prefill
    assert not any(s.done for s in streams)  # still running when the late stream arrives
    streams.append(engine.submit(late, Ctx()))
    threads.append(threading.Thread(target=read, args=(2,)))
    threads[-1].start()
    for t in threads:
        t.join(120)
    assert scheduler.sat_out > sat_out
    for codes, chunks in zip(alone, got):
        assert torch.equal(torch.cat(chunks, dim=1).T, codes)
