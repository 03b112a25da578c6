"""HuBERT, the semantic model inside the Higgs Audio v2 tokenizer's encoder (omni's own, inference only).

A strided conv feature extractor on 16 kHz audio (GroupNorm after the first conv in the
``group`` variant, LayerNorm after every conv in the ``layer`` one; GELU), a projection to the
model width, a grouped positional conv (weight-normed over its kernel axis, its extra sample
dropped when the kernel is even, GELU) added to the features, LayerNorm, then post-norm
transformer layers. ``hidden_states`` returns the input of the first layer and every layer's
output, which the tokenizer averages. Parameter names are the published checkpoint's
(``feature_extractor.conv_layers.N.conv``, ``encoder.layers.N.attention.q_proj`` ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class HubertShape:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    conv_dim: tuple[int, ...]
    conv_kernel: tuple[int, ...]
    conv_stride: tuple[int, ...]
    conv_bias: bool
    feat_extract_norm: str
    pos_kernel: int
    pos_groups: int
    eps: float
    stable_layer_norm: bool

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> HubertShape:
        # the defaults are HubertConfig's (hubert-base), which a config.json may leave out
        conv_dim = tuple(config.get("conv_dim", (512,) * 7))
        return cls(
            hidden=int(config.get("hidden_size", 768)),
            layers=int(config.get("num_hidden_layers", 12)),
            heads=int(config.get("num_attention_heads", 12)),
            intermediate=int(config.get("intermediate_size", 3072)),
            conv_dim=conv_dim,
            conv_kernel=tuple(config.get("conv_kernel", (10, 3, 3, 3, 3, 2, 2))),
            conv_stride=tuple(config.get("conv_stride", (5, 2, 2, 2, 2, 2, 2))),
            conv_bias=bool(config.get("conv_bias", False)),
            feat_extract_norm=str(config.get("feat_extract_norm", "group")),
            pos_kernel=int(config.get("num_conv_pos_embeddings", 128)),
            pos_groups=int(config.get("num_conv_pos_embedding_groups", 16)),
            eps=float(config.get("layer_norm_eps", 1e-5)),
            stable_layer_norm=bool(config.get("do_stable_layer_norm", False)),
        )

    def problems(self) -> list[str]:
        out = []
        if self.feat_extract_norm not in ("group", "layer"):
            out.append(f"semantic_model_config.feat_extract_norm: {self.feat_extract_norm!r}, expected 'group' or 'layer'")
        if self.stable_layer_norm:
            out.append("semantic_model_config.do_stable_layer_norm: true is not supported (the Higgs tokenizer's HuBERT is post-norm)")
        if self.hidden % self.heads:
            out.append(f"semantic_model_config.hidden_size {self.hidden} does not split into {self.heads} heads")
        return out


class ConvLayer(nn.Module):
    def __init__(self, shape: HubertShape, index: int):
        super().__init__()
        channels_in = shape.conv_dim[index - 1] if index else 1
        channels = shape.conv_dim[index]
        self.conv = nn.Conv1d(channels_in, channels, shape.conv_kernel[index], shape.conv_stride[index], bias=shape.conv_bias)
        self.layer_norm: nn.Module | None = None
        if shape.feat_extract_norm == "layer":
            self.layer_norm = nn.LayerNorm(channels)
        elif index == 0:
            self.layer_norm = nn.GroupNorm(channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        if isinstance(self.layer_norm, nn.LayerNorm):
            x = self.layer_norm(x.transpose(1, 2)).transpose(1, 2)
        elif self.layer_norm is not None:
            x = self.layer_norm(x)
        return F.gelu(x)


class FeatureExtractor(nn.Module):
    def __init__(self, shape: HubertShape):
        super().__init__()
        self.conv_layers = nn.ModuleList(ConvLayer(shape, i) for i in range(len(shape.conv_dim)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x[:, None]
        for layer in self.conv_layers:
            x = layer(x)
        return x


class FeatureProjection(nn.Module):
    def __init__(self, shape: HubertShape):
        super().__init__()
        self.layer_norm = nn.LayerNorm(shape.conv_dim[-1], eps=shape.eps)
        self.projection = nn.Linear(shape.conv_dim[-1], shape.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projection(self.layer_norm(x))


class PositionalConv(nn.Module):
    def __init__(self, shape: HubertShape):
        super().__init__()
        self.conv = nn.Conv1d(shape.hidden, shape.hidden, shape.pos_kernel, padding=shape.pos_kernel // 2, groups=shape.pos_groups)
        self.drop_last = shape.pos_kernel % 2 == 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x.transpose(1, 2))
        if self.drop_last:
            y = y[:, :, :-1]
        return F.gelu(y).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, shape: HubertShape):
        super().__init__()
        self.heads = shape.heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(shape.hidden, shape.hidden) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (p(x).view(b, t, self.heads, d // self.heads).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        return self.out_proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d))


class FeedForward(nn.Module):
    def __init__(self, shape: HubertShape):
        super().__init__()
        self.intermediate_dense = nn.Linear(shape.hidden, shape.intermediate)
        self.output_dense = nn.Linear(shape.intermediate, shape.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_dense(F.gelu(self.intermediate_dense(x)))


class EncoderLayer(nn.Module):
    def __init__(self, shape: HubertShape):
        super().__init__()
        self.attention = Attention(shape)
        self.layer_norm = nn.LayerNorm(shape.hidden, eps=shape.eps)
        self.feed_forward = FeedForward(shape)
        self.final_layer_norm = nn.LayerNorm(shape.hidden, eps=shape.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer_norm(x + self.attention(x))
        return self.final_layer_norm(x + self.feed_forward(x))


class Encoder(nn.Module):
    def __init__(self, shape: HubertShape):
        super().__init__()
        self.pos_conv_embed = PositionalConv(shape)
        self.layer_norm = nn.LayerNorm(shape.hidden, eps=shape.eps)
        self.layers = nn.ModuleList(EncoderLayer(shape) for _ in range(shape.layers))


class Hubert(nn.Module):
    def __init__(self, shape: HubertShape):
        super().__init__()
        self.feature_extractor = FeatureExtractor(shape)
        self.feature_projection = FeatureProjection(shape)
        self.encoder = Encoder(shape)

    def hidden_states(self, wave: torch.Tensor) -> list[torch.Tensor]:
        """``[B, samples]`` at 16 kHz -> the first layer's input and each layer's output ``[B, T, hidden]``."""
        x = self.feature_projection(self.feature_extractor(wave).transpose(1, 2))
        x = self.encoder.layer_norm(x + self.encoder.pos_conv_embed(x))
        states = [x]
        for layer in self.encoder.layers:
            x = layer(x)
            states.append(x)
        return states
