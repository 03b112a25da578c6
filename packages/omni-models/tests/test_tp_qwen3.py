"""The real Qwen3-TTS 12 Hz talker sharded across two real rank processes (tiny checkpoint in the
published layout): TP=2 gives TP=1's greedy codes alone, in a batch prefilled in one packed forward
and with rows sitting out steps, and each rank holds half of
the decoder layers' weights, read as slices from the checkpoint."""

from __future__ import annotations

import pytest
import tp_support

from omni_runtime.distributed import Rendezvous, pick_port
from omni_runtime.testing.ranks import run_ranks

pytest.importorskip("tokenizers")

from qwen3_tts_12hz_checkpoint import write_checkpoint  # noqa: E402


@pytest.mark.timeout(600)
def test_qwen3_talker_tp2_gives_tp1_greedy_codes_alone_and_in_a_batch(tmp_path):
    from omni_models.qwen3_tts_12hz import stages

    checkpoint = str(write_checkpoint(tmp_path / "cv", "custom_voice"))
    pre = stages.build_preprocessing(model_path=checkpoint)
    engine = stages.build_tts_engine(model_path=checkpoint).engine
    reference = tp_support.qwen3_codes(pre, engine)
    full_layers = tp_support.layer_bytes(engine.batch.talker)
    engine.scheduler.close()

    port = pick_port()
    ranks = [(Rendezvous("tts_engine", r, 2, "127.0.0.1", port).to_dict(), checkpoint) for r in range(2)]
    results = {item["rank"]: item for item in run_ranks(tp_support.qwen3_rank_main, ranks, timeout=300)}
    for item in results.values():
        assert "error" not in item, item["error"]
    assert set(results) == {0, 1}
    got = results[0]
    assert all(len(codes) > 0 for codes in reference["alone"])
    assert got["alone"] == reference["alone"]
    assert got["batched"] == reference["batched"] == reference["alone"]
    assert got["prefills"][-1] == reference["prefills"][-1] == len(tp_support.QWEN3_REQUESTS)  # the batch: one packed prefill
    assert got["in_turns"] == reference["in_turns"] == reference["alone"]  # rows sitting out steps: the follower replays subsets
    assert got["peak_batch"] == len(tp_support.QWEN3_REQUESTS)
    assert results[1]["steps"] > 0
    for rank in (0, 1):  # half of q/k/v/o and gate/up/down per rank (the norms stay whole)
        assert 0.45 * full_layers < results[rank]["layer_bytes"] < 0.55 * full_layers
