"""Stages for the main multi-purpose runtime test topology.

An entry ``router`` picks one scenario per request from ``data["mode"]``, so
one spawned topology serves many tests (spawning is the expensive part).
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import time
from typing import Any

import torch

from omni_runtime import RequestCancelled, StageContext, StagePayload

ENV_AT_IMPORT = os.environ.get("OMNI_TEST_STAGE_ENV")
"""Read when the worker imports this module: a stage's env is set before its factory is imported."""


def write_marker(marker_dir: str, name: str) -> None:
    """Leave this process's pid in a marker file the test polls for.

    Written under a temporary name and renamed, so a test that sees the file never reads it half-written.
    """
    marker = pathlib.Path(marker_dir, name)
    staging = marker.with_name(f".{name}.tmp")
    staging.write_text(str(os.getpid()))
    staging.replace(marker)


def _touch(data: dict[str, Any], name: str) -> None:
    write_marker(data["marker_dir"], name)


def route_by_mode(payload: StagePayload) -> str:
    return payload.data["mode"]


class Router:
    async def process(self, payload: StagePayload, ctx: StageContext) -> StagePayload:
        payload.data.setdefault("trace", []).append([ctx.stage_name, ctx.process_name, os.getpid()])
        return payload


def build_router() -> Router:
    return Router()


# -- identity in-process, bytes across a process ------------------------------


def make_values(seed: int, big: int = 0) -> dict[str, Any]:
    """Deterministic values of every codec type (the test recomputes them to compare).

    ``big`` adds a float32 tensor of that many elements (large ones travel through shared memory).
    """
    gen = torch.Generator().manual_seed(seed)
    extra = {"big": torch.randn(big, generator=torch.Generator().manual_seed(seed + 1))} if big else {}
    return {
        **extra,
        "f32": torch.randn(3, 5, generator=gen),
        "bf16": torch.randn(4, 2, 3, generator=gen).to(torch.bfloat16),
        "i64": torch.randint(-(2**40), 2**40, (7,), generator=gen),
        "u8": torch.randint(0, 256, (2, 2, 2), generator=gen, dtype=torch.uint8),
        "flag": torch.tensor([True, False, True]),
        "scalar": torch.tensor(3.5, dtype=torch.float64),
        "empty": torch.zeros(0, 4),
        "blob": bytes(torch.randint(0, 256, (257,), generator=gen, dtype=torch.uint8).tolist()),
        "nested": {"list": [1, 2.5, "x", None, True], "tuple": (1, "two"), "deep": {"k": [b"\x00\xff"]}},
    }


def produce(payload: StagePayload, ctx: StageContext) -> StagePayload:
    values = make_values(payload.data["seed"], payload.data.get("big", 0))
    out = StagePayload(payload.request_id, {**payload.data, "values": values, "producer_pid": os.getpid()})
    out.data["ids"] = {"payload": id(out), "data": id(out.data), "f32": id(values["f32"])}
    return out


def build_produce():
    return produce


class ConsumeLocal:
    def process(self, payload: StagePayload, ctx: StageContext) -> StagePayload:
        ids = payload.data.pop("ids")
        payload.data["same_object"] = {
            "payload": id(payload) == ids["payload"],
            "data": id(payload.data) == ids["data"],
            "f32": id(payload.data["values"]["f32"]) == ids["f32"],
            "pid": os.getpid() == payload.data["producer_pid"],
        }
        return payload


def build_consume_local() -> ConsumeLocal:
    return ConsumeLocal()


def build_cross():
    def cross(payload: StagePayload, ctx: StageContext) -> StagePayload:
        payload.data["cross_pid"] = os.getpid()
        payload.data["cross_process_name"] = ctx.process_name
        return payload

    return cross


# -- fan-in -------------------------------------------------------------------


def build_fan():
    def fan(payload: StagePayload) -> StagePayload:  # no ctx: called with the payload only
        payload.data["fanned"] = True
        return payload

    return fan


class Branch:
    def __init__(self, label: str) -> None:
        self.label = label

    async def process(self, payload: StagePayload, ctx: StageContext) -> StagePayload:
        await asyncio.sleep(0)
        return StagePayload(payload.request_id, {"label": self.label, "x": payload.data["x"] * (2 if self.label == "left" else 3), "pid": os.getpid()})


def build_branch(label: str) -> Branch:
    return Branch(label)


def merge_branches(parts: dict[str, StagePayload]) -> StagePayload:
    rid = next(iter(parts.values())).request_id
    return StagePayload(rid, {"parts": {name: p.data for name, p in sorted(parts.items())}})


def build_join():
    def join(payload: StagePayload, ctx: StageContext) -> StagePayload:
        parts = payload.data["parts"]
        payload.data["sum"] = sum(p["x"] for p in parts.values())
        return payload

    return join


# -- failures and cancellation ------------------------------------------------


def build_boom():
    def boom(payload: StagePayload, ctx: StageContext) -> StagePayload:
        raise ValueError(f"bad input {payload.data['x']}")

    return boom


class Slow:
    """Runs until cancelled (or ``seconds`` pass), leaving a marker when it saw the cancel."""

    def process(self, payload: StagePayload, ctx: StageContext) -> StagePayload:
        _touch(payload.data, f"slow-started-{payload.data['tag']}")
        deadline = time.monotonic() + payload.data.get("seconds", 60.0)
        while time.monotonic() < deadline:
            if ctx.cancelled:
                _touch(payload.data, f"slow-cancelled-{payload.data['tag']}")
                return payload
            time.sleep(0.01)
        payload.data["finished"] = True
        return payload


def build_slow() -> Slow:
    return Slow()


# -- streaming ----------------------------------------------------------------


def _wait_file(path: pathlib.Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.005)
    return False


class StreamSource:
    """Sync producer: emits ``n`` chunks; after the first, waits until the consumer has seen it."""

    def process(self, payload: StagePayload, ctx: StageContext) -> StagePayload:
        data = payload.data
        n = data["n"]
        saw_consumer = None
        i = 0
        while data.get("forever") or i < n:
            if ctx.cancelled:
                _touch(data, "producer-cancelled")
                return payload
            try:
                ctx.emit({"seq": i, "values": torch.full((4,), float(i)), "marker_dir": data["marker_dir"]})
            except RequestCancelled:
                _touch(data, "producer-cancelled")  # emit raises once the request is cancelled
                raise
            if i == 0 and not data.get("forever"):
                saw_consumer = _wait_file(pathlib.Path(data["marker_dir"], "consumer-got-0"), 20.0)
            if data.get("forever"):
                time.sleep(0.01)
            i += 1
        return StagePayload(payload.request_id, {"saw_consumer": saw_consumer, "emitted": n, "marker_dir": data["marker_dir"]})


def build_stream_source() -> StreamSource:
    return StreamSource()


class StreamSink:
    """Async consumer and terminal: re-emits each chunk to the client as audio."""

    async def consume(self, chunks, ctx: StageContext) -> StagePayload:
        order = []
        marker_dir = None
        try:
            async for chunk in chunks:
                marker_dir = chunk["marker_dir"]
                order.append(chunk["seq"])
                await ctx.aemit({"audio": chunk["values"].to(torch.float32) / 100.0, "sample_rate": 16000})
                if len(order) == 1:
                    # the first chunk is here while the producer still runs (it waits for this file)
                    write_marker(marker_dir, "consumer-got-0")
        finally:
            if ctx.cancelled and marker_dir is not None:
                write_marker(marker_dir, "consumer-cancelled")
        upstream = ctx.upstream_payload
        return StagePayload(ctx.request_id, {"order": order, "upstream": upstream.data if upstream is not None else None})


def build_stream_sink() -> StreamSink:
    return StreamSink()


# -- factory injection ----------------------------------------------------------


def build_inj_explicit(label: str, device: str, stage_name: str, gpu_id: int | None, model_path: str | None, tp_rank: int | None, tp_size: int):
    got = {"label": label, "device": device, "stage_name": stage_name, "gpu_id": gpu_id, "model_path": model_path, "tp_rank": tp_rank, "tp_size": tp_size}

    def run(payload: StagePayload, ctx: StageContext) -> StagePayload:
        payload.data["explicit"] = {**got, "ctx_device": ctx.device}
        payload.data["env"] = os.environ.get("OMNI_TEST_STAGE_ENV")
        payload.data["env_at_import"] = ENV_AT_IMPORT
        return payload

    return run


def build_inj_kwargs(**kwargs: Any):
    got = sorted(kwargs)

    def run(payload: StagePayload, ctx: StageContext) -> StagePayload:
        payload.data["kwargs_factory_got"] = got
        return payload

    return run


# -- tensor parallelism -----------------------------------------------------------


def build_tp_stage(tp_rank: int | None, tp_size: int, process_total_gpu_memory_fraction: float | None, tp_group=None):
    def run(payload: StagePayload, ctx: StageContext) -> StagePayload:
        _touch(payload.data, f"tp-rank-{tp_rank}")
        return StagePayload(payload.request_id, {
            "rank": tp_rank, "size": tp_size, "ctx_rank": ctx.tp_rank, "process_name": ctx.process_name,
            "process_fraction": process_total_gpu_memory_fraction, "pid": os.getpid(),
            "group": [tp_group.name, tp_group.rank, tp_group.size, tp_group.backend],
        })

    return run


def build_tp_after():
    def run(payload: StagePayload) -> StagePayload:
        return payload

    return run


# -- terminal audio streaming (sync helper) -------------------------------------------


def build_tone(device: str, total_gpu_memory_fraction: float | None):
    def run(payload: StagePayload, ctx: StageContext) -> StagePayload:
        for i in range(3):
            ctx.emit({"audio": torch.full((160,), (i + 1) / 10.0), "sample_rate": 16000})
        return StagePayload(payload.request_id, {"sample_rate": 16000, "device": device, "fraction": total_gpu_memory_fraction})

    return run


# -- in-process streaming: async producer, sync consumer ------------------------------


class LocalStreamSource:
    async def process(self, payload: StagePayload, ctx: StageContext) -> StagePayload:
        ids = []
        for i in range(payload.data["n"]):
            chunk = {"seq": i, "t": torch.arange(3) + i}
            ids.append(id(chunk))
            await ctx.aemit(chunk)
        return StagePayload(payload.request_id, {"ids": ids})


def build_local_stream_source() -> LocalStreamSource:
    return LocalStreamSource()


class LocalStreamSink:
    def consume(self, chunks, ctx: StageContext) -> StagePayload:
        received = []
        ids = []
        for chunk in chunks:  # a blocking iterator: this runs in a worker thread
            received.append(chunk["seq"])
            ids.append(id(chunk))
        sent_ids = ctx.upstream_payload.data["ids"]
        return StagePayload(ctx.request_id, {"order": received, "same_objects": ids == sent_ids, "pid": os.getpid()})


def build_local_stream_sink() -> LocalStreamSink:
    return LocalStreamSink()


# -- flow control across processes -----------------------------------------------


class PaceSource:
    """Sync producer: emits ``n`` chunks as fast as ``emit`` lets it; records when each emit returned."""

    def process(self, payload: StagePayload, ctx: StageContext) -> StagePayload:
        returned = []
        for i in range(payload.data["n"]):
            ctx.emit({"seq": i})
            returned.append(time.monotonic())
        return StagePayload(payload.request_id, {"emit_returned": returned})


def build_pace_source() -> PaceSource:
    return PaceSource()


PACE_SINK_DELAY_S = 0.02


class PaceSink:
    """Slow consumer in another process: takes a chunk, then works :data:`PACE_SINK_DELAY_S` on it."""

    def consume(self, chunks, ctx: StageContext) -> StagePayload:
        taken = []
        for chunk in chunks:
            taken.append((chunk["seq"], time.monotonic()))
            time.sleep(PACE_SINK_DELAY_S)
        upstream = ctx.upstream_payload
        return StagePayload(ctx.request_id, {"taken": taken, "emit_returned": upstream.data["emit_returned"] if upstream else []})


def build_pace_sink() -> PaceSink:
    return PaceSink()
