"""Streaming does not change the audio: chunk sizes in the engine and streamed versus one-shot
vocoding give the same samples."""

import pytest
import torch
from helpers import FakeCtx, StagePayload, build_stages, synthesize

TEXT = "Streaming must not change a single sample."


@pytest.mark.parametrize("folder", ["qwen3_tts", "zonos2", "fun_cosyvoice3", "ming_omni_tts"])
def test_engine_chunk_size_does_not_change_the_audio(folder):
    small = build_stages(folder, overrides={"tts_engine": {"chunk_frames": 2, "first_chunk_frames": 1}})
    large = build_stages(folder, overrides={"tts_engine": {"chunk_frames": 40, "first_chunk_frames": 9}})
    a = synthesize(folder, {"text": TEXT}, stages=small)
    b = synthesize(folder, {"text": TEXT}, stages=large)
    assert len(a.chunks) > len(b.chunks)
    torch.testing.assert_close(a.audio, b.audio, atol=1e-5, rtol=1e-4)


def test_streamed_and_one_shot_vocoding_agree():
    stages = build_stages("qwen3_tts")
    result = synthesize("qwen3_tts", {"text": TEXT}, stages=stages)
    codes = torch.cat([c["codes"] for c in result.emitted["tts_engine"]], dim=1)
    ctx = FakeCtx("req-1", "vocoder")
    out = stages["vocoder"].process(StagePayload("req-1", {"codes": codes}), ctx)
    one_shot = torch.cat([c["audio"] for c in ctx.emitted])
    torch.testing.assert_close(one_shot, result.audio, atol=1e-5, rtol=1e-4)
    assert out.data["num_samples"] == result.audio.shape[-1]
    with pytest.raises(ValueError, match="expected \\[channels, frames > 0\\]"):
        stages["vocoder"].process(StagePayload("req-1", {"codes": codes[:, :0]}), ctx)
