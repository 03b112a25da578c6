"""In-process units: factory injection, stage calling conventions, the chunk channel."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from omni_runtime import RequestCancelled, StageContext, StagePayload
from omni_runtime.worker.channel import ChunkChannel
from omni_runtime.worker.factory import Injection, import_dotted, injected_kwargs, resolve_device
from omni_runtime.worker.stage import StageAdapter, as_payload

INJ = Injection(gpu_id=1, device="cuda:1", total_gpu_memory_fraction=0.2, process_total_gpu_memory_fraction=0.5,
                stage_name="vocoder", model_path="/m", tp_rank=None, tp_size=1)


def test_injection_only_for_explicitly_named_parameters():
    def explicit(size, device, gpu_id, *, stage_name, total_gpu_memory_fraction):
        return None

    assert injected_kwargs(explicit, INJ, {"size": 3}) == {
        "size": 3, "device": "cuda:1", "gpu_id": 1, "stage_name": "vocoder", "total_gpu_memory_fraction": 0.2,
    }

    def var_kwargs(size, **kwargs):
        return None

    assert injected_kwargs(var_kwargs, INJ, {"size": 3}) == {"size": 3}
    # a factory_args value wins over the injected one of the same name
    assert injected_kwargs(explicit, INJ, {"size": 3, "device": "cpu"})["device"] == "cpu"


def test_resolve_device():
    assert resolve_device(None, None) == ("cpu", None)
    assert resolve_device(2, None) == ("cuda:2", 2)
    assert resolve_device(2, "cpu") == ("cpu", None)
    with pytest.raises(ValueError, match="device must be 'cpu', 'cuda' or None, got 'tpu'"):
        resolve_device(0, "tpu")


def test_import_dotted_forms_and_errors():
    assert import_dotted("os.path:join") is import_dotted("os.path.join")
    with pytest.raises(ImportError, match="module 'os.path' has no attribute 'nope' \\(from 'os.path:nope'\\)"):
        import_dotted("os.path:nope")


def _ctx(loop: asyncio.AbstractEventLoop, emitted: list) -> StageContext:
    async def aemit(chunk):
        emitted.append(chunk)

    return StageContext(request_id="r", stage_name="s", process_name="p", device="cpu", tp_rank=None, tp_size=1,
                        cancel_event=asyncio.Event(), aemit=aemit, loop=loop)


def test_stage_adapter_calling_conventions():
    class SyncWithCtx:
        def process(self, payload, ctx):
            ctx.emit({"n": 1})
            return StagePayload(payload.request_id, {"thread": threading.current_thread().name, "stage": ctx.stage_name})

    class AsyncNoCtx:
        async def process(self, payload):
            return {"thread": threading.current_thread().name}

    def plain(payload, ctx):
        return payload

    async def run():
        loop = asyncio.get_running_loop()
        emitted: list = []
        ctx = _ctx(loop, emitted)
        pool = ThreadPoolExecutor(1, thread_name_prefix="stage-worker")
        payload = StagePayload("r", {})
        a = await StageAdapter("a", SyncWithCtx()).process(payload, ctx, pool)
        b = as_payload("b", "r", await StageAdapter("b", AsyncNoCtx()).process(payload, ctx, pool))
        c = await StageAdapter("c", plain).process(payload, ctx, pool)
        pool.shutdown()
        return a, b, c, payload, emitted

    a, b, c, payload, emitted = asyncio.run(run())
    assert a.data["thread"].startswith("stage-worker") and a.data["stage"] == "s"  # sync runs in a worker thread
    assert b.data["thread"] == "MainThread"  # async runs on the event loop
    assert c is payload
    assert emitted == [{"n": 1}]


def test_stage_object_without_process_or_consume_is_rejected():
    with pytest.raises(TypeError, match="stage x: the factory returned int, which has neither process"):
        StageAdapter("x", 42)
    with pytest.raises(TypeError, match="stage x returned str; a stage must return a StagePayload"):
        as_payload("x", "r", "oops")


def test_emit_on_the_event_loop_is_an_error_that_names_aemit():
    async def run():
        ctx = _ctx(asyncio.get_running_loop(), [])
        ctx.emit({"n": 1})

    with pytest.raises(RuntimeError, match="must use 'await ctx.aemit\\(chunk\\)'"):
        asyncio.run(run())


def test_channel_keeps_order_applies_back_pressure_and_ends_at_done():
    async def run():
        loop = asyncio.get_running_loop()
        channel = ChunkChannel(loop, producers=1, maxsize=2)
        got: list = []
        ends: list = []

        async def consume():
            async for item in channel.aiter(ends.append):
                got.append(item)
                await asyncio.sleep(0)

        consumer = loop.create_task(consume())
        for i in range(10):
            await channel.put(i)
            assert len(channel._items) <= 2
        channel.finish(StagePayload("r", {"final": True}))
        await consumer
        return got, ends

    got, ends = asyncio.run(run())
    assert got == list(range(10))
    assert ends[0].data == {"final": True}


def test_channel_waits_for_every_producer_and_blocking_iteration_works():
    async def run():
        loop = asyncio.get_running_loop()
        channel = ChunkChannel(loop, producers=2)
        channel.put_nowait("a")
        channel.finish(None)
        channel.put_nowait("b")
        channel.finish(StagePayload("r", {"last": 1}))
        ends: list = []
        items = await loop.run_in_executor(None, lambda: list(channel.iter_blocking(ends.append)))
        return items, ends

    items, ends = asyncio.run(run())
    assert items == ["a", "b"]
    assert ends[0].data == {"last": 1}


def test_channel_abort_wakes_the_consumer_with_cancellation():
    async def run():
        loop = asyncio.get_running_loop()
        channel = ChunkChannel(loop, producers=1)
        waiter = loop.create_task(channel.get())
        await asyncio.sleep(0)
        channel.abort()
        with pytest.raises(RequestCancelled):
            await waiter
        with pytest.raises(RequestCancelled):
            await channel.put(1)

    asyncio.run(run())


def test_synthesize_joins_streamed_audio_of_either_array_kind_along_time():
    import numpy as np
    import torch

    from omni_runtime.parent.sync import join_audio

    joined = join_audio([np.zeros((1, 2), np.float32), np.ones((1, 3), np.float32)])
    assert isinstance(joined, np.ndarray) and joined.shape == (1, 5) and joined[0, 2:].tolist() == [1.0, 1.0, 1.0]
    tensors = join_audio([torch.zeros(2), torch.ones(3)])
    assert isinstance(tensors, torch.Tensor) and tensors.tolist() == [0.0, 0.0, 1.0, 1.0, 1.0]
