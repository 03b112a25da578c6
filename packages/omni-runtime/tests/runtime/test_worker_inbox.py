"""A worker's receive path, run in this process against real sockets.

The worker takes messages from its inbox's reader callback and handles them
synchronously; a message whose payload is decoded off the event loop (shared
memory) finishes in a task while the messages behind it wait. These tests
play the upstream process and the parent around one real ``Worker`` and
check that streamed chunks stay in order across such decodes, and that a
cancel or a shutdown queued behind them is still handled.
"""

from __future__ import annotations

import asyncio
from typing import Any

import torch

from omni_runtime import envelope as E
from omni_runtime.transport import AsyncInbox, AsyncOutbox, Codec, RunDir, ShmPool, ShmReader
from omni_runtime.worker import Worker, WorkerOptions

from .topologies import S, topology

DEADLINE = 60.0
BIG = 1 << 19  # float32 elements: 2 MiB, over the 1 MiB threshold, so the chunk travels through shared memory


def stream_topology():
    return topology(
        [
            {"name": "src", "factory": f"{S}:build_stream_source", "process": "front", "stream_to": "sink", "next": "sink"},
            {"name": "sink", "factory": f"{S}:build_stream_sink", "process": "back", "terminal": True},
        ]
    )


class Harness:
    """The ``back`` worker on this loop; this test is its upstream (``front``) and its parent."""

    def __init__(self, run: RunDir) -> None:
        topo = stream_topology()
        instance = next(i for i in topo.instances if i.name == "back")
        self.run = run
        self.parent = AsyncInbox(run.address(E.PARENT), codec=Codec(reader=ShmReader(allowed_prefix=run.shm_prefix)))
        self.pool = ShmPool(run.shm_prefix + "front-", budget_bytes=64 << 20)
        self.front = AsyncOutbox(run.address("back"), codec=Codec(pool=self.pool), send_timeout=DEADLINE)
        self.worker = Worker(topo, instance, run.to_dict(), WorkerOptions(shm_budget_bytes=64 << 20))
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.ensure_future(self.worker.run())
        ready = await self.expect()
        assert ready.header[E.KIND] == E.READY, ready.header

    async def expect(self) -> Any:
        msg = await self.parent.recv(timeout=DEADLINE)
        assert msg is not None, f"the worker sent nothing within {DEADLINE}s"
        return msg

    async def chunk(self, rid: str, seq: int, marker_dir: str) -> torch.Tensor:
        values = torch.full((BIG if seq % 2 == 0 else 4,), float(seq))
        header = E.header(E.CHUNK, rid=rid, stage="sink", src="src", has_data=True)
        await self.front.send(header, {"seq": seq, "values": values, "marker_dir": marker_dir})
        return values

    async def stop(self) -> None:
        await self.front.send(E.header(E.SHUTDOWN))
        assert self.task is not None
        await asyncio.wait_for(self.task, DEADLINE)

    def close(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
        self.front.close(linger=0)
        self.parent.close()
        self.pool.close()


def run_harness(test) -> Any:
    run = RunDir.create()

    async def main():
        harness = Harness(run)
        try:
            await harness.start()
            return await test(harness)
        finally:
            harness.close()

    try:
        return asyncio.run(main())
    finally:
        leftover = run.cleanup()
        assert not leftover, f"segments still present at teardown: {leftover}"


def test_chunks_stay_in_order_across_decodes_off_the_event_loop(tmp_path):
    async def scenario(h: Harness):
        rid = "r" * 32
        sent = [await h.chunk(rid, seq, str(tmp_path)) for seq in range(12)]
        await h.front.send(E.header(E.DONE, rid=rid, stage="sink", src="src", has_data=True), {"emitted": 12})
        outputs = []
        while True:
            msg = await h.expect()
            kind = msg.header[E.KIND]
            assert kind in (E.OUT, E.RESULT), msg.header
            if kind == E.RESULT:
                result = msg.payload()
                break
            outputs.append(msg.payload()["audio"])
        await h.stop()
        return sent, outputs, result

    sent, outputs, result = run_harness(scenario)
    # the sink saw the chunks in the order they were sent, large (shared memory) and small alike
    assert result["order"] == list(range(12))
    assert result["upstream"] == {"emitted": 12}
    assert len(outputs) == 12
    for values, audio in zip(sent, outputs):
        assert torch.equal(audio, values / 100.0)


def test_cancel_and_shutdown_queued_behind_a_large_decode_are_handled(tmp_path):
    async def scenario(h: Harness):
        rid = "c" * 32
        await h.chunk(rid, 0, str(tmp_path))  # large: decoded in a thread
        await h.front.send(E.header(E.CANCEL, rid=rid))
        await h.chunk(rid, 2, str(tmp_path))  # after the cancel: dropped, its shared memory released
        await h.stop()  # returns only if the shutdown behind them was handled
        assert h.pool.busy_segments == 0
        return rid not in h.worker.requests and rid in h.worker.finished

    assert run_harness(scenario) is True
