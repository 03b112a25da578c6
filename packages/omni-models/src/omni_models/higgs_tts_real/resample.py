"""Band-limited resampling by windowed-sinc interpolation (Hann window), as the Higgs Audio v2
tokenizer resamples its input for the semantic model.

The ratio is reduced by the gcd; each of the ``new`` output phases gets its own kernel of
``2 * width + orig`` taps (a sinc low-passed at ``rolloff * min(orig, new)``, zeros
``lowpass_filter_width`` lobes out, tapered by a Hann window), applied as one strided
convolution. The output has ``ceil(new * samples / orig)`` samples.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _kernels(orig: int, new: int, width_lobes: int, rolloff: float, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, int]:
    base = min(orig, new) * rolloff
    width = math.ceil(width_lobes * orig / base)
    taps = torch.arange(-width, width + orig, dtype=torch.float64, device=device)[None, None] / orig
    phases = -torch.arange(0, new, dtype=torch.float64, device=device)[:, None, None] / new
    t = ((phases + taps) * base).clamp(-width_lobes, width_lobes)
    window = torch.cos(t * math.pi / width_lobes / 2) ** 2
    t = t * math.pi
    sinc = torch.where(t == 0, torch.ones_like(t), torch.sin(t) / t)
    return (sinc * window * base / orig).to(dtype), width


def resample(wave: torch.Tensor, orig: int, new: int, *, lowpass_filter_width: int = 6, rolloff: float = 0.99) -> torch.Tensor:
    """``[..., samples]`` at ``orig`` Hz -> ``[..., ceil(new * samples / orig)]`` at ``new`` Hz."""
    if orig == new:
        return wave
    g = math.gcd(int(orig), int(new))
    orig, new = int(orig) // g, int(new) // g
    kernels, width = _kernels(orig, new, lowpass_filter_width, rolloff, wave.dtype, wave.device)
    shape = wave.shape
    x = wave.reshape(-1, 1, shape[-1])
    out = F.conv1d(F.pad(x, (width, width + orig)), kernels, stride=orig)
    out = out.transpose(1, 2).reshape(x.shape[0], -1)
    return out[:, : math.ceil(new * shape[-1] / orig)].reshape(*shape[:-1], -1)
