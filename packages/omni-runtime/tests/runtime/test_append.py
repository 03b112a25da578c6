"""Input appended to a running request reaches its entry stage's ``append`` hook, in order; refusals are clear."""

from __future__ import annotations

import asyncio

import pytest

from omni_runtime import RequestFailed, Runtime
from omni_runtime.errors import AppendRefused

from .topologies import single_topology

A = "runtime_stages.appending"


def test_pieces_reach_the_running_request_in_order_and_close_ends_it():
    async def scenario():
        async with Runtime(single_topology(f"{A}:build_collect"), device="cpu", log=lambda _m: None) as rt:
            assert rt.supports_append()
            handle = await rt.submit({"text": "a"})
            chunks = []

            async def read():
                async for chunk in handle.stream():
                    chunks.append(chunk["piece"])

            reader = asyncio.ensure_future(read())
            for piece in ("b", "c"):
                await handle.append(piece)
            await handle.append("d", final=True)
            result = await handle.result()
            await reader
            with pytest.raises(AppendRefused) as closed:
                await handle.append("e")
            assert closed.value.reason == "input_closed"
            other = await rt.submit({"text": "x"})
            await other.close_input()
            done = await other.result()
            cancelled = await rt.submit({"text": "y"})
            await cancelled.cancel()
            with pytest.raises(AppendRefused) as finished:
                await cancelled.append("late")
            refused = await rt.submit({"text": "x"})
            await refused.append("refuse")
            with pytest.raises(RequestFailed) as failed:
                await refused.result()
            return result, chunks, done, finished.value.reason, failed.value

    result, chunks, done, finished, failed = asyncio.run(scenario())
    assert result["text"] == "abcd" and chunks == ["b", "c", "d"]
    assert done["text"] == "x"
    assert finished == "finished"
    assert failed.kind == "invalid_request" and failed.param == "text"


def test_a_model_whose_entry_stage_has_no_hook_refuses_append_before_sending():
    async def scenario():
        async with Runtime(single_topology("runtime_stages.noop:build_noop"), device="cpu", log=lambda _m: None) as rt:
            assert not rt.supports_append()
            handle = await rt.submit({"text": "a"})
            with pytest.raises(AppendRefused) as caught:
                await handle.append("b")
            await handle.result()
            return caught.value

    refused = asyncio.run(scenario())
    assert refused.reason == "not_supported" and "'only'" in refused.message
