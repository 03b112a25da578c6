"""Input appended to a running request crosses nodes on the Ray backend: the append takes the cancel's control route."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from test_cluster import one_stage_topology, run

from omni_runtime import Runtime

TESTS = str(Path(__file__).resolve().parents[1])
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)  # runtime_stages, for the actors (they get the driver's sys.path)


def test_pieces_appended_on_the_head_reach_the_stage_on_another_node_in_order(cluster):
    topology = one_stage_topology("runtime_stages.appending:build_collect", "far", "node_b")

    async def scenario():
        runtime = Runtime(topology, backend="ray", device="cpu", log=None, startup_timeout=120)
        await runtime.start()
        try:
            assert runtime.supports_append()
            handle = await runtime.submit({"text": "a"}, timeout=60.0)
            chunks = []

            async def read():
                async for chunk in handle.stream():
                    chunks.append(chunk["piece"])

            reader = asyncio.ensure_future(read())
            await handle.append("b")
            await handle.append("c", final=True)
            result = await handle.result()
            await reader
            return result, chunks
        finally:
            await runtime.shutdown()

    result, chunks = run(scenario())
    assert result["text"] == "abc" and chunks == ["b", "c"]
