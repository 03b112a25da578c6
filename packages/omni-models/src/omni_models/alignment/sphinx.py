"""Forced alignment with PocketSphinx: the words of a known text placed in its audio.

The PyPI package ``pocketsphinx`` ships a US-English acoustic model and a
pronouncing dictionary inside its wheel, so this aligner runs on the CPU with
nothing to download (``pip install 'omni-models[align]'``). An operator with a
better model gives a directory in PocketSphinx's layout instead (an acoustic
model folder holding ``mdef`` and a ``*.dict`` pronouncing dictionary beside it).
Words the dictionary lacks cannot be aligned and are left out of the result.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soxr

from omni_runtime import StageConfigError

RATE = 16000
FRAMES_PER_SECOND = 100
_WORD = re.compile(r"[a-z0-9']+")


@dataclass(frozen=True)
class TimedWord:
    word: str
    start: float
    end: float


def model_files(model_dir: str | None) -> tuple[str, str] | None:
    """``(acoustic model folder, dictionary)`` of ``model_dir``; None means the packaged en-us model."""
    if model_dir is None:
        return None
    root = Path(model_dir)
    acoustic = next((p.parent for p in sorted(root.rglob("mdef"))), None)
    dictionary = next(iter(sorted(root.rglob("*.dict"))), None)
    if not root.is_dir() or acoustic is None or dictionary is None:
        raise StageConfigError(
            "model_dir", model_dir, "a PocketSphinx model directory holds an acoustic model folder (with 'mdef') and a '*.dict' pronouncing dictionary",
            "point model_dir at such a directory, or leave it null for the US-English model inside the pocketsphinx package",
        )
    return str(acoustic), str(dictionary)


class SphinxAligner:
    """One PocketSphinx decoder per call (decoders are not thread-safe); the model files are read once by the OS cache."""

    def __init__(self, model_dir: str | None) -> None:
        try:
            import pocketsphinx  # noqa: F401
        except ImportError:
            raise StageConfigError("method", "forced", "forced alignment needs the package 'pocketsphinx'",
                                   "pip install 'omni-models[align]', or use method: events with a pipeline whose engine reports its words") from None
        self._files = model_files(model_dir)
        self._lock = threading.Lock()

    def _decoder(self, wide: bool):  # noqa: ANN202 - pocketsphinx has no type stubs
        from pocketsphinx import Decoder

        beams = {"beam": 1e-100, "wbeam": 1e-80, "pbeam": 1e-100} if wide else {}
        if self._files is None:
            return Decoder(samprate=RATE, loglevel="FATAL", **beams)
        hmm, dictionary = self._files
        return Decoder(samprate=RATE, hmm=hmm, dict=dictionary, loglevel="FATAL", **beams)

    def align(self, audio: np.ndarray, sample_rate: int, text: str) -> list[TimedWord]:
        """The words of ``text`` the decoder finds in ``audio`` (float mono), with start and end seconds.

        PocketSphinx's alignment search sometimes ends off its grammar (no result at all) on clean
        synthetic audio; measured on espeak speech, a faint seeded dither (-80 dBFS) and wider beams
        make it find the path, so it tries the default beams, then the wide ones, and keeps the
        attempt that placed the most words. The same audio always gives the same words."""
        with self._lock:
            decoders = [self._decoder(False), self._decoder(True)]
        words = [w for w in _WORD.findall(text.lower()) if decoders[0].lookup_word(w) is not None]
        if not words or audio.size == 0:
            return []
        pcm = soxr.resample(audio.astype(np.float32), sample_rate, RATE) if sample_rate != RATE else audio.astype(np.float32)
        peak = float(np.abs(pcm).max()) if pcm.size else 0.0
        if peak > 0:
            pcm = pcm * (0.9 / peak)
        pcm = pcm + np.random.default_rng(0).normal(0.0, 1e-4, pcm.shape).astype(np.float32)
        raw = (np.clip(pcm, -1.0, 1.0) * 32767).astype(np.int16).tobytes()
        best: list[TimedWord] = []
        for decoder in decoders:
            found = _run(decoder, " ".join(words), raw)
            if len(found) > len(best):
                best = found
            if len(best) == len(words):
                break
        return best


def _run(decoder, words: str, raw: bytes) -> list[TimedWord]:  # noqa: ANN001
    decoder.set_align_text(words)
    decoder.start_utt()
    decoder.process_raw(raw, full_utt=True)
    decoder.end_utt()
    out = []
    for seg in decoder.seg() or []:
        if seg.word.startswith(("<", "[")):
            continue
        word = seg.word.split("(", 1)[0]  # alternate pronunciations are named word(2)
        out.append(TimedWord(word, seg.start_frame / FRAMES_PER_SECOND, (seg.end_frame + 1) / FRAMES_PER_SECOND))
    return out
