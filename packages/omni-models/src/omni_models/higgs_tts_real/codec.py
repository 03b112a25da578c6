"""The Higgs Audio v2 tokenizer (the codec of Higgs-TTS), omni's own implementation.

Decoder (the vocoder): per codebook ``project_out(embed[code])`` summed over the ``N`` residual
codebooks, ``fc2`` to the acoustic width, then a DAC decoder: a 7-tap conv, upsampling blocks
(Snake, transposed conv of kernel ``2s`` and stride ``s`` with output padding ``s % 2``, three
dilated residual units), Snake and a 7-tap conv to one channel, no ``tanh``. Batched: codes
``[B, N, T]`` decode in one forward. Not causal (every conv is centred), so the streaming
vocoder decodes each chunk with ``context_frames`` frames of left context and keeps only the
chunk's samples, as the published streaming vocoder does (its overlap of 8 frames).

Encoder (reference audio -> codes): a DAC encoder on the 24 kHz waveform, and semantic features
(a HuBERT model on the audio resampled to 16 kHz, mean of all its hidden states, every
``semantic_downsample_factor``-th frame) through a small conv encoder; both concatenated,
``fc``, then residual vector quantisation (nearest codeword by Euclidean distance after
``project_in``). The HuBERT itself is transformers' ``HubertModel`` (a well-kept library; the
encoder runs once per request and needs no batching), loaded from the same checkpoint.

Parameter names are those of the published tokenizer's state dict, so the bundled copy in the
Higgs-TTS checkpoint loads by name; weight-normed convs (``weight_g``/``weight_v`` or
``parametrizations.weight.original0/1``) are folded into plain weights at load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from omni_models.common.weights import CheckpointError

from .hubert import Hubert, HubertShape
from .resample import resample


@dataclass(frozen=True)
class CodecShape:
    """The tokenizer's hyper-parameters, read from its ``config.json``."""

    sample_rate: int
    semantic_sample_rate: int
    downsampling_ratios: tuple[int, ...]
    upsampling_ratios: tuple[int, ...]
    encoder_hidden: int
    decoder_hidden: int
    acoustic_hidden: int
    semantic_hidden: int
    codebook_size: int
    codebook_dim: int
    num_quantizers: int
    kernel_size: int
    unit_kernel_size: int
    channel_ratios: tuple[float, ...]
    strides: tuple[int, ...]
    block_dilations: tuple[int, ...]
    downsample_factor: int

    @property
    def hop(self) -> int:
        return math.prod(self.downsampling_ratios)

    @property
    def frame_rate(self) -> int:
        return math.ceil(self.sample_rate / self.hop)

    @property
    def hidden(self) -> int:
        return self.acoustic_hidden + self.semantic_hidden

    @property
    def semantic_downsample(self) -> int:
        return int(self.hop / (self.sample_rate / self.semantic_sample_rate) / self.downsample_factor)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> CodecShape:
        acoustic = dict(config.get("acoustic_model_config") or {})
        semantic = dict(config.get("semantic_model_config") or {})
        down = tuple(int(r) for r in acoustic.get("downsampling_ratios", (8, 5, 4, 2)))
        sample_rate = int(config.get("sample_rate", 24000))
        codebook_size = int(config.get("codebook_size", 1024))
        hop = math.prod(down)
        frame_rate = math.ceil(sample_rate / hop)
        bandwidth = float(list(config.get("target_bandwidths", (0.5, 1, 1.5, 2, 4)))[-1])
        per_quantizer = math.log2(codebook_size) * frame_rate / 1000
        return cls(
            sample_rate=sample_rate,
            semantic_sample_rate=int(config.get("semantic_sample_rate", 16000)),
            downsampling_ratios=down,
            upsampling_ratios=tuple(int(r) for r in acoustic.get("upsampling_ratios", down)),
            encoder_hidden=int(acoustic.get("encoder_hidden_size", 64)),
            decoder_hidden=int(acoustic.get("decoder_hidden_size", 1024)),
            acoustic_hidden=int(acoustic.get("hidden_size", 256)),
            semantic_hidden=int(semantic.get("hidden_size", 768)),
            codebook_size=codebook_size,
            codebook_dim=int(config.get("codebook_dim", 64)),
            num_quantizers=int(max(1, math.floor(bandwidth / per_quantizer))),
            kernel_size=int(config.get("kernel_size", 3)),
            unit_kernel_size=int(config.get("unit_kernel_size", 3)),
            channel_ratios=tuple(float(r) for r in config.get("channel_ratios", (1, 1))),
            strides=tuple(int(s) for s in config.get("strides", (1, 1))),
            block_dilations=tuple(int(d) for d in config.get("block_dilations", (1, 1))),
            downsample_factor=int(config.get("downsample_factor", 320)),
        )


class Snake(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + (self.alpha + 1e-9).reciprocal() * torch.sin(self.alpha * x).pow(2)


class DacResidual(nn.Module):
    def __init__(self, channels: int, dilation: int):
        super().__init__()
        self.snake1 = Snake(channels)
        self.conv1 = nn.Conv1d(channels, channels, 7, dilation=dilation, padding=3 * dilation)
        self.snake2 = Snake(channels)
        self.conv2 = nn.Conv1d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv2(self.snake2(self.conv1(self.snake1(x))))
        crop = (x.shape[-1] - y.shape[-1]) // 2
        return (x[..., crop:-crop] if crop > 0 else x) + y


def _units(channels: int) -> tuple[DacResidual, DacResidual, DacResidual]:
    return DacResidual(channels, 1), DacResidual(channels, 3), DacResidual(channels, 9)


class DacDecoderBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.snake1 = Snake(in_channels)
        self.conv_t1 = nn.ConvTranspose1d(in_channels, out_channels, 2 * stride, stride, padding=math.ceil(stride / 2), output_padding=stride % 2)
        self.res_unit1, self.res_unit2, self.res_unit3 = _units(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.res_unit3(self.res_unit2(self.res_unit1(self.conv_t1(self.snake1(x)))))


class DacDecoder(nn.Module):
    def __init__(self, shape: CodecShape):
        super().__init__()
        width = shape.decoder_hidden
        self.conv1 = nn.Conv1d(shape.acoustic_hidden, width, 7, padding=3)
        self.block = nn.ModuleList(DacDecoderBlock(width // 2**i, width // 2 ** (i + 1), s) for i, s in enumerate(shape.upsampling_ratios))
        out = width // 2 ** len(shape.upsampling_ratios)
        self.snake1 = Snake(out)
        self.conv2 = nn.Conv1d(out, 1, 7, padding=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for block in self.block:
            x = block(x)
        return self.conv2(self.snake1(x))


def receptive_frames(decoder: DacDecoder) -> int:
    """Frames on each side that a frame's samples depend on (every conv is centred): the sum over
    the layers of each one's half-width, in frames at the rate the layer runs at."""
    reach, samples_per_frame = 0.0, 1
    for module in decoder.modules():
        if isinstance(module, nn.ConvTranspose1d):
            reach += math.ceil(module.kernel_size[0] / module.stride[0]) / 2 / samples_per_frame
            samples_per_frame *= module.stride[0]
        elif isinstance(module, nn.Conv1d):
            reach += module.dilation[0] * (module.kernel_size[0] - 1) / 2 / samples_per_frame
    return math.ceil(reach)


class DacEncoderBlock(nn.Module):
    def __init__(self, out_channels: int, stride: int):
        super().__init__()
        self.res_unit1, self.res_unit2, self.res_unit3 = _units(out_channels // 2)
        self.snake1 = Snake(out_channels // 2)
        self.conv1 = nn.Conv1d(out_channels // 2, out_channels, 2 * stride, stride, padding=math.ceil(stride / 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv1(self.snake1(self.res_unit3(self.res_unit2(self.res_unit1(x)))))


class DacEncoder(nn.Module):
    def __init__(self, shape: CodecShape):
        super().__init__()
        self.conv1 = nn.Conv1d(1, shape.encoder_hidden, 7, padding=3)
        self.block = nn.ModuleList(DacEncoderBlock(shape.encoder_hidden * 2 ** (i + 1), s) for i, s in enumerate(shape.downsampling_ratios))
        width = shape.encoder_hidden * 2 ** len(shape.downsampling_ratios)
        self.snake1 = Snake(width)
        self.conv2 = nn.Conv1d(width, shape.acoustic_hidden, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for block in self.block:
            x = block(x)
        return self.conv2(self.snake1(x))

    def output_length(self, length: int) -> int:
        for conv in (m for m in self.modules() if isinstance(m, nn.Conv1d)):
            k, s, p, d = conv.kernel_size[0], conv.stride[0], conv.padding[0], conv.dilation[0]  # type: ignore[index]
            length = (length + 2 * p - d * (k - 1) - 1) // s + 1
        return length


class SemanticUnit(nn.Module):
    def __init__(self, channels: int, kernel: int, dilation: int):
        super().__init__()
        self.conv1 = nn.Conv1d(channels, channels, kernel, padding=((kernel - 1) // 2) * dilation, dilation=dilation, bias=False)
        self.conv2 = nn.Conv1d(channels, channels, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.elu(self.conv1(F.elu(x))))


class SemanticBlock(nn.Module):
    def __init__(self, shape: CodecShape, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.res_units = nn.ModuleList(SemanticUnit(in_channels, shape.unit_kernel_size, d) for d in shape.block_dilations)
        kernel = 3 if stride == 1 else 2 * stride
        self.conv = nn.Conv1d(in_channels, out_channels, kernel, stride, padding=(kernel - 1) // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for unit in self.res_units:
            x = unit(x)
        return self.conv(x)


class SemanticEncoder(nn.Module):
    def __init__(self, shape: CodecShape):
        super().__init__()
        width = shape.semantic_hidden
        self.conv = nn.Conv1d(width, width, shape.kernel_size, 1, shape.kernel_size // 2, bias=False)
        blocks, channels = [], width
        for ratio, stride in zip(shape.channel_ratios, shape.strides):
            blocks.append(SemanticBlock(shape, channels, int(width * ratio), stride))
            channels = int(width * ratio)
        self.conv_blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        for block in self.conv_blocks:
            x = block(x)
        return x


class Codebook(nn.Module):
    def __init__(self, shape: CodecShape):
        super().__init__()
        self.register_buffer("embed", torch.zeros(shape.codebook_size, shape.codebook_dim))


class Quantizer(nn.Module):
    def __init__(self, shape: CodecShape):
        super().__init__()
        self.codebook = Codebook(shape)
        self.project_in = nn.Linear(shape.hidden, shape.codebook_dim)
        self.project_out = nn.Linear(shape.codebook_dim, shape.hidden)

    def nearest(self, x: torch.Tensor) -> torch.Tensor:
        """``[..., codebook_dim]`` -> the index of the nearest codeword (Euclidean)."""
        embed = self.codebook.embed
        distance = x.pow(2).sum(-1, keepdim=True) - 2 * x @ embed.T + embed.pow(2).sum(-1)
        return (-distance).max(dim=-1).indices


class ResidualQuantizer(nn.Module):
    def __init__(self, shape: CodecShape):
        super().__init__()
        self.quantizers = nn.ModuleList(Quantizer(shape) for _ in range(shape.num_quantizers))

    def encode(self, latents: torch.Tensor) -> torch.Tensor:
        """``[B, hidden, T]`` -> codes ``[B, N, T]``."""
        residual = latents.transpose(1, 2)
        codes = []
        for q in self.quantizers:
            index = q.nearest(q.project_in(residual))
            residual = residual - q.project_out(F.embedding(index, q.codebook.embed))
            codes.append(index)
        return torch.stack(codes, dim=1)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """``[B, N, T]`` -> ``[B, hidden, T]``."""
        total = sum(q.project_out(F.embedding(codes[:, i], q.codebook.embed)) for i, q in enumerate(self.quantizers))
        return total.transpose(1, 2)  # type: ignore[union-attr]


class HiggsCodec(nn.Module):
    """Encode reference audio to ``[N, T]`` codes; decode codes (batched) to 24 kHz audio."""

    def __init__(self, shape: CodecShape, semantic_config: dict[str, Any] | None = None):
        """``semantic_config``: the HuBERT's config (the encoder needs it; decoding does not)."""
        super().__init__()
        self.shape = shape
        self.acoustic_decoder = DacDecoder(shape)
        self.acoustic_encoder = DacEncoder(shape)
        self.encoder_semantic = SemanticEncoder(shape)
        self.fc = nn.Linear(shape.hidden, shape.hidden)
        self.fc2 = nn.Linear(shape.hidden, shape.acoustic_hidden)
        self.quantizer = ResidualQuantizer(shape)
        self.semantic_model: Hubert | None = Hubert(HubertShape.from_config(semantic_config)) if semantic_config is not None else None

    # decoding ----------------------------------------------------------------------------------
    def latents(self, codes: torch.Tensor) -> torch.Tensor:
        """Codes ``[N, T]`` or ``[B, N, T]`` -> decoder input ``[(B,) acoustic_hidden, T]``;
        ids outside the codebook (BOC/EOC sampled inside a frame) are clamped into it."""
        batch = codes if codes.dim() == 3 else codes[None]
        batch = batch.clamp(0, self.shape.codebook_size - 1)
        out = self.fc2(self.quantizer.decode(batch).transpose(1, 2)).transpose(1, 2)
        return out if codes.dim() == 3 else out[0]

    def decode_latents(self, latents: torch.Tensor) -> torch.Tensor:
        """``[(B,) acoustic_hidden, T]`` -> ``[(B,) 1, T * hop]``."""
        return self.acoustic_decoder(latents) if latents.dim() == 3 else self.acoustic_decoder(latents[None])[0]

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        return self.decode_latents(self.latents(codes))

    # encoding ----------------------------------------------------------------------------------
    def _semantic(self, wave: torch.Tensor) -> torch.Tensor:
        if self.semantic_model is None:
            raise RuntimeError("the codec was built without its semantic model; load it with load_codec(..., encoder=True)")
        s = self.shape
        if s.sample_rate != s.semantic_sample_rate:
            wave = resample(wave, s.sample_rate, s.semantic_sample_rate)
        hidden = self.semantic_model.hidden_states(F.pad(wave[:, 0], (160, 160)))
        features = torch.stack(hidden, dim=1).mean(dim=1)
        if s.semantic_downsample > 1:
            features = features[:, :: s.semantic_downsample]
        return features

    def encode(self, wave: torch.Tensor) -> torch.Tensor:
        """Mono ``[samples]`` at ``sample_rate`` -> codes ``[N, T]``."""
        x = wave.reshape(1, 1, -1).to(self.fc.weight.dtype)
        semantic = self.encoder_semantic(self._semantic(x).transpose(1, 2))
        if self.acoustic_encoder.output_length(x.shape[-1]) != semantic.shape[-1]:
            x = F.pad(x, (self.shape.hop // 2, self.shape.hop // 2))
        acoustic = self.acoustic_encoder(x)
        latents = self.fc(torch.cat([acoustic, semantic], dim=1).transpose(1, 2)).transpose(1, 2)
        return self.quantizer.encode(latents)[0]


def _fold_weight_norm(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``weight_g``/``weight_v`` (or parametrizations ``original0``/``original1``) -> ``weight``.

    The normalised axis is the one ``g`` keeps (0 for the DAC convs, the kernel axis for
    HuBERT's positional conv)."""
    pairs = {".weight_g": ".weight_v", ".parametrizations.weight.original0": ".parametrizations.weight.original1"}
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        g_suffix = next((g for g in pairs if key.endswith(g)), None)
        if g_suffix is not None:
            base = key[: -len(g_suffix)]
            v = state[base + pairs[g_suffix]]
            reduce = [d for d in range(v.dim()) if value.shape[d] == 1]
            out[base + ".weight"] = value * v / v.pow(2).sum(dim=reduce, keepdim=True).sqrt()
        elif not any(key.endswith(v) for v in pairs.values()):
            out[key] = value
    return out


def load_codec(config: dict[str, Any], state: dict[str, torch.Tensor], *, encoder: bool, source: str, config_source: str = "the codec config") -> HiggsCodec:
    """Build the codec from its ``config.json`` and tensors; every missing or misshapen tensor is
    reported at once (``source`` names where they came from). ``encoder`` also loads the parts
    that encode reference audio (acoustic and semantic encoders, HuBERT, ``fc``)."""
    shape = CodecShape.from_config(config)
    semantic = dict(config.get("semantic_model_config") or {}) if encoder else None
    problems = HubertShape.from_config(semantic).problems() if semantic is not None else []
    codec = HiggsCodec(shape, semantic if not problems else None)
    state = _fold_weight_norm(state)
    expected = codec.state_dict()
    problems += [f"{k}: missing" for k in expected if k not in state]
    problems += [f"{k}: shape {tuple(state[k].shape)}, the config gives {tuple(v.shape)}" for k, v in expected.items() if k in state and state[k].shape != v.shape]
    if problems:
        raise CheckpointError(
            f"{source}: the audio tokenizer's weights do not fit {config_source}:\n  " + "\n  ".join(problems[:12])
            + ("\n  ..." if len(problems) > 12 else "")
            + "\n  fix: put the tokenizer config.json that belongs to these weights in audio_tokenizer/config.json"
        )
    codec.load_state_dict({k: state[k] for k in expected}, strict=True)
    return codec.eval().requires_grad_(False)
