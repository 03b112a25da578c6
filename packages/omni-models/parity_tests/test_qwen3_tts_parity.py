"""Qwen3-TTS 12 Hz: omni's engine and decoder against the reference (``qwen-tts`` 0.1.1).

For each variant (Base with x-vector and in-context cloning, CustomVoice, VoiceDesign) on a
tiny random checkpoint written by the reference's own classes in the published layout:

- greedy codes: omni's scheduler, each request alone and the 8 mixed requests in one running
  batch, equal the reference's ``generate`` (alone, and its batched call) exactly;
- waveform: omni's decoder on the same codes against the reference decoder (whole utterance,
  the reference's 300-frame chunks with 25 frames of left context), within ``WAVE_TOLERANCE``;
  the streaming vocoder (4-frame first chunk, then 12) is measured against the same reference
  audio and its largest deviation is reported, not asserted;
- the reference's public API audio (``generate_custom_voice`` ...) equals omni's decode of its codes.
"""

from __future__ import annotations

import io
import threading
import wave
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROWS  # noqa: E402
from qwen3_tts_reference import load_reference, write_checkpoint  # noqa: E402

from omni_models.qwen3_tts_12hz import stages  # noqa: E402
from omni_models.qwen3_tts_12hz.codec import CodecDecoder  # noqa: E402
from omni_models.qwen3_tts_12hz.model import Checkpoint  # noqa: E402

WAVE_TOLERANCE = 1e-4  # measured: max |omni - reference| on these checkpoints is ~1e-6 (float32 reordering)
MAX_NEW = 24
RATE = 24000

TEXTS = [
    "hello the voice",
    "the user says hello to the assistant, twice.",
    "hi",
    "a somewhat longer sentence so that this request runs for more frames than the others",
    "voice",
    "hello hello hello",
    "the assistant",
    "one two three",
]


def _wav_bytes(samples: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return buffer.getvalue()


def _reference_audio(seed: int, seconds: float) -> tuple[bytes, np.ndarray]:
    """A reference recording as WAV bytes (what omni receives) and the same 16-bit samples as floats (what the reference gets)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(RATE * seconds)) / RATE
    signal = 0.4 * np.sin(2 * np.pi * (150 + 40 * seed) * t) + 0.05 * rng.standard_normal(t.shape)
    data = _wav_bytes(signal)
    with wave.open(io.BytesIO(data)) as handle:
        floats = np.frombuffer(handle.readframes(handle.getnframes()), dtype="<i2").astype(np.float32) / 32768.0
    return data, floats


def _requests(variant: str) -> list[dict]:
    out = []
    for i, text in enumerate(TEXTS):
        data = {"text": text, "temperature": 0, "max_new_tokens": MAX_NEW - 3 * (i % 3), "language": ["english", "auto", "chinese", "german"][i % 4]}
        if variant == "custom_voice":
            data["voice"] = ["vivian", "dylan", "eric"][i % 3]
            if i % 2:
                data["instructions"] = ["speak slowly", "whisper the voice"][i % 4 // 2]
        elif variant == "voice_design":
            data["instructions"] = ["a deep calm voice", "hello the user voice", "bright and fast", "the assistant voice"][i % 4]
        else:
            audio, floats = _reference_audio(i, 0.4 + 0.1 * i)
            data["ref_audio"], data["_floats"] = audio, floats
            if i % 2:
                data["x_vector_only_mode"] = True
            else:
                data["ref_text"] = ["hello the voice", "the user", "voice hello", "the assistant"][i // 2 % 4]
        out.append(data)
    return out


def _reference_codes(ref, variant: str, requests: list[dict]) -> list[torch.Tensor]:
    """The reference model's ``generate`` on the wrapper's own prompt preparation (greedy, talker and sub-talker)."""
    langs = [r["language"] for r in requests]
    input_ids = ref._tokenize_texts([ref._build_assistant_text(r["text"]) for r in requests])
    kwargs = ref._merge_generate_kwargs(do_sample=False, subtalker_dosample=False, max_new_tokens=None)
    kwargs["max_new_tokens"] = requests[0]["max_new_tokens"]
    assert len({r["max_new_tokens"] for r in requests}) == 1, "one reference call shares one max_new_tokens"
    if variant == "base":
        items = []
        for r in requests:
            items += ref.create_voice_clone_prompt(ref_audio=(r["_floats"], RATE), ref_text=r.get("ref_text"), x_vector_only_mode=r.get("x_vector_only_mode", False))
        prompt = ref._prompt_items_to_voice_clone_prompt(items)
        ref_ids = [None if not it.ref_text else ref._tokenize_texts([ref._build_ref_text(it.ref_text)])[0] for it in items]
        codes, _ = ref.model.generate(input_ids=input_ids, ref_ids=ref_ids, voice_clone_prompt=prompt, languages=langs, non_streaming_mode=False, **kwargs)
        return codes
    instructs = [None if not r.get("instructions") else ref._tokenize_texts([ref._build_instruct_text(r["instructions"])])[0] for r in requests]
    speakers = [r.get("voice") for r in requests] if variant == "custom_voice" else None
    codes, _ = ref.model.generate(input_ids=input_ids, instruct_ids=instructs, languages=langs, speakers=speakers, non_streaming_mode=True, **kwargs)
    return codes


class _Ctx:
    cancelled = False
    deadline = None


def _omni(directory: Path):
    pre = stages.build_preprocessing(model_path=str(directory))
    engine = stages.build_tts_engine(model_path=str(directory)).engine
    return pre, engine


def _omni_batch(engine, prepared: list) -> list[torch.Tensor]:
    """All requests submitted before the scheduler runs, so they decode as one batch."""
    with engine.scheduler._cond:  # hold the scheduler so all 8 are admitted together
        streams = [engine.submit(p, _Ctx(), chunked=False) for p in prepared]
    results: list = [None] * len(streams)

    def drain(i: int) -> None:
        results[i] = [f for f in streams[i]]

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(len(streams))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert engine.scheduler.peak_batch == len(prepared), f"the requests ran in batches of {engine.scheduler.peak_batch}, not one batch"
    return [torch.stack(r) if r else torch.zeros((0, 8), dtype=torch.long) for r in results]


def _stream_decode(decoder: CodecDecoder, codes: torch.Tensor, context: torch.Tensor | None) -> tuple[torch.Tensor, list[int]]:
    """omni's streaming vocoder on ``codes`` ``[T, G]``: returns the audio and the sample offsets of chunk boundaries."""
    vocoder = stages.Vocoder(decoder, "cpu", 25, None)

    class Ctx:
        cancelled = False

        def __init__(self):
            self.audio = []

        def emit(self, chunk):
            self.audio.append(chunk["audio"])

    chunks, start, size = [], 0, 4
    while start < codes.shape[0]:
        chunk = {"codes": codes[start : start + size].T}
        if start == 0 and context is not None:
            chunk["context_codes"] = context.T
        chunks.append(chunk)
        start, size = start + size, 12
    ctx = Ctx()
    vocoder._stream(iter(chunks), ctx)
    bounds = np.cumsum([a.shape[-1] for a in ctx.audio])[:-1].tolist()
    return torch.cat(ctx.audio), bounds


@pytest.mark.timeout(900)
@pytest.mark.parametrize("variant", ["custom_voice", "voice_design", "base"])
def test_parity(tmp_path: Path, variant: str) -> None:
    directory = write_checkpoint(tmp_path / variant, variant, seed={"custom_voice": 1, "voice_design": 2, "base": 3}[variant])
    ref = load_reference(directory)
    requests = _requests(variant)
    pre, engine = _omni(directory)
    prepared = [pre.prepare({k: v for k, v in r.items() if not k.startswith("_")}) for r in requests]

    by_limit: dict[int, list[int]] = {}
    for i, r in enumerate(requests):
        by_limit.setdefault(r["max_new_tokens"], []).append(i)
    ref_alone = {i: _reference_codes(ref, variant, [requests[i]])[0] for i in range(len(requests))}
    ref_batch: dict[int, torch.Tensor] = {}
    for group in by_limit.values():  # the reference's batched call shares one max_new_tokens
        for i, codes in zip(group, _reference_codes(ref, variant, [requests[i] for i in group])):
            ref_batch[i] = codes
    omni_alone = [engine.collect(p, _Ctx()) for p in prepared]
    omni_batch = _omni_batch(engine, prepared)

    alone = [torch.equal(omni_alone[i], ref_alone[i]) for i in range(len(requests))]
    batch = [torch.equal(omni_batch[i], ref_batch[i]) for i in range(len(requests))]
    assert all(omni_alone[i].shape[0] > 0 for i in range(len(requests)))

    decoder = Checkpoint.open(directory).codec_decoder()
    wave_error = stream_error = 0.0
    for i, p in enumerate(prepared):
        codes = ref_alone[i]
        full = codes if p.context_codes is None else torch.cat([p.context_codes, codes])
        reference_wave = torch.from_numpy(ref.model.speech_tokenizer.decode([{"audio_codes": full}])[0][0])
        with torch.inference_mode():
            omni_wave = decoder.decode_chunked(full.T[None])[0, 0]
        wave_error = max(wave_error, float((omni_wave - reference_wave).abs().max()))
        streamed, bounds = _stream_decode(decoder, codes, p.context_codes)
        skip = 0 if p.context_codes is None else p.context_codes.shape[0] * decoder.total_upsample
        target = reference_wave[skip:]
        for b in bounds:
            lo, hi = max(0, b - 64), min(target.shape[0], b + 64)
            stream_error = max(stream_error, float((streamed[lo:hi] - target[lo:hi]).abs().max()))
    ROWS.append({"model": "Qwen3-TTS-12Hz (tiny, published layout)", "variant": variant, "cases": f"{len(requests)} alone + 1 batch of {len(requests)}",
                 "alone": f"{sum(alone)}/{len(alone)}", "batch": f"{sum(batch)}/{len(batch)}", "wave_max_error": wave_error, "stream_boundary_error": stream_error})
    assert all(alone), f"codes differ from the reference alone for requests {[i for i, ok in enumerate(alone) if not ok]}"
    assert all(batch), f"codes differ from the reference in the batch for requests {[i for i, ok in enumerate(batch) if not ok]}"
    assert wave_error <= WAVE_TOLERANCE


@pytest.mark.timeout(600)
def test_public_api_audio_matches(tmp_path: Path) -> None:
    """The reference's user-facing call (audio only) equals omni's codes decoded by omni's decoder."""
    directory = write_checkpoint(tmp_path / "cv", "custom_voice", seed=4)
    ref = load_reference(directory)
    wavs, rate = ref.generate_custom_voice(TEXTS[:2], speaker=["vivian", "dylan"], language=["english", "auto"], do_sample=False, subtalker_dosample=False, max_new_tokens=16)
    pre, engine = _omni(directory)
    decoder = Checkpoint.open(directory).codec_decoder()
    assert rate == RATE
    for text, speaker, language, expected in zip(TEXTS[:2], ["vivian", "dylan"], ["english", "auto"], wavs):
        prepared = pre.prepare({"text": text, "voice": speaker, "language": language, "temperature": 0, "max_new_tokens": 16})
        codes = engine.collect(prepared, _Ctx())
        with torch.inference_mode():
            audio = decoder.decode_chunked(codes.T[None])[0, 0].numpy()
        assert audio.shape == expected.shape
        assert np.abs(audio - expected).max() <= WAVE_TOLERANCE


@pytest.mark.timeout(600)
def test_speaker_encoder_matches(tmp_path: Path) -> None:
    """Base: omni's log-mel + ECAPA x-vector equals the reference's ``extract_speaker_embedding``."""
    directory = write_checkpoint(tmp_path / "base", "base", seed=5)
    ref = load_reference(directory)
    encoder = Checkpoint.open(directory).speaker_encoder()
    _, floats = _reference_audio(7, 1.3)
    expected = ref.model.extract_speaker_embedding(floats, RATE)
    with torch.inference_mode():
        got = encoder.embed(torch.from_numpy(floats))
    assert torch.allclose(got, expected, atol=1e-4, rtol=1e-4), float((got - expected).abs().max())
