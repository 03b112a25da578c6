"""Level normalisation for streamed speech.

Each chunk is brought to a target loudness measured over its *active* frames
(frames above a gate), so the pauses between sentences do not drag the measure
down, with a peak ceiling so the result never clips. The gain changes only at
chunk boundaries, which in this pipeline fall in the silence between sentences.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def dbfs_to_linear(db: float) -> float:
    return float(10.0 ** (db / 20.0))


@dataclass(frozen=True)
class LevelNormalizer:
    """Gain rule: target RMS of active speech, bounded gain, peak ceiling."""

    sample_rate: int
    target_rms_dbfs: float = -20.0
    gate_dbfs: float = -45.0
    peak_ceiling: float = 0.97
    max_gain: float = 8.0
    min_gain: float = 0.125
    frame_ms: float = 10.0

    def active_rms(self, audio: torch.Tensor) -> float | None:
        """RMS over the frames louder than the gate, or None when the chunk is silence."""
        frame = max(1, int(self.sample_rate * self.frame_ms / 1000))
        usable = audio.shape[0] // frame * frame
        if usable == 0:
            return None
        frames = audio[:usable].to(torch.float64).reshape(-1, frame)
        energy = (frames * frames).mean(dim=1)
        active = energy > dbfs_to_linear(self.gate_dbfs) ** 2
        if not active.any():
            return None
        return float(energy[active].mean().sqrt())

    def gain_for(self, audio: torch.Tensor) -> float:
        rms = self.active_rms(audio)
        if rms is None:
            return 1.0
        gain = min(self.max_gain, max(self.min_gain, dbfs_to_linear(self.target_rms_dbfs) / rms))
        peak = float(audio.abs().max()) if audio.numel() else 0.0
        if peak * gain > self.peak_ceiling:
            gain = self.peak_ceiling / peak
        return gain

    def apply(self, audio: torch.Tensor) -> torch.Tensor:
        out = audio.to(torch.float32) * self.gain_for(audio)
        return out.clamp(-1.0, 1.0)
