"""The 12 Hz codec's encoder, for Base voice cloning (reference audio -> reference frames).

The published encoder is a Mimi encoder (SEANet convs, a transformer, downsampling, split RVQ),
stored under ``encoder.`` in ``speech_tokenizer/model.safetensors`` with its ``MimiConfig`` in
``speech_tokenizer/config.json``. It runs once per request, unbatched, so omni uses the
well-kept implementation in ``transformers`` (an optional extra: ``omni-models[qwen3-tts-clone]``)
rather than a port; the decoder half of Mimi is not part of this checkpoint and is not built.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from .checkpoint import CODEC_DIR, _Files
from .spec import CheckpointError, CodecSpec

UNUSED = ("upsample.", "decoder_transformer.", "decoder.")
INSTALL_FIX = "pip install 'omni-models[qwen3-tts-clone]'  (transformers, for the codec's Mimi encoder)"


def clone_support_problem() -> str | None:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return f"voice cloning with ref_text (ICL) needs the codec encoder from transformers, which is not installed\n  fix:  {INSTALL_FIX}"
    return None


class ReferenceEncoder:
    def __init__(self, spec: CodecSpec, directory: Path, device: str):
        problem = clone_support_problem()
        if problem:
            raise CheckpointError(problem)
        from transformers import MimiConfig, MimiModel

        self.spec = spec
        model = MimiModel(MimiConfig(**spec.encoder_config))
        files = _Files(directory / CODEC_DIR)
        wanted = {f"encoder.{k}": tuple(v.shape) for k, v in model.state_dict().items() if not k.startswith(UNUSED)}
        problems = files.problems(wanted)
        if problems:
            raise CheckpointError("\n".join(problems))
        tensors = files.read(list(wanted))
        missing, _ = model.load_state_dict({k[len("encoder.") :]: v for k, v in tensors.items()}, strict=False)
        left = [k for k in missing if not k.startswith(UNUSED)]
        if left:
            raise CheckpointError(f"{directory / CODEC_DIR}: encoder keys not loaded: {left[:5]}\n  fix:  use the published speech_tokenizer")
        self.model = model.to(device).eval()
        self.device = device

    @torch.inference_mode()
    def encode(self, wave: torch.Tensor) -> torch.Tensor:
        """A recording at the codec's input rate ``[samples]`` -> frames ``[T, G]`` (int64)."""
        values = wave.to(self.device, torch.float32)[None, None]
        codes = self.model.encode(values, return_dict=True).audio_codes[0, : self.spec.valid_quantizers]
        frames = math.ceil(wave.shape[-1] / self.spec.downsample)
        return codes[:, :frames].T.contiguous().cpu()
