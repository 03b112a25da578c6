"""stream_to chunks in order with an explicit done signal; fan-in; routing."""

from __future__ import annotations

import pytest
import torch

from omni_runtime import RequestFailed

from .conftest import LoopThread


async def _stream(rt, data):
    handle = await rt.submit(data)
    chunks = [chunk async for chunk in handle.stream()]
    return chunks, await handle.result()


def test_stream_chunks_arrive_in_order_and_consumer_starts_before_the_final_payload(main_rt, loop_thread: LoopThread, tmp_path):
    chunks, result = loop_thread.run(_stream(main_rt, {"mode": "stream_src", "n": 25, "marker_dir": str(tmp_path)}))
    # the consumer (process back) saw every chunk in order, then the done signal with the producer's payload
    assert result["order"] == list(range(25))
    assert result["upstream"]["emitted"] == 25
    # the producer waited after chunk 0 until the consumer had it: consume() ran before process() returned
    assert result["upstream"]["saw_consumer"] is True
    # the terminal consumer's emitted chunks reached the client in order
    assert len(chunks) == 25
    for i, chunk in enumerate(chunks):
        assert chunk["sample_rate"] == 16000
        assert torch.equal(chunk["audio"], torch.full((4,), float(i)) / 100.0)


def test_concurrent_streams_do_not_interleave(main_rt, loop_thread: LoopThread, tmp_path):
    async def both():
        dirs = [tmp_path / f"r{i}" for i in range(6)]
        for d in dirs:
            d.mkdir()
        handles = [await main_rt.submit({"mode": "stream_src", "n": 10 + i, "marker_dir": str(d)}) for i, d in enumerate(dirs)]
        out = []
        for handle in handles:
            chunks = [c async for c in handle.stream()]
            out.append((len(chunks), (await handle.result())["order"]))
        return out

    for i, (count, order) in enumerate(loop_thread.run(both())):
        assert count == 10 + i
        assert order == list(range(10 + i))


def test_fan_in_merges_both_branches_once(main_rt, loop_thread: LoopThread):
    async def run():
        handle = await main_rt.submit({"mode": "fan", "x": 4})
        return handle, await handle.result()

    handle, result = loop_thread.run(run())
    pids = main_rt.instance_pids()
    assert result["parts"] == {
        "left": {"label": "left", "x": 8, "pid": pids["front"]},
        "right": {"label": "right", "x": 12, "pid": pids["back"]},
    }
    assert result["sum"] == 20
    assert {"fan", "left", "right", "join"} <= set(handle.stage_timings)


def test_route_fn_choosing_an_unknown_target_fails_the_request_with_the_stage_name(main_rt, loop_thread: LoopThread):
    async def run():
        handle = await main_rt.submit({"mode": "nowhere"})
        return await handle.result()

    with pytest.raises(RequestFailed) as info:
        loop_thread.run(run())
    assert str(info.value) == (
        "stage router (process front) routing: ValueError: route_fn returned ['nowhere'], which is not among next targets "
        "['produce', 'fan', 'boom', 'slow', 'stream_src', 'inj_explicit', 'tp_stage', 'lstream_src', 'pace_src']"
    )
    assert info.value.stage == "router" and info.value.process == "front"


def test_in_process_stream_hands_over_the_chunk_objects_themselves(main_rt, loop_thread: LoopThread):
    # async producer (aemit, bounded queue) -> sync consumer (blocking iterator), both in process front
    chunks, result = loop_thread.run(_stream(main_rt, {"mode": "lstream_src", "n": 200}))
    assert chunks == []  # lstream_sink is terminal but emits nothing to the client
    assert result["order"] == list(range(200))
    assert result["same_objects"] is True
    assert result["pid"] == main_rt.instance_pids()["front"]
