"""Qwen3-TTS 12 Hz stages over a published checkpoint (Base, CustomVoice, VoiceDesign).

preprocessing  request fields checked against the variant, text/instruction/reference transcript
               tokenised with the checkpoint's tokenizer, the Base x-vector (speaker encoder) and,
               for in-context cloning, the reference frames (codec encoder), both computed once per
               uploaded or inline voice and then read from the voice cache; the prepared request
               stays in ``_PREPARED_REQUESTS`` (process-local, ``handoff``); its ``append`` hook
               takes text for a request submitted with ``input_open: true`` (``append.py``)
tts_engine     talker + code predictor under the continuous-batching scheduler; code chunks
               stream to the vocoder
vocoder        the 12 Hz codec decoder, streaming: each chunk decoded with the reference's 25
               frames of left context (the cloning reference's frames first), chunks of several
               requests of one shape in one forward
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import soxr
import torch

from omni_models.common.audio import _decode_wav
from omni_models.common.combine import Combiner
from omni_models.common.parallel import process_shard
from omni_models.common.playback import PlaybackClock, Schedule, decode_turn, vocoder_gate
from omni_models.common.scheduler import DEFAULT_MAX_BATCH_SIZE, BatchLimits
from omni_models.common.stages import AudioFormat, is_cancelled, require, with_data
from omni_models.common.voice_cache import VOICE_KEY, reference_artefacts
from omni_models.common.weights import DEFAULT_SEED, resolve_device
from omni_runtime.errors import InvalidRequest

from . import tp
from .append import OPEN_TEXTS, OpenText, appended_text
from .batch import TalkerBatch
from .codec import REFERENCE_LEFT_CONTEXT, CodecDecoder
from .encoder import ReferenceEncoder, clone_support_problem
from .engine import TalkerEngine
from .handoff import MODEL, PreparedRequest, PreprocessingContext, preprocessing_context, put_prepared, register_context, take_prepared
from .model import Checkpoint, dtype_of
from .prompt import PromptInputs, body_ids
from .request import MAX_CHARS, parse_request
from .spec import CheckpointError
from .talker import Talker
from .text import TextTokenizer, assistant_text, instruct_text, reference_text

MAX_REFERENCE_SECONDS = 30.0
REQUEST_LIMITS = {"max_input_chars": MAX_CHARS}
"""Reported to the server at ready (omni_runtime.worker.facts): it refuses a longer text itself, as parse_request would."""


def open_checkpoint(load_format: str, model_path: str | None, num_threads: int | None) -> Checkpoint:
    if load_format != "safetensors" or not model_path:
        raise CheckpointError(
            f"{MODEL}: load_format {load_format!r} with model_path {model_path!r}\n"
            "  rule: this pipeline serves a published Qwen3-TTS 12 Hz checkpoint, never random weights\n"
            "  fix:  omni serve --model Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice --weights DIR (or the checkpoint in the Hugging Face cache)"
        )
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    return Checkpoint.open(model_path)


def reference_wave(data: dict[str, Any], rate: int) -> torch.Tensor:
    """``ref_audio`` (WAV bytes, or the float tensor ``[channels, samples]`` with ``ref_sample_rate`` that
    ``omni serve`` decodes any upload or inline recording to) as mono float32 at ``rate``, resampled
    like the reference (soxr HQ)."""
    raw = data.get("ref_audio")
    if isinstance(raw, torch.Tensor):
        source = data.get("ref_sample_rate")
        if isinstance(source, bool) or not isinstance(source, int) or source <= 0:
            raise InvalidRequest(f"ref_sample_rate must be a positive integer with a tensor ref_audio, got {source!r}", param="ref_sample_rate")
        audio = raw.detach().to(torch.float32).cpu().reshape(-1 if raw.dim() == 1 else raw.shape[0], raw.shape[-1])
    elif isinstance(raw, (bytes, bytearray)):
        audio, source = _decode_wav(bytes(raw))
    else:
        raise InvalidRequest("ref_audio must be a base64-encoded WAV file", param="ref_audio")
    if audio.shape[-1] == 0 or audio.shape[-1] / source > MAX_REFERENCE_SECONDS or not torch.isfinite(audio).all():
        raise InvalidRequest(f"ref_audio must hold between 0 and {MAX_REFERENCE_SECONDS:.0f} s of finite audio", param="ref_audio")
    mono = audio.mean(dim=0)
    if source != rate:
        mono = torch.from_numpy(soxr.resample(mono.numpy(), source, rate, quality="HQ")).float()
    return mono


class Preprocessing:
    def __init__(self, checkpoint: Checkpoint, device: str, max_new_tokens: int):
        self.checkpoint, self.device, self.max_new_tokens = checkpoint, device, max_new_tokens
        spec = checkpoint.model
        self.tokenizer = TextTokenizer(checkpoint.directory)
        self.speaker_encoder = checkpoint.speaker_encoder(device) if spec.variant == "base" else None
        self._reference_encoder: ReferenceEncoder | None = None
        self._encoder_lock = threading.Lock()

    def reference_encoder(self) -> ReferenceEncoder:
        """The codec encoder (Base in-context cloning), loaded on the first request that needs it."""
        with self._encoder_lock:
            if self._reference_encoder is None:
                self._reference_encoder = ReferenceEncoder(self.checkpoint.codec, self.checkpoint.directory, self.device)
            return self._reference_encoder

    def reference(self, data: dict[str, Any], icl: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The Base reference's x-vector (speaker encoder) and, for in-context cloning, its codec frames.

        A voice the server keyed (uploaded, or inline ``ref_audio``) is encoded once, with its
        frames whenever this server can clone in context (so a later ICL request finds them), and
        then read from the voice cache."""
        rate = self.checkpoint.model.speaker_encoder.sample_rate
        codec_rate = self.checkpoint.codec.input_sample_rate

        def encode(wave: torch.Tensor) -> dict[str, torch.Tensor]:
            found = {"x_vector": self.speaker_encoder.embed(wave)}
            if (icl or VOICE_KEY in data) and clone_support_problem() is None:
                found["ref_codes"] = self.reference_encoder().encode(wave if rate == codec_rate else reference_wave(data, codec_rate))
            return found

        def no_reference() -> dict[str, torch.Tensor]:
            raise InvalidRequest("the Base checkpoint clones a voice: send ref_audio", param="ref_audio")

        wave = None if data.get("ref_audio") is None else reference_wave(data, rate)
        found = reference_artefacts(data, wave, encode, no_reference)
        return found["x_vector"], found.get("ref_codes")

    @torch.inference_mode()
    def prepare(self, data: dict[str, Any]) -> PreparedRequest:
        spec = self.checkpoint.model
        fields = parse_request(data, spec, self.checkpoint.defaults, cap_frames=self.max_new_tokens)
        language_id = None if fields.language == "auto" else spec.languages[fields.language]
        if fields.speaker is not None and fields.language in ("chinese", "auto") and spec.dialects.get(fields.speaker):
            language_id = spec.languages[spec.dialects[fields.speaker]]
        x_vector = ref_codes = ref_ids = None
        if spec.variant == "base":
            icl = not fields.x_vector_only
            x_vector, ref_codes = self.reference(data, icl)  # first: an upload stores its artefacts even where ICL is refused
            if icl:
                problem = clone_support_problem()
                if problem:
                    raise InvalidRequest(f"this server cannot clone in context ({problem}); send x_vector_only_mode true", param="ref_text")
                if ref_codes is None:
                    raise InvalidRequest("this voice was stored without its reference frames (the server could not clone in context then); "
                                         "upload it again or send x_vector_only_mode true", param="voice")
                ref_ids = tuple(self.tokenizer.encode(reference_text(fields.ref_text)))
            else:
                ref_codes = None
        inputs = PromptInputs(
            text_ids=tuple(self.tokenizer.encode(assistant_text(fields.text))),
            instruct_ids=tuple(self.tokenizer.encode(instruct_text(fields.instructions))) if fields.instructions else None,
            language_id=language_id, speaker_id=spec.speakers[fields.speaker] if fields.speaker else None,
            x_vector=None if x_vector is None else x_vector.cpu(), ref_ids=ref_ids, ref_codes=ref_codes,
            non_streaming=spec.variant != "base" and not fields.input_open,  # open input: the streaming-text layout
        )
        return PreparedRequest(fields, inputs, ref_codes)

    def process(self, payload: Any, ctx: Any = None) -> Any:
        prepared = self.prepare(payload.data)
        if prepared.fields.input_open:
            OPEN_TEXTS.register(payload.request_id, OpenText(body_ids(prepared.inputs), len(prepared.fields.text)))
        else:
            OPEN_TEXTS.refuse_early(payload.request_id)
        put_prepared(payload.request_id, prepared)
        return with_data(payload, {"text": prepared.fields.text, "num_input_ids": len(prepared.inputs.text_ids)})


    def append(self, request_id: str, data: Any, final: bool) -> None:
        """More text for a request submitted with ``input_open: true`` (runtime's event loop: tokenising a
        piece is quick); each piece is tokenised on its own (``append.py``)."""
        text = appended_text(data)
        OPEN_TEXTS.append(request_id, self.tokenizer.encode(text) if text else [], len(text), final)


class TTSEngine:
    def __init__(self, engine: TalkerEngine, frame_rate: float):
        self.engine, self.frame_rate = engine, frame_rate

    def process(self, payload: Any, ctx: Any) -> Any:
        prepared = take_prepared(payload.request_id)
        try:
            open_text = OPEN_TEXTS.take(payload.request_id) if prepared.fields.input_open else None
            total = self.engine.stream(prepared, ctx, open_text)
        finally:
            OPEN_TEXTS.end(payload.request_id)
        return with_data(payload, {"num_frames": total, "frame_rate": self.frame_rate})


class Vocoder:
    """Streaming 12 Hz decoder: each chunk with up to ``left_context`` earlier frames (Base ICL:
    the reference's frames first), whose audio is dropped; equal-shape chunks of several requests
    share one forward (``Combiner``). On the CPU under ``scheduler: deadline`` decodes take turns
    by playback deadline (``DecodeGate``): a new stream's first chunk goes before steady chunks
    whose listeners still hold audio, instead of every request's thread re-decoding its left
    context at once on the cores the talker steps on."""

    def __init__(self, decoder: CodecDecoder, device: str, left_context: int, max_batch_size: int | None, scheduler: str = "deadline"):
        self.decoder, self.device, self.left_context = decoder, device, left_context
        spec = decoder.spec
        self.audio = AudioFormat(spec.sample_rate, 1)
        if max_batch_size is None:
            max_batch_size = DEFAULT_MAX_BATCH_SIZE if str(device).startswith("cuda") else 1
        BatchLimits(max_batch_size).check(1, "vocoder")
        self.combiner = Combiner(self._decode_batch, max_batch=max_batch_size) if max_batch_size > 1 else None
        self.gate = vocoder_gate(scheduler, device, self.combiner is not None)

    @torch.inference_mode()
    def _decode_batch(self, codes: torch.Tensor) -> torch.Tensor:
        return self.decoder(codes)

    def _decode(self, window: torch.Tensor, context: int) -> torch.Tensor:
        window = window.to(self.device)
        audio = self.combiner(window) if self.combiner is not None else self._decode_batch(window[None])[0]
        return audio[..., context * self.decoder.total_upsample :]

    def _stream(self, chunks: Any, ctx: Any) -> tuple[int, int]:
        history: torch.Tensor | None = None
        frames = samples = 0
        clock = PlaybackClock()
        for chunk in chunks:
            if is_cancelled(ctx):
                break
            codes = require(chunk, "codes", MODEL, "vocoder").long()
            if history is None:
                context = chunk.get("context_codes")
                history = codes[:, :0] if context is None else context.long()
            left = history[:, max(0, history.shape[1] - self.left_context) :]
            with decode_turn(self.gate, clock):
                audio = self._decode(torch.cat([left, codes], dim=1), left.shape[1])
            clock.played(audio.shape[-1] / self.audio.sample_rate)
            history = torch.cat([history, codes], dim=1)[:, -self.left_context :] if self.left_context else codes[:, :0]
            frames += codes.shape[1]
            samples += audio.shape[-1]
            ctx.emit({"audio": self.audio.shape(audio), "sample_rate": self.audio.sample_rate})
        return frames, samples

    def _summary(self, frames: int, samples: int) -> dict[str, Any]:
        rate = self.audio.sample_rate
        return {"sample_rate": rate, "channels": 1, "num_frames": frames, "num_samples": samples, "duration_s": samples / rate}

    def consume(self, chunks: Any, ctx: Any) -> Any:
        summary = self._summary(*self._stream(chunks, ctx))  # the upstream payload is known once the chunks end
        return with_data(ctx.upstream_payload, summary)


def build_preprocessing(load_format: str = "safetensors", model_path: str | None = None, device: str | None = None,
                        num_threads: int | None = 1, max_new_tokens: int = 4096) -> Preprocessing:
    checkpoint = open_checkpoint(load_format, model_path, num_threads)
    stage = Preprocessing(checkpoint, resolve_device(device), max_new_tokens)
    register_context(PreprocessingContext(Path(checkpoint.directory).resolve()))
    return stage


def build_tts_engine(load_format: str = "safetensors", model_path: str | None = None, device: str | None = None, num_threads: int | None = 1,
                     dtype: str = "float32", seed: int = DEFAULT_SEED, chunk_frames: int = 12, first_chunk_frames: int = 4,
                     max_batch_size: int = DEFAULT_MAX_BATCH_SIZE, max_batch_tokens: int | None = None, max_seq_len: int = 8192,
                     scheduler: str = "deadline", busy_first_chunk_frames: int = 1) -> TTSEngine:
    context = preprocessing_context()
    checkpoint = open_checkpoint(load_format, model_path, num_threads)
    if Path(checkpoint.directory).resolve() != context.directory:
        raise CheckpointError(f"{MODEL}: preprocessing loaded {context.directory}, the engine {checkpoint.directory}\n  fix:  give both stages the same model_path")
    if chunk_frames < 1 or first_chunk_frames < 1:
        raise ValueError(f"chunk_frames and first_chunk_frames must be >= 1, got {chunk_frames} and {first_chunk_frames}")
    shard, group = process_shard(Talker)  # a rank of a TP group holds its slice of the talker's layers
    talker = checkpoint.talker(resolve_device(device), dtype_of(dtype), shard)
    batch = TalkerBatch(talker, max_seq_len) if group is None else tp.engage(TalkerBatch(talker, max_seq_len), group)
    frame_rate = checkpoint.codec.sample_rate / checkpoint.codec.upsample
    engine = TalkerEngine(batch, name=MODEL, limits=BatchLimits(max_batch_size, max_batch_tokens), seed=seed,
                          chunking=(first_chunk_frames, chunk_frames), schedule=Schedule(scheduler, busy_first_chunk_frames, frame_rate=frame_rate))
    return TTSEngine(engine, frame_rate)


def build_vocoder(load_format: str = "safetensors", model_path: str | None = None, device: str | None = None, num_threads: int | None = 1,
                  dtype: str = "float32", left_context_frames: int = REFERENCE_LEFT_CONTEXT, max_batch_size: int | None = None,
                  scheduler: str = "deadline") -> Vocoder:
    checkpoint = open_checkpoint(load_format, model_path, num_threads)
    device = resolve_device(device)
    return Vocoder(checkpoint.codec_decoder(device, dtype_of(dtype)), device, left_context_frames, max_batch_size, scheduler)
