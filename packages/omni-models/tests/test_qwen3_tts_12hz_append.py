"""True append on Qwen3-TTS 12 Hz: text given in pieces while the talker generates makes the codes of the
same tokens given at once; a row waiting for text is held while the other rows go on."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from qwen3_tts_12hz_checkpoint import EngineContext, build_variants, sine_wav

from omni_models.qwen3_tts_12hz.append import OpenText
from omni_models.qwen3_tts_12hz.prompt import body_ids
from omni_runtime.errors import InvalidRequest

PIECES = ("the first clause of it,", " then a second one", " and the end.")


Ctx = EngineContext


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_variants(tmp_path_factory.mktemp("qwen3_append"), ("base", "custom_voice"))


def _fields(variant: str, **extra):
    base = {"ref_audio": sine_wav(), "x_vector_only_mode": True} if variant == "base" else {"voice": "vivian"}
    return {**base, "max_new_tokens": 80, "seed": 11, **extra}


def _held(engine) -> bool:
    batch = engine.scheduler.batch
    return len(batch) > 0 and not batch.ready_rows()


def _appended(pre, engine, variant: str, **extra) -> tuple[torch.Tensor, int]:
    """Collect an open request given PIECES one by one, each after the row was held waiting for it."""
    prepared = pre.prepare({"text": PIECES[0], "input_open": True, **_fields(variant, **extra)})
    text = OpenText(body_ids(prepared.inputs), len(PIECES[0]))
    out: dict[str, torch.Tensor] = {}
    worker = threading.Thread(target=lambda: out.__setitem__("codes", engine.collect(prepared, Ctx(), text)))
    worker.start()
    holds = 0
    for piece in PIECES[1:]:
        deadline = time.monotonic() + 30
        while not _held(engine) and worker.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        holds += _held(engine)
        text.extend(pre.tokenizer.encode(piece), len(piece))
    text.close()
    worker.join(60)
    return out["codes"], holds


@pytest.mark.parametrize("extra", [{"temperature": 0}, {}], ids=["greedy", "sampled"])
def test_base_text_in_three_appends_makes_the_codes_of_the_whole_text(built, extra):
    pre, engine = built["base"]
    whole = "".join(PIECES)
    assert pre.tokenizer.encode(whole) == [i for p in PIECES for i in pre.tokenizer.encode(p)]  # the same token sequence
    at_once = engine.collect(pre.prepare({"text": whole, **_fields("base", **extra)}), Ctx())
    appended, holds = _appended(pre, engine, "base", **extra)
    assert holds == 2  # the row waited for each piece
    assert torch.equal(appended, at_once)


def test_custom_voice_open_input_speaks_in_the_streaming_layout_with_the_same_codes(built):
    """A CustomVoice request with open input takes the streaming-text layout; given in pieces it makes the codes of its
    text given at once in that layout (input closed before the talker started)."""
    pre, engine = built["custom_voice"]
    whole = "".join(PIECES)
    prepared = pre.prepare({"text": whole, "input_open": True, **_fields("custom_voice", temperature=0)})
    assert not prepared.inputs.non_streaming
    closed = OpenText(body_ids(prepared.inputs), len(whole))
    closed.close()
    at_once = engine.collect(prepared, Ctx(), closed)
    appended, holds = _appended(pre, engine, "custom_voice", temperature=0)
    assert holds == 2 and torch.equal(appended, at_once)


def test_a_held_row_keeps_its_slot_and_the_others_run_unchanged(built):
    pre, engine = built["custom_voice"]
    other = pre.prepare({"text": "another request entirely", **_fields("custom_voice", seed=5)})
    alone = engine.collect(other, Ctx())
    prepared = pre.prepare({"text": PIECES[0], "input_open": True, **_fields("custom_voice")})
    text = OpenText(body_ids(prepared.inputs), len(PIECES[0]))
    stream = engine.submit(prepared, Ctx(), chunked=False, open_text=text)
    deadline = time.monotonic() + 30
    while not _held(engine) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert _held(engine)
    beside = engine.collect(other, Ctx())  # runs to its end while the open row waits in its slot
    assert torch.equal(beside, alone)
    assert len(engine.scheduler.batch) == 1
    stream.cancel()  # a cancelled open request leaves the batch (frees its slot)
    deadline = time.monotonic() + 10
    while len(engine.scheduler.batch) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(engine.scheduler.batch) == 0


def test_text_after_close_and_a_bad_flag_are_refused(built):
    pre, _ = built["custom_voice"]
    with pytest.raises(InvalidRequest) as caught:
        pre.prepare({"text": "hi", "input_open": "yes", "voice": "vivian"})
    assert caught.value.param == "input_open"
    text = OpenText([1, 2], 2)
    text.close()
    with pytest.raises(InvalidRequest):
        text.extend([3], 1)


def test_in_context_cloning_waits_for_the_text_its_prompt_holds_then_makes_the_same_codes(built):
    """Base in-context cloning puts reference transcript + text over the reference frames: a first piece shorter than
    that waits (no prefill) until enough text arrived. Reference frames made up here: the tiny checkpoint has no
    codec encoder."""
    import dataclasses

    from omni_models.qwen3_tts_12hz.prompt import body_in_prompt
    from omni_models.qwen3_tts_12hz.text import reference_text

    pre, engine = built["base"]
    ref_codes = torch.randint(0, 60, (6, 8), generator=torch.Generator().manual_seed(0))
    ref_ids = tuple(pre.tokenizer.encode(reference_text("hi")))

    def cloning(prepared):
        return dataclasses.replace(prepared, inputs=dataclasses.replace(prepared.inputs, ref_codes=ref_codes, ref_ids=ref_ids))

    fields = {"ref_audio": sine_wav(), "x_vector_only_mode": True, "max_new_tokens": 80, "seed": 11, "temperature": 0}
    pieces = ("t", "he", " first clause of it, then a second one and the end.")
    at_once = engine.collect(cloning(pre.prepare({"text": "".join(pieces), **fields})), Ctx())
    prepared = cloning(pre.prepare({"text": pieces[0], "input_open": True, **fields}))
    assert body_in_prompt(prepared.inputs) > 2  # the first two pieces do not fill the prompt
    text = OpenText(body_ids(prepared.inputs), 1)
    out: dict[str, torch.Tensor] = {}
    worker = threading.Thread(target=lambda: out.__setitem__("codes", engine.collect(prepared, Ctx(), text)))
    worker.start()
    text.extend(pre.tokenizer.encode(pieces[1]), 2)
    time.sleep(0.2)
    assert len(engine.scheduler.batch) == 0  # still waiting for the prompt's text: no slot taken
    text.extend(pre.tokenizer.encode(pieces[2]), len(pieces[2]))
    text.close()
    worker.join(60)
    assert torch.equal(out["codes"], at_once)


def test_a_row_waiting_for_text_hands_over_every_frame_it_made(built):
    """Streamed in chunks of 4, then 12 frames: a held row's partial chunk goes out while it waits, so the listener
    hears every word the request was given so far."""
    pre, engine = built["custom_voice"]
    prepared = pre.prepare({"text": PIECES[0], "input_open": True, **_fields("custom_voice", temperature=0)})
    text = OpenText(body_ids(prepared.inputs), len(PIECES[0]))
    stream = engine.submit(prepared, Ctx(), open_text=text)
    got: list[int] = []
    reader = threading.Thread(target=lambda: [got.append(chunk.shape[1]) for chunk in stream.chunks()], daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 30
        while not _held(engine) and time.monotonic() < deadline:
            time.sleep(0.005)
        made = engine.scheduler.batch.order[0].step
        deadline = time.monotonic() + 5
        while sum(got) < made and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sum(got) == made and made > 4
    finally:
        stream.cancel()
