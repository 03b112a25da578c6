"""Rendezvous of a TP group with real processes: forming it, a rank that never joins, a rank that dies."""

from __future__ import annotations

import pytest

from omni_runtime.distributed import Rendezvous, pick_port
from omni_runtime.testing.ranks import run_ranks

pytest.importorskip("torch.distributed")

from tp import ranks  # noqa: E402


def _rdv(rank: int, world: int, port: int, **kw) -> dict:
    return Rendezvous("tts_engine", rank, world, "127.0.0.1", port, **kw).to_dict()


def _run(target, rdvs: list[dict], timeout: float = 60.0, expect: int | None = None) -> dict[int, tuple]:
    return {item[0]: item for item in run_ranks(target, [(rdv,) for rdv in rdvs], timeout=timeout, expect=expect)}


def test_two_ranks_form_a_group_and_reduce():
    port = pick_port()
    results = _run(ranks.collectives, [_rdv(r, 2, port) for r in range(2)])
    assert {r: v[1] for r, v in results.items()} == {0: "ok", 1: "ok"}, results
    for rank in (0, 1):
        assert results[rank][2] == [3.0] * 4  # 1 + 2 on every rank
        assert results[rank][3] == [0.0, 1.0, 2.0]  # rank 0's tensor everywhere


def test_a_rank_that_never_joins_fails_startup_naming_group_and_rank():
    port = pick_port()
    results = _run(ranks.join_only, [_rdv(0, 2, port, join_timeout_s=2.0)])
    _, message, seconds = results[0]
    assert "TP group tts_engine rank 0 of 2" in message
    assert "rank(s) 1 did not join" in message
    assert seconds < 10


def test_a_rank_whose_rank0_never_comes_fails_naming_itself():
    port = pick_port()
    results = _run(ranks.join_only, [_rdv(1, 2, port, join_timeout_s=2.0)])
    _, message, seconds = results[1]
    assert "TP group tts_engine rank 1 of 2" in message and f"127.0.0.1:{port}" in message
    assert seconds < 30


def test_a_lost_rank_makes_the_collective_an_error_not_a_hang():
    port = pick_port()
    results = _run(ranks.lose_peer, [_rdv(r, 2, port, collective_timeout_s=5.0) for r in range(2)], timeout=40, expect=1)
    _, message, seconds = results[0]
    assert "TP group tts_engine rank 0 of 2" in message and "all_reduce failed" in message
    assert seconds < 30
