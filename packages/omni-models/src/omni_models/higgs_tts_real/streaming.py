"""The streaming vocoder of Higgs-TTS: chunked decoding of a non-causal codec decoder.

Every conv of the Higgs Audio v2 decoder is centred, so a frame's samples depend on frames on
both sides. A chunk is therefore decoded with ``left`` frames of already-emitted context before
it (the published streaming vocoder's overlap of 8 frames) and ``right`` frames held back after
it (its hold-back of 4): the held-back frames are decoded as right context now and emitted with
the next chunk, and the last chunk of a request is flushed without. Measured on the parity
checkpoint, decoding without the right context leaves a transient in the last frame of every
chunk as large as the signal; with it, streamed samples stay within float error of a full
decode (see the parity table in the README).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

import torch

from omni_models.common.stages import CodecVocoder, is_cancelled, require


class LookaheadDecode:
    """One request's chunked decode: ``push`` latents ``[dim, n]`` -> the samples that are final."""

    def __init__(self, run: Callable[[torch.Tensor], torch.Tensor], hop: int, left: int, right: int):
        self.run, self.hop, self.left, self.right = run, hop, left, right
        self.context: torch.Tensor | None = None
        self.pending: torch.Tensor | None = None

    @torch.inference_mode()
    def push(self, latents: torch.Tensor | None, *, final: bool = False) -> torch.Tensor | None:
        parts = [p for p in (self.pending, latents) if p is not None and p.shape[-1]]
        if not parts:
            return None
        pending = torch.cat(parts, dim=-1)
        ready = pending.shape[-1] if final else pending.shape[-1] - self.right
        if ready <= 0:
            self.pending = pending
            return None
        window = pending if self.context is None else torch.cat([self.context, pending], dim=-1)
        start = 0 if self.context is None else self.context.shape[-1]
        audio = self.run(window)[:, start * self.hop : (start + ready) * self.hop]
        emitted = window[:, : start + ready]
        self.context = emitted[:, -self.left :] if self.left else None
        self.pending = pending[:, ready:]
        return audio


class HiggsVocoder(CodecVocoder):
    """``CodecVocoder`` with ``LookaheadDecode``: same batching across requests (``combiner``),
    same audio chunks to the client, one extra flush at the end of each request."""

    def __init__(self, *, right_frames: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.right_frames = right_frames

    def _decode(self, chunks: Iterable[dict[str, Any]], ctx: Any) -> tuple[int, int]:
        run = self.combiner if self.combiner is not None else self.decoder
        stream = LookaheadDecode(run, self.decoder.hop, self.decoder.context_frames, self.right_frames)
        to_latents = None
        frames = samples = 0
        for chunk in itertools.chain(chunks, [None]):  # None: the end, flush the held-back frames
            if chunk is not None and is_cancelled(ctx):
                return frames, samples
            if chunk is None:
                audio = stream.push(None, final=True)
            else:
                codes = require(chunk, self.key, self.model, self.stage)
                to_latents = to_latents or self.frontend(chunk)
                with torch.inference_mode():
                    audio = stream.push(to_latents(codes.to(self.device)))
                frames += codes.shape[1]
            if audio is not None and audio.shape[-1]:
                samples += audio.shape[-1]
                ctx.emit({"audio": self.audio.shape(audio), "sample_rate": self.audio.sample_rate})
        return frames, samples
