"""The 12 Hz speech tokenizer's decoder: codes ``[B, G, T]`` -> 24 kHz audio ``[B, 1, T * 1920]``.

Split residual VQ (one semantic + G-1 acoustic codebooks, each with its output projection) ->
causal conv -> a sliding-window causal transformer (layer-scaled) -> two transposed-conv +
ConvNeXt upsamplers -> a SnakeBeta conv decoder (upsample rates 8, 5, 4, 3). Every conv is
causal (left padding only), so a chunk decoded with enough left context equals the same span of
a whole-utterance decode; the reference decodes in chunks of 300 frames with 25 frames of left
context, and ``decode_chunked`` does exactly that. Parameter names follow the published
``speech_tokenizer/model.safetensors`` under ``decoder.``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from omni_models.common.qwen3_layers import MLP, Attention, RMSNorm, StackSpec, rotary

from .spec import CodecSpec

REFERENCE_CHUNK = 300
REFERENCE_LEFT_CONTEXT = 25


class CausalConv(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, dilation: int = 1, stride: int = 1, groups: int = 1):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel, stride=stride, dilation=dilation, groups=groups)
        self.stride = stride
        self.span = (kernel - 1) * dilation + 1
        self.left = self.span - stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[-1]
        frames = (length - self.span + self.left) / self.stride + 1
        right = (math.ceil(frames) - 1) * self.stride + (self.span - self.left) - length
        return self.conv(F.pad(x, (self.left, right)))


class CausalTransposedConv(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int):
        super().__init__()
        self.conv = nn.ConvTranspose1d(cin, cout, kernel, stride=stride)
        self.trim = kernel - stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        return x[..., : x.shape[-1] - self.trim] if self.trim > 0 else x


class ConvNeXt(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dwconv = CausalConv(dim, dim, 7, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.dwconv(x).transpose(1, 2))
        y = self.gamma * self.pwconv2(F.gelu(self.pwconv1(y)))
        return x + y.transpose(1, 2)


class SnakeBeta(nn.Module):
    """x + sin^2(x * e^alpha) / e^beta, per channel (log-scale parameters)."""

    def __init__(self, channels: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha = self.alpha.exp()[None, :, None]
        beta = self.beta.exp()[None, :, None]
        return x + (1.0 / (beta + 1e-9)) * torch.sin(x * alpha).pow(2)


class ResidualUnit(nn.Module):
    def __init__(self, dim: int, dilation: int):
        super().__init__()
        self.act1 = SnakeBeta(dim)
        self.conv1 = CausalConv(dim, dim, 7, dilation=dilation)
        self.act2 = SnakeBeta(dim)
        self.conv2 = CausalConv(dim, dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(self.act2(self.conv1(self.act1(x))))


class UpsampleBlock(nn.Module):
    def __init__(self, cin: int, cout: int, rate: int):
        super().__init__()
        self.block = nn.ModuleList([SnakeBeta(cin), CausalTransposedConv(cin, cout, 2 * rate, rate), *(ResidualUnit(cout, d) for d in (1, 3, 9))])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.block:
            x = layer(x)
        return x


class Codebook(nn.Module):
    """EMA codebook: the code vectors are ``embedding_sum / cluster_usage``."""

    def __init__(self, dim: int, size: int):
        super().__init__()
        self.cluster_usage = nn.Parameter(torch.ones(size))
        self.embedding_sum = nn.Parameter(torch.zeros(size, dim))

    def lookup(self, codes: torch.Tensor) -> torch.Tensor:
        return F.embedding(codes, self.embedding_sum / self.cluster_usage.clamp(min=1e-5)[:, None])


class _VQ(nn.Module):
    def __init__(self, dim: int, size: int):
        super().__init__()
        self._codebook = Codebook(dim, size)


class _Layers(nn.Module):
    def __init__(self, count: int, dim: int, size: int):
        super().__init__()
        self.layers = nn.ModuleList(_VQ(dim, size) for _ in range(count))


class ResidualGroup(nn.Module):
    """Codebooks summed, then a 1x1 output projection (``output_proj``)."""

    def __init__(self, count: int, dim: int, out_dim: int, size: int):
        super().__init__()
        self.vq = _Layers(count, dim, size)
        self.output_proj = nn.Conv1d(dim, out_dim, 1, bias=False)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        """``codes`` ``[B, n, T]`` -> ``[B, out_dim, T]``."""
        total = sum(layer._codebook.lookup(codes[:, i]) for i, layer in enumerate(self.vq.layers))
        return self.output_proj(total.transpose(1, 2))


class SplitQuantizer(nn.Module):
    def __init__(self, spec: CodecSpec):
        super().__init__()
        half = spec.codebook_dim // 2
        self.rvq_first = ResidualGroup(1, half, spec.codebook_dim, spec.codebook_size)
        self.rvq_rest = ResidualGroup(spec.num_quantizers - 1, half, spec.codebook_dim, spec.codebook_size)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        return self.rvq_first(codes[:, :1]) + self.rvq_rest(codes[:, 1:])


class ScaledBlock(nn.Module):
    """Pre-norm transformer block with layer scale, no q/k norm (the codec's pre-transformer)."""

    def __init__(self, spec: StackSpec):
        super().__init__()
        h = spec.hidden
        self.input_layernorm = RMSNorm(h, spec.eps)
        self.post_attention_layernorm = RMSNorm(h, spec.eps)
        self.self_attn = Attention(spec, qk_norm=False)
        self.mlp = MLP(h, spec.intermediate)
        self.self_attn_layer_scale = nn.Module()
        self.self_attn_layer_scale.scale = nn.Parameter(torch.ones(h))
        self.mlp_layer_scale = nn.Module()
        self.mlp_layer_scale.scale = nn.Parameter(torch.ones(h))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        def attend(_layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=k.shape[1] != q.shape[1])

        x = x + self.self_attn_layer_scale.scale * self.self_attn(self.input_layernorm(x), cos, sin, attend, 0)
        return x + self.mlp_layer_scale.scale * self.mlp(self.post_attention_layernorm(x))


class PreTransformer(nn.Module):
    def __init__(self, spec: CodecSpec):
        super().__init__()
        t = spec.transformer
        self.spec, self.window = t, spec.sliding_window
        self.input_proj = nn.Linear(spec.latent_dim, t.hidden)
        self.layers = nn.ModuleList(ScaledBlock(t) for _ in range(t.layers))
        self.norm = RMSNorm(t.hidden, t.eps)
        self.output_proj = nn.Linear(t.hidden, spec.latent_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, T, latent]`` -> ``[B, T, latent]``; causal, each position sees the last ``window`` positions."""
        t = x.shape[1]
        x = self.input_proj(x)
        positions = torch.arange(t, device=x.device)
        cos, sin = rotary(positions, self.spec.head_dim, self.spec.rope_theta, x.dtype)
        distance = positions[:, None] - positions[None, :]
        mask = (distance >= 0) & (distance < self.window)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.output_proj(self.norm(x))


class CodecDecoder(nn.Module):
    def __init__(self, spec: CodecSpec):
        super().__init__()
        self.spec = spec
        self.total_upsample = math.prod(spec.upsample_rates + spec.upsampling_ratios)
        self.quantizer = SplitQuantizer(spec)
        self.pre_conv = CausalConv(spec.codebook_dim, spec.latent_dim, 3)
        self.pre_transformer = PreTransformer(spec)
        self.upsample = nn.ModuleList(
            nn.ModuleList([CausalTransposedConv(spec.latent_dim, spec.latent_dim, f, f), ConvNeXt(spec.latent_dim)]) for f in spec.upsampling_ratios
        )
        dims = [spec.decoder_dim // 2**i for i in range(len(spec.upsample_rates) + 1)]
        self.decoder = nn.ModuleList(
            [
                CausalConv(spec.latent_dim, spec.decoder_dim, 7),
                *(UpsampleBlock(dims[i], dims[i + 1], rate) for i, rate in enumerate(spec.upsample_rates)),
                SnakeBeta(dims[-1]),
                CausalConv(dims[-1], 1, 7),
            ]
        )

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        """``codes`` ``[B, G, T]`` (int64) -> audio ``[B, 1, T * total_upsample]`` in [-1, 1]."""
        x = self.pre_conv(self.quantizer(codes))
        x = self.pre_transformer(x.transpose(1, 2)).transpose(1, 2)
        for up, block in self.upsample:
            x = block(up(x))
        for layer in self.decoder:
            x = layer(x)
        return x.clamp(-1, 1)

    def decode_with_context(self, codes: torch.Tensor, context: int) -> torch.Tensor:
        """Decode ``codes`` ``[B, G, context + n]`` and keep the audio of the last ``n`` frames."""
        return self(codes)[..., context * self.total_upsample :]

    def decode_chunked(self, codes: torch.Tensor, chunk: int = REFERENCE_CHUNK, left_context: int = REFERENCE_LEFT_CONTEXT) -> torch.Tensor:
        """The reference's whole-utterance decode: chunks of ``chunk`` frames, ``left_context`` frames before each."""
        pieces, start, total = [], 0, codes.shape[-1]
        while start < total:
            end = min(start + chunk, total)
            context = left_context if start - left_context > 0 else start
            pieces.append(self.decode_with_context(codes[..., start - context : end], context))
            start = end
        return torch.cat(pieces, dim=-1)
