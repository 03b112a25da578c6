"""The Base checkpoints' speaker encoder (ECAPA-TDNN) and its log-mel front end.

A reference recording at 24 kHz -> 128-bin log-mel (Slaney filters, 1024-point STFT, hop 256,
reflect padding, no centring) -> TDNN, SE-Res2Net blocks, multi-layer aggregation, attentive
statistics pooling -> an x-vector the size of the talker's hidden state, which the prompt uses
as the speaker's codec embedding. Parameter names follow the published ``speaker_encoder.*``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .spec import SpeakerSpec

N_FFT, HOP, WIN = 1024, 256, 1024


def _hz_to_slaney(hz: torch.Tensor) -> torch.Tensor:
    f_sp, min_log_hz, logstep = 200.0 / 3, 1000.0, math.log(6.4) / 27.0
    linear = hz / f_sp
    return torch.where(hz >= min_log_hz, min_log_hz / f_sp + torch.log(hz.clamp(min=1e-10) / min_log_hz) / logstep, linear)


def _slaney_to_hz(mel: torch.Tensor) -> torch.Tensor:
    f_sp, min_log_hz, logstep = 200.0 / 3, 1000.0, math.log(6.4) / 27.0
    min_log_mel = min_log_hz / f_sp
    return torch.where(mel >= min_log_mel, min_log_hz * torch.exp(logstep * (mel - min_log_mel)), f_sp * mel)


def slaney_filterbank(sample_rate: int, n_fft: int, n_mels: int, fmin: float, fmax: float) -> torch.Tensor:
    """Area-normalised triangular filters on the Slaney mel scale ``[n_mels, n_fft // 2 + 1]`` (float64 maths)."""
    freqs = torch.linspace(0, sample_rate / 2, n_fft // 2 + 1, dtype=torch.float64)
    low, high = _hz_to_slaney(torch.tensor(float(fmin), dtype=torch.float64)), _hz_to_slaney(torch.tensor(float(fmax), dtype=torch.float64))
    edges = _slaney_to_hz(torch.linspace(float(low), float(high), n_mels + 2, dtype=torch.float64))
    widths = edges.diff()
    ramps = edges[:, None] - freqs[None]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = torch.clamp(torch.minimum(lower, upper), min=0)
    return (weights * (2.0 / (edges[2:] - edges[:-2]))[:, None]).float()


def log_mel(wave: torch.Tensor, sample_rate: int, n_mels: int) -> torch.Tensor:
    """``[samples]`` -> ``[frames, n_mels]``."""
    filters = slaney_filterbank(sample_rate, N_FFT, n_mels, 0, sample_rate // 2).to(wave.device)
    pad = (N_FFT - HOP) // 2
    padded = F.pad(wave[None, None], (pad, pad), mode="reflect")[0]
    spec = torch.stft(padded, N_FFT, hop_length=HOP, win_length=WIN, window=torch.hann_window(WIN, device=wave.device), center=False, return_complex=True)
    magnitude = torch.sqrt(torch.view_as_real(spec).pow(2).sum(-1) + 1e-9)
    return torch.log(torch.clamp(filters @ magnitude, min=1e-5))[0].T


def _conv(cin: int, cout: int, kernel: int, dilation: int = 1) -> nn.Conv1d:
    return nn.Conv1d(cin, cout, kernel, dilation=dilation, padding="same", padding_mode="reflect")


class TDNN(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, dilation: int):
        super().__init__()
        self.conv = _conv(cin, cout, kernel, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv(x))


class Res2Net(nn.Module):
    def __init__(self, channels: int, scale: int, kernel: int, dilation: int):
        super().__init__()
        self.scale = scale
        self.blocks = nn.ModuleList(TDNN(channels // scale, channels // scale, kernel, dilation) for _ in range(scale - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = torch.chunk(x, self.scale, dim=1)
        out, previous = [parts[0]], None
        for i, part in enumerate(parts[1:]):
            previous = self.blocks[i](part if previous is None else part + previous)
            out.append(previous)
        return torch.cat(out, dim=1)


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeeze: int):
        super().__init__()
        self.conv1 = _conv(channels, squeeze, 1)
        self.conv2 = _conv(squeeze, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(self.conv2(F.relu(self.conv1(x.mean(dim=2, keepdim=True)))))


class SERes2NetBlock(nn.Module):
    def __init__(self, cin: int, cout: int, scale: int, squeeze: int, kernel: int, dilation: int):
        super().__init__()
        self.tdnn1 = TDNN(cin, cout, 1, 1)
        self.res2net_block = Res2Net(cout, scale, kernel, dilation)
        self.tdnn2 = TDNN(cout, cout, 1, 1)
        self.se_block = SqueezeExcite(cout, squeeze)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.se_block(self.tdnn2(self.res2net_block(self.tdnn1(x))))


class AttentivePooling(nn.Module):
    def __init__(self, channels: int, attention: int):
        super().__init__()
        self.tdnn = TDNN(channels * 3, attention, 1, 1)
        self.conv = _conv(attention, channels, 1)

    @staticmethod
    def _stats(x: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = (weights * x).sum(2)
        std = torch.sqrt((weights * (x - mean[..., None]).pow(2)).sum(2).clamp(1e-12))
        return mean, std

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[-1]
        mean, std = self._stats(x, torch.full_like(x[:, :1], 1.0 / t))
        context = torch.cat([x, mean[..., None].expand(-1, -1, t), std[..., None].expand(-1, -1, t)], dim=1)
        weights = F.softmax(self.conv(torch.tanh(self.tdnn(context))), dim=2)
        mean, std = self._stats(x, weights)
        return torch.cat([mean, std], dim=1)[..., None]


class SpeakerEncoder(nn.Module):
    def __init__(self, spec: SpeakerSpec):
        super().__init__()
        self.spec = spec
        ch, ks, dl = spec.channels, spec.kernel_sizes, spec.dilations
        blocks: list[nn.Module] = [TDNN(spec.mel_dim, ch[0], ks[0], dl[0])]
        blocks += [SERes2NetBlock(ch[i - 1], ch[i], spec.res2net_scale, spec.se_channels, ks[i], dl[i]) for i in range(1, len(ch) - 1)]
        self.blocks = nn.ModuleList(blocks)
        self.mfa = TDNN(ch[-1], ch[-1], ks[-1], dl[-1])
        self.asp = AttentivePooling(ch[-1], spec.attention_channels)
        self.fc = _conv(ch[-1] * 2, spec.enc_dim, 1)

    def forward(self, mels: torch.Tensor) -> torch.Tensor:
        """``[B, frames, mel_dim]`` -> ``[B, enc_dim]``."""
        x = mels.transpose(1, 2)
        outputs = []
        for block in self.blocks:
            x = block(x)
            outputs.append(x)
        x = self.mfa(torch.cat(outputs[1:], dim=1))
        return self.fc(self.asp(x))[..., 0]

    def embed(self, wave: torch.Tensor) -> torch.Tensor:
        """A 24 kHz recording ``[samples]`` -> its x-vector ``[enc_dim]``."""
        weight = self.fc.weight
        return self(log_mel(wave.to(weight.device, torch.float32), self.spec.sample_rate, self.spec.mel_dim)[None].to(weight.dtype))[0]
