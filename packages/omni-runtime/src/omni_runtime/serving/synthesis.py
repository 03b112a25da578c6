"""Turn one runtime request into audio, shared by the HTTP API and ``omni synthesize``.

Under the stage contract a terminal stage either streams its audio with
``ctx.emit`` (then the audio is the concatenation of the chunks) or returns it
in its final payload. :func:`audio_parts` hides that difference and always
awaits the final result, so a stage failure surfaces even after chunks came.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from .audio import AudioError, PcmAudio, concat, to_pcm16
from .timestamps import WordLog


def chunk_audio(chunk: Mapping[str, Any], where: str) -> PcmAudio:
    if not isinstance(chunk, Mapping) or "audio" not in chunk or "sample_rate" not in chunk:
        keys = sorted(chunk) if isinstance(chunk, Mapping) else type(chunk).__name__
        raise AudioError(f"{where} must carry 'audio' and 'sample_rate' (stage contract, terminal output); got {keys}")
    try:
        return to_pcm16(chunk["audio"], chunk["sample_rate"])
    except AudioError as exc:
        raise AudioError(f"{where}: {exc}") from None


async def audio_parts(handle: Any, words: WordLog | None = None) -> AsyncIterator[PcmAudio]:
    """Yield the request's audio in order: streamed chunks, else the final payload's audio.

    ``words`` collects the aligner's word timestamps as the chunks carrying them pass."""
    streamed = False
    async for chunk in handle.stream():
        streamed = True
        if words is not None:
            words.chunk(chunk)
        yield chunk_audio(chunk, "a streamed terminal chunk")
    result = await handle.result()
    if words is not None:
        words.result(result)
    if not streamed:
        yield chunk_audio(result, "the terminal stage's final payload")


async def collect_audio(handle: Any, words: WordLog | None = None) -> PcmAudio:
    """The whole request's audio as one buffer."""
    return concat([part async for part in audio_parts(handle, words)])
