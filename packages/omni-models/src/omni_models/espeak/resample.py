"""Streaming polyphase windowed-sinc resampling (22,050 Hz -> 24,000 Hz for espeak).

The vocoder receives one sentence at a time and must emit audio as it goes, so
the resampler keeps the filter's history between chunks: feeding a signal in
pieces gives exactly the samples that resampling it whole gives. The filter is a
Kaiser-windowed sinc with its cut-off just below the lower Nyquist frequency, one
phase per output position between input samples (rational ratio L/M), each phase
normalised to unit DC gain.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _kaiser(x: torch.Tensor, beta: float) -> torch.Tensor:
    inside = x.abs() < 1.0
    arg = torch.sqrt(torch.clamp(1.0 - x * x, min=0.0))
    window = torch.special.i0(beta * arg) / torch.special.i0(torch.tensor(beta, dtype=x.dtype))
    return torch.where(inside, window, torch.zeros_like(x))


class StreamingResampler:
    """Resample a mono float stream from ``rate_in`` to ``rate_out`` chunk by chunk."""

    def __init__(self, rate_in: int, rate_out: int, *, zero_crossings: int = 16, rolloff: float = 0.945, beta: float = 8.6):
        if rate_in <= 0 or rate_out <= 0:
            raise ValueError(f"sample rates must be positive, got {rate_in} -> {rate_out}")
        g = math.gcd(rate_in, rate_out)
        self.rate_in, self.rate_out = rate_in, rate_out
        self.up, self.down = rate_out // g, rate_in // g
        # Cut-off relative to the input Nyquist frequency: below both Nyquist rates.
        cutoff = rolloff * min(1.0, self.up / self.down)
        self._half = math.ceil(zero_crossings / cutoff)
        offsets = torch.arange(-self._half + 1, self._half + 1, dtype=torch.float64)
        fractions = torch.arange(self.up, dtype=torch.float64) / self.up
        distance = offsets[None, :] - fractions[:, None]
        table = cutoff * torch.sinc(cutoff * distance) * _kaiser(distance / self._half, beta)
        table = table / table.sum(dim=1, keepdim=True)
        # Polyphase form: output n = q*up + r reads input from q*down + (r*down)//up with the
        # filter of phase (r*down) % up, so one strided convolution yields a whole cycle of
        # `up` outputs per `down` inputs. Each output channel r holds its phase's filter at its offset.
        residues = torch.arange(self.up, dtype=torch.int64)
        starts = (residues * self.down) // self.up
        phases = (residues * self.down) % self.up
        taps = 2 * self._half
        self._kernel_size = int(starts.max()) + taps
        weight = torch.zeros(self.up, 1, self._kernel_size, dtype=torch.float64)
        for r in range(self.up):
            weight[r, 0, int(starts[r]) : int(starts[r]) + taps] = table[int(phases[r])]
        self._weight = weight.to(torch.float32)
        # History starts with the zero padding in front of sample 0.
        self._buffer = torch.zeros(self._half - 1, dtype=torch.float32)
        self._buffer_start = -(self._half - 1)
        self._received = 0
        self._produced = 0
        self._flushed = False

    @property
    def delay_samples(self) -> int:
        """Input samples of look-ahead the filter needs before it can emit an output sample."""
        return self._half

    def output_length(self, input_length: int) -> int:
        return -(-input_length * self.up // self.down)

    def _emit_until(self, end: int) -> torch.Tensor:
        if end <= self._produced:
            return torch.zeros(0, dtype=torch.float32)
        first_cycle, last_cycle = self._produced // self.up, (end - 1) // self.up
        cycles = last_cycle - first_cycle + 1
        # Input index of cycle q's first tap: q*down - (half - 1).
        begin = first_cycle * self.down - (self._half - 1) - self._buffer_start
        needed = (cycles - 1) * self.down + self._kernel_size
        window = self._buffer[begin : begin + needed]
        if window.shape[0] < needed:
            # Outputs past `end` would read future input; they are computed on zeros and dropped.
            window = torch.cat([window, torch.zeros(needed - window.shape[0], dtype=window.dtype)])
        out = F.conv1d(window.view(1, 1, -1), self._weight, stride=self.down)  # [1, up, cycles]
        out = out[0].transpose(0, 1).reshape(-1)
        offset = self._produced - first_cycle * self.up
        out = out[offset : offset + end - self._produced]
        self._produced = end
        keep_from = (end // self.up) * self.down - (self._half - 1)
        drop = max(0, keep_from - self._buffer_start)
        if drop:
            self._buffer = self._buffer[drop:]
            self._buffer_start += drop
        return out.contiguous()

    def process(self, chunk: torch.Tensor) -> torch.Tensor:
        """Feed input samples; returns every output sample that no longer depends on future input."""
        if self._flushed:
            raise RuntimeError("process() after flush(): create a new resampler per stream")
        chunk = torch.as_tensor(chunk).to(torch.float32).reshape(-1)
        self._buffer = torch.cat([self._buffer, chunk])
        self._received += chunk.shape[0]
        last_ready = self._received - 1 - self._half
        end = -(-(last_ready + 1) * self.up // self.down) if last_ready >= 0 else 0
        return self._emit_until(min(end, self.output_length(self._received)))

    def flush(self) -> torch.Tensor:
        """End of stream: the remaining samples, computed against zero padding."""
        if self._flushed:
            return torch.zeros(0, dtype=torch.float32)
        self._flushed = True
        self._buffer = torch.cat([self._buffer, torch.zeros(self._half, dtype=torch.float32)])
        return self._emit_until(self.output_length(self._received))


def resample(signal: torch.Tensor, rate_in: int, rate_out: int) -> torch.Tensor:
    """One-shot resampling with the same filter as the streaming form."""
    resampler = StreamingResampler(rate_in, rate_out)
    return torch.cat([resampler.process(signal), resampler.flush()])
