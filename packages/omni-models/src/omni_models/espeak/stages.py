"""Stage factories of the espeak reference pipeline: preprocessing -> tts_engine => vocoder.

Every handoff travels in ``StagePayload.data`` (the pipeline declares no
process-local edge), so the three stages may share one process, as the default
topology has them, or run in separate ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import torch

from omni_runtime import InvalidRequest, StageConfigError, StageContext, StagePayload

from .engine import RATE_NORMAL, EspeakEngine, Synthesis, UnknownVoiceError, get_engine
from .level import LevelNormalizer
from .normalize import prepare
from .resample import StreamingResampler


#: OpenAI's preset voice names mapped to espeak-ng voices, so OpenAI clients work unchanged.
def normalize_text(text: str) -> str:
    """The text as the preprocessing stage hands it to the engine (``omni synthesize --print-normalized``)."""
    return prepare(text).normalized


OPENAI_VOICES = {
    "alloy": "en-us",
    "ash": "en-us+m3",
    "ballad": "en-GB-x-rp",
    "coral": "en-us+f3",
    "echo": "en-us+m1",
    "fable": "en",
    "nova": "en-us+f2",
    "onyx": "en-us+m7",
    "sage": "en-us+f4",
    "shimmer": "en-us+f1",
    "verse": "en-GB-x-rp+m2",
}
VOICES = tuple(OPENAI_VOICES)
"""The preset voices omni serve lists (GET /v1/audio/voices); any espeak-ng voice name also works."""
MIN_SPEED, MAX_SPEED = 0.25, 4.0


def _with_data(payload: StagePayload, data: dict[str, Any]) -> StagePayload:
    return dataclasses.replace(payload, data=data)


class Preprocessing:
    """Normalise the request text and split it into sentences for streamed synthesis."""

    def __init__(self, max_sentence_chars: int) -> None:
        self.max_sentence_chars = max_sentence_chars

    def process(self, payload: StagePayload) -> StagePayload:
        text = payload.data.get("text")
        if not isinstance(text, str):
            raise TypeError(f"request field 'text' must be a string, got {type(text).__name__}")
        prepared = prepare(text, self.max_sentence_chars)
        if not prepared.sentences:
            raise InvalidRequest("input has nothing to speak after normalisation; send at least one letter or digit", param="input")
        speed = payload.data.get("speed", 1.0)
        speed = 1.0 if speed is None else float(speed)
        if not MIN_SPEED <= speed <= MAX_SPEED:
            raise InvalidRequest(param="speed", message=f"speed {speed} is outside [{MIN_SPEED}, {MAX_SPEED}]; send a value in that range (1.0 is normal)")
        data = dict(payload.data)
        data.update(normalized_text=prepared.normalized, sentences=list(prepared.sentences), speed=speed)
        return _with_data(payload, data)


class TtsEngine:
    """Synthesise each sentence with libespeak-ng and stream its PCM to the vocoder as it is ready."""

    def __init__(self, engine: EspeakEngine, default_voice: str, words_per_minute: int) -> None:
        self.engine = engine
        self.default_voice = default_voice
        self.words_per_minute = words_per_minute

    def voice_for(self, requested: str | None) -> str:
        if not requested:
            return self.default_voice
        return OPENAI_VOICES.get(requested, requested)

    def process(self, payload: StagePayload, ctx: StageContext) -> StagePayload:
        data = payload.data
        if "sentences" not in data:
            raise ValueError("payload from preprocessing -> tts_engine carries no 'sentences'; the preprocessing stage must run before tts_engine")
        sentences = list(data["sentences"])
        voice = self.voice_for(data.get("voice"))
        wpm = self.words_per_minute * float(data.get("speed") or 1.0)
        timestamps = data.get("timestamps") == "word"
        samples = 0
        for index, sentence in enumerate(sentences):
            if ctx.cancelled:
                break
            speech = self.engine.synthesize(sentence, voice=voice, words_per_minute=wpm)
            chunk = {"pcm": speech.pcm, "sample_rate": speech.sample_rate, "sentence_index": index, "sentence": sentence}
            if timestamps:  # libespeak-ng's own word events, at the engine's rate from the request's first sample
                chunk["word_marks"] = word_marks(sentence, speech, samples)
            samples += speech.pcm.shape[0]
            ctx.emit(chunk)
        return _with_data(
            payload,
            {
                "voice": voice,
                "num_sentences": len(sentences),
                "source_sample_rate": self.engine.sample_rate,
                "source_samples": samples,
                **_alignment_fields(data),
            },
        )


class Vocoder:
    """Resample the engine's 22,050 Hz PCM to the output rate, normalise its level, stream it out."""

    def __init__(self, sample_rate: int, normalizer: LevelNormalizer) -> None:
        self.sample_rate = sample_rate
        self.normalizer = normalizer

    def consume(self, chunks: Iterable[dict[str, Any]], ctx: StageContext) -> StagePayload:
        resampler: StreamingResampler | None = None
        emitted = 0
        pieces = 0
        marks: list[dict[str, Any]] = []
        for chunk in chunks:
            pcm = chunk["pcm"]
            if pcm.dtype != torch.int16:
                raise TypeError(f"tts_engine -> vocoder chunk 'pcm' must be int16 PCM, got {pcm.dtype}")
            if resampler is None:
                resampler = StreamingResampler(int(chunk["sample_rate"]), self.sample_rate)
            if chunk.get("word_marks") is not None:
                marks.append(chunk["word_marks"])
            audio = resampler.process(pcm.to(torch.float32) / 32768.0)
            emitted += self._emit(ctx, audio, marks)
            pieces += 1
        if resampler is not None:
            emitted += self._emit(ctx, resampler.flush(), marks)
        upstream = ctx.upstream_payload
        data = {
            "sample_rate": self.sample_rate,
            "channels": 1,
            "num_samples": emitted,
            "duration_s": emitted / self.sample_rate,
            "num_sentences": pieces,
        }
        if upstream is not None:
            data["voice"] = upstream.data.get("voice")
            data.update(_alignment_fields(upstream.data))
            return _with_data(upstream, data)
        return StagePayload(request_id=ctx.request_id, data=data)

    def _emit(self, ctx: StageContext, audio: torch.Tensor, marks: list[dict[str, Any]]) -> int:
        if audio.numel() == 0:
            return 0
        out: dict[str, Any] = {"audio": self.normalizer.apply(audio).contiguous(), "sample_rate": self.sample_rate}
        if marks:  # the engine's word events ride along for the aligner stage (a client ignores them when it is off)
            out["word_marks"] = {"rate": marks[0]["rate"], "words": [w for m in marks for w in m["words"]]}
            marks.clear()
        ctx.emit(out)
        return int(audio.numel())


def word_marks(sentence: str, speech: Synthesis, offset: int) -> dict[str, Any]:
    """The sentence's words as libespeak-ng spoke them: ``[word, start, end]`` in samples at ``rate``
    counted from the request's first sample (``offset`` is where this sentence starts)."""
    words = [
        [sentence[mark.char_start : mark.char_start + mark.char_length], offset + mark.start, offset + mark.end]
        for mark in speech.words
    ]
    return {"rate": speech.sample_rate, "words": [w for w in words if w[0].strip()]}


def _alignment_fields(data: dict[str, Any]) -> dict[str, Any]:
    """What an aligner stage after the vocoder needs from the request: the words spoken and whether to time them."""
    fields = {key: data[key] for key in ("timestamps",) if data.get(key) is not None}
    text = data.get("normalized_text") or data.get("text")
    if isinstance(text, str):
        fields["normalized_text"] = text
    return fields


def build_preprocessing(max_sentence_chars: int = 300) -> Preprocessing:
    if max_sentence_chars < 20:
        raise StageConfigError("max_sentence_chars", max_sentence_chars, "a sentence piece must hold at least 20 characters", "set it to 20 or more (300 is the default)")
    return Preprocessing(max_sentence_chars)


def build_tts_engine(default_voice: str = "en-us", words_per_minute: int = RATE_NORMAL) -> TtsEngine:
    engine = get_engine()
    # Select the default voice now, so a wrong factory argument fails at startup, not per request.
    try:
        engine.synthesize("", voice=default_voice)
    except UnknownVoiceError:
        raise StageConfigError(
            "default_voice",
            default_voice,
            "the voice must be installed with espeak-ng (its voice data comes with espeakng-loader)",
            "use an espeak-ng voice name such as 'en-us', 'en' (British), 'en-GB-x-rp' or 'en-us+f3' (a variant)",
        ) from None
    return TtsEngine(engine, default_voice, words_per_minute)


def build_vocoder(sample_rate: int = 24000, target_rms_dbfs: float = -20.0, peak_ceiling: float = 0.97, num_threads: int | None = 1) -> Vocoder:
    """``num_threads``: torch's intra-op threads in the vocoder's process. Resampling and levelling
    one sentence are a few element-wise passes over ~100k samples; split across busy cores they
    waited for each other: measured on the 2-core machine at load ~6, one sentence took 90-400 ms
    with torch's default (2 threads) and 1-5 ms with 1, and that wait sat in front of every first chunk."""
    if num_threads is not None:
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
            raise StageConfigError("num_threads", num_threads, "torch's CPU threads in the vocoder's process: a positive integer or null",
                                   "set num_threads to 1 (the default) or more, or null to keep torch's default")
        torch.set_num_threads(num_threads)
    return Vocoder(sample_rate, LevelNormalizer(sample_rate, target_rms_dbfs=target_rms_dbfs, peak_ceiling=peak_ceiling))
