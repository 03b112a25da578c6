"""The preprocessing stage of the models whose next stage encodes a reference recording.

Higgs-TTS, FishAudio S2-Pro, Ming-Omni-TTS, Audar-TTS and Zonos2 all prepare the same two
things: the text request (normalised text, token ids, duration limits, voice, seed) and the
client's reference recording resampled for the encoder that follows, with the server's voice key
(``voice_key``/``voices_dir``) passed on so that encoder reads and fills the voice cache
(``voice_cache``). Everything travels in
``StagePayload.data``, so the edge after this stage may cross processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .audio import reference_audio
from .request import prepare_text_request
from .stages import with_data
from .voice_cache import voice_fields


@dataclass(frozen=True)
class ReferencePreprocessing:
    """``process`` returns the text request's fields plus ``ref_wave`` at ``ref_sample_rate`` (None for a
    preset voice, or for an uploaded voice whose artefacts the encoder stage already has)."""

    frame_rate: float
    ref_sample_rate: int
    max_chars: int
    max_seconds: float

    def process(self, payload: Any, ctx: Any = None) -> Any:
        request = prepare_text_request(payload.data, frame_rate=self.frame_rate, max_chars=self.max_chars, max_seconds=self.max_seconds)
        ref_wave = reference_audio(payload.data, self.ref_sample_rate)
        return with_data(payload, {**request.to_data(), "ref_wave": ref_wave, **voice_fields(payload.data)})
