"""Tensor-parallel AR engine with real rank processes: TP=2 gives TP=1's greedy codes, alone and in a
batch, for every layout, and each rank reads only its slice of the checkpoint."""

from __future__ import annotations

import pytest
import tp_support

from omni_models.common.components import export_dummy_checkpoint
from omni_runtime.distributed import Rendezvous, pick_port
from omni_runtime.testing.ranks import run_ranks


@pytest.fixture(scope="module")
def tp2(tmp_path_factory) -> dict[int, dict]:
    checkpoint = str(tmp_path_factory.mktemp("tp_ckpt"))
    export_dummy_checkpoint(tp_support.components("parallel"), checkpoint, seed=7)
    port = pick_port()
    ranks = [(Rendezvous("tts_engine", r, 2, "127.0.0.1", port).to_dict(), checkpoint) for r in range(2)]
    results = {item["rank"]: item for item in run_ranks(tp_support.rank_main, ranks, timeout=240)}
    for item in results.values():
        assert "error" not in item, item["error"]
    assert set(results) == {0, 1}, results
    results["checkpoint"] = checkpoint
    return results


@pytest.mark.parametrize("layout", tp_support.LAYOUTS)
def test_tp2_gives_tp1_greedy_codes_alone_and_in_a_batch(tp2, layout):
    reference = tp_support.generate(tp_support.load(layout))
    got = tp2[0][layout]
    assert got["alone"] == reference["alone"]
    assert got["batched"] == reference["batched"] == reference["alone"]
    assert got["peak_batch"] > 1  # the batch really ran together
    assert all(len(codes) >= 4 for codes in got["alone"])
    assert tp2[1][layout]["steps"] > 0  # rank 1 took part in the steps


@pytest.mark.parametrize("layout", tp_support.LAYOUTS)
def test_tp2_packed_prefill_and_sat_out_steps_give_tp1_codes(tp2, layout):
    """The deadline scheduler's packed prefill (join_many) and partial steps (step(only=...)) are
    mirrored to the follower: a stream and two non-streamed requests admitted together get the
    codes each gets alone."""
    reference = tp_support.generate(tp_support.load(layout))
    got = tp2[0][layout]
    assert got["mixed"] == reference["alone"] == reference["mixed"]
    assert got["packed"] > 1  # several prompts in one prefill forward
    assert got["sat_out"] > 0  # non-streamed rows sat out while the stream was due


@pytest.mark.parametrize("rank", [0, 1])
def test_each_rank_reads_half_of_the_sharded_weights(tp2, rank):
    full = tp_support.load("parallel", "safetensors", tp2["checkpoint"])
    full_blocks = sum(p.numel() * p.element_size() for p in full.decoder.blocks.parameters())
    full_other = full.checkpoint_bytes_read - full_blocks
    got = tp2[rank]
    norms = sum(p.numel() * p.element_size() for n, p in full.decoder.blocks.named_parameters() if "norm" in n)
    assert got["checkpoint_param_bytes"] == (full_blocks - norms) // 2 + norms
    # what the rank read from the file: its half of the blocks plus the replicated rest
    assert got["checkpoint_bytes_read"] == got["checkpoint_param_bytes"] + full_other
    assert got["checkpoint_bytes_read"] < 0.75 * full.checkpoint_bytes_read


def test_constructor_hook_builds_slices_only_inside_building():
    from torch import nn

    from omni_models.common.parallel import ColumnParallelLinear, RowParallelLinear, Shard, building, column, row

    assert type(column(8, 16)) is nn.Linear and type(row(16, 8)) is nn.Linear
    with building(Shard(1, 2)):
        q, o = column(8, 16), row(16, 8)
    assert isinstance(q, ColumnParallelLinear) and q.weight.shape == (8, 8) and q.weight_spec.ranges() == [(8, 16)]
    assert isinstance(o, RowParallelLinear) and o.weight.shape == (8, 8) and o.weight_spec.ranges() == [(8, 16)]
    with building(Shard(0, 3)), pytest.raises(ValueError, match="does not split across tp_size 3"):
        column(8, 16)
