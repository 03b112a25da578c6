"""libespeak-ng through ctypes: real speech synthesis for the reference pipeline.

The library comes from the PyPI package ``espeakng-loader`` (shared object and
voice data). libespeak-ng keeps one global synthesiser per process with one
global callback, so it is not thread-safe: every call goes through
:class:`EspeakEngine`, which serialises them with a lock, and the engine itself
is a per-process singleton (:func:`get_engine`).
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import threading
from dataclasses import dataclass

import torch

from omni_runtime.errors import InvalidRequest

from .state import StateReset

log = logging.getLogger(__name__)

# speak_lib.h constants (API revision 12).
AUDIO_OUTPUT_SYNCHRONOUS = 2
POS_CHARACTER = 1
ESPEAK_CHARS_UTF8 = 1
ESPEAK_ENDPAUSE = 0x1000
ESPEAK_RATE = 1
ESPEAK_INITIALIZE_PHONEME_EVENTS = 0x0001
EVENT_LIST_TERMINATED, EVENT_WORD, EVENT_END, EVENT_PHONEME = 0, 1, 5, 7
EE_OK = 0
EE_NOT_FOUND = 2
RATE_MIN, RATE_MAX, RATE_NORMAL = 80, 450, 175



class _Event(ctypes.Structure):
    """``espeak_EVENT`` of speak_lib.h: in synchronous mode ``sample`` is the event's exact sample index."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", ctypes.c_char * 8),
    ]


_SYNTH_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event))


@dataclass(frozen=True)
class WordMark:
    """Where libespeak-ng spoke one word of the text: its characters and its samples.

    ``start`` is the sample of espeak's word event, ``end`` the sample where the word's last
    phoneme ends (the next pause, word or end of the utterance), both at the engine's rate."""

    char_start: int
    """0-based index of the word's first character in the synthesised text."""
    char_length: int
    start: int
    end: int


class EspeakError(RuntimeError):
    """libespeak-ng could not be loaded or refused a call."""


class UnknownVoiceError(InvalidRequest):
    """The requested voice is not in the installed espeak-ng data (the client's mistake: HTTP 400)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, param="voice")


@dataclass(frozen=True)
class Synthesis:
    """One utterance: mono int16 PCM at ``sample_rate``."""

    pcm: torch.Tensor
    """int16, shape ``[samples]``."""
    sample_rate: int
    words: tuple[WordMark, ...] = ()
    """Every spoken word, in order, from libespeak-ng's own word and phoneme events."""

    @property
    def duration_s(self) -> float:
        return self.pcm.shape[0] / self.sample_rate


def _load_library() -> tuple[ctypes.CDLL, str, str]:
    try:
        import espeakng_loader
    except ImportError as exc:  # pragma: no cover - declared dependency
        raise EspeakError("the espeak reference pipeline needs the package 'espeakng-loader': pip install espeakng-loader") from exc
    lib_path = espeakng_loader.get_library_path()
    data_path = espeakng_loader.get_data_path()
    try:
        lib = ctypes.CDLL(lib_path)
    except OSError as exc:
        raise EspeakError(f"cannot load libespeak-ng from {lib_path}: {exc}") from exc
    lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.espeak_Initialize.restype = ctypes.c_int
    lib.espeak_SetSynthCallback.argtypes = [_SYNTH_CALLBACK]
    lib.espeak_SetSynthCallback.restype = None
    lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
    lib.espeak_SetVoiceByName.restype = ctypes.c_int
    lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.espeak_SetParameter.restype = ctypes.c_int
    lib.espeak_Synth.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_uint,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    lib.espeak_Synth.restype = ctypes.c_int
    # espeak_Initialize wants the directory that *contains* espeak-ng-data.
    return lib, os.path.dirname(data_path), lib_path


class EspeakEngine:
    """The process's libespeak-ng synthesiser in synchronous retrieval mode."""

    def __init__(self) -> None:
        self._lib, data_dir, lib_path = _load_library()
        self._lock = threading.Lock()
        self._sink: list[bytes] | None = None
        self._abort = False
        self._events: list[tuple[int, int, int, int, bytes]] | None = None
        # phoneme events tell where each word ends (the next pause phoneme); they do not change the audio
        sample_rate = self._lib.espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, data_dir.encode(), ESPEAK_INITIALIZE_PHONEME_EVENTS)
        if sample_rate <= 0:
            raise EspeakError(f"espeak_Initialize failed (returned {sample_rate}) with data directory {data_dir}")
        self.sample_rate = sample_rate
        # Keep a reference: ctypes frees the trampoline when the Python object dies.
        self._callback = _SYNTH_CALLBACK(self._on_audio)
        self._lib.espeak_SetSynthCallback(self._callback)
        self._voice: str | None = None
        # taken before the first utterance: every request starts from this state (identical requests, identical audio)
        self._fresh = StateReset(lib_path)
        if not self._fresh.available:
            log.warning("libespeak-ng's generator state cannot be reset per request (%s): identical requests may get slightly different audio",
                        f"symbols not found: {', '.join(self._fresh.missing)}" if self._fresh.missing else "no symbol table")

    def _on_audio(self, wav: ctypes.POINTER(ctypes.c_short), numsamples: int, events: ctypes.POINTER(_Event)) -> int:
        # NULL wav marks the end of synthesis; numsamples may be 0 mid-stream.
        if events and self._events is not None:
            index = 0
            while events[index].type != EVENT_LIST_TERMINATED:
                event = events[index]
                self._events.append((event.type, event.text_position, event.length, event.sample, bytes(event.id)))
                index += 1
        if wav and numsamples > 0 and self._sink is not None:
            self._sink.append(ctypes.string_at(wav, numsamples * ctypes.sizeof(ctypes.c_short)))
        return 1 if self._abort else 0

    def _select_voice(self, voice: str) -> None:
        if voice == self._voice:
            return
        status = self._lib.espeak_SetVoiceByName(voice.encode())
        if status == EE_NOT_FOUND:
            raise UnknownVoiceError(
                f"voice {voice!r} is not an espeak-ng voice; use an espeak-ng voice name such as 'en-us', 'en' (British), 'en-GB-x-rp' or 'en-us+f3' (a variant)"
            )
        if status != EE_OK:
            raise EspeakError(f"espeak_SetVoiceByName({voice!r}) failed with status {status}")
        self._voice = voice

    def synthesize(self, text: str, *, voice: str = "en-us", words_per_minute: float = RATE_NORMAL) -> Synthesis:
        """Speak ``text`` (one sentence or more) and return its PCM. Serialised across threads."""
        rate = max(RATE_MIN, min(RATE_MAX, round(float(words_per_minute))))
        encoded = text.encode("utf-8") + b"\0"
        with self._lock:
            self._fresh.restore()
            self._voice = None  # selecting the voice again resets the voice-dependent state
            self._select_voice(voice)
            status = self._lib.espeak_SetParameter(ESPEAK_RATE, rate, 0)
            if status != EE_OK:
                raise EspeakError(f"espeak_SetParameter(rate={rate}) failed with status {status}")
            self._sink = []
            self._events = []
            try:
                status = self._lib.espeak_Synth(encoded, len(encoded), 0, POS_CHARACTER, 0, ESPEAK_CHARS_UTF8 | ESPEAK_ENDPAUSE, None, None)
                chunks, events = self._sink, self._events
            finally:
                self._sink = self._events = None
        if status != EE_OK:
            raise EspeakError(f"espeak_Synth failed with status {status} for text {text[:60]!r}")
        raw = bytearray(b"".join(chunks or []))
        pcm = torch.frombuffer(raw, dtype=torch.int16) if raw else torch.zeros(0, dtype=torch.int16)
        return Synthesis(pcm=pcm, sample_rate=self.sample_rate, words=word_marks(events or [], pcm.shape[0]))


def word_marks(events: list[tuple[int, int, int, int, bytes]], total_samples: int) -> tuple[WordMark, ...]:
    """Words from libespeak-ng's event list ``(type, text_position, length, sample, id)``.

    A word starts at its word event and ends where the first pause phoneme (``_``, ``_:``...),
    the next word or the end of the utterance comes after it; ``text_position`` is 1-based."""
    marks: list[WordMark] = []
    open_word: tuple[int, int, int] | None = None

    def close(at: int) -> None:
        nonlocal open_word
        if open_word is not None:
            char_start, length, start = open_word
            end = max(start, min(at, total_samples))
            marks.append(WordMark(char_start, length, min(start, total_samples), end))
            open_word = None

    for kind, position, length, sample, ident in events:
        if kind == EVENT_WORD:
            close(sample)
            if length > 0:
                open_word = (max(0, position - 1), length, sample)
        elif kind == EVENT_PHONEME and ident.startswith(b"_"):
            close(sample)
        elif kind == EVENT_END:
            close(sample)
    close(total_samples)
    return tuple(marks)


@functools.cache
def get_engine() -> EspeakEngine:
    """The per-process engine (libespeak-ng is a process-wide singleton), loaded on first use."""
    return EspeakEngine()
