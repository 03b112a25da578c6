"""Stages for the multi-node tests (imported by the Ray actors through the driver's sys.path).

``make`` puts a tensor of ``nbytes`` bytes in the payload (above the 1 MiB
shared-memory threshold when asked), ``hold`` waits ``data["hold_s"]`` seconds
(so a request is in flight while a node is removed), ``finish`` checks the
tensor arrived intact and reports the node each stage ran on.
"""

from __future__ import annotations

import asyncio

import torch

from omni_runtime import StageContext


def _node() -> str:
    """The Ray node this stage runs on (the stages run inside Ray actors here)."""
    import ray

    return ray.get_runtime_context().get_node_id()


class Make:
    async def process(self, payload, ctx: StageContext):
        data = payload.data
        n = int(data.get("nbytes", 4096)) // 4
        data["tensor"] = torch.arange(n, dtype=torch.float32)
        data["nodes"] = {ctx.stage_name: _node()}
        return data


class Hold:
    async def process(self, payload, ctx: StageContext):
        data = payload.data
        data["nodes"][ctx.stage_name] = _node()
        hold = float(data.get("hold_s", 0.0))
        if hold:
            await asyncio.sleep(hold)
        return data


class Finish:
    async def process(self, payload, ctx: StageContext):
        data = payload.data
        tensor = data.pop("tensor")
        if not torch.equal(tensor, torch.arange(tensor.numel(), dtype=torch.float32)):
            raise ValueError("the tensor arrived corrupted")
        data["nodes"][ctx.stage_name] = _node()
        data["numel"] = tensor.numel()
        return data


def make() -> Make:
    return Make()


def hold() -> Hold:
    return Hold()


def finish() -> Finish:
    return Finish()


class LogSetup:
    """Reports how logging is set up in the process it runs in (an actor on a Ray node)."""

    async def process(self, payload, ctx: StageContext):
        import logging

        root = logging.getLogger()
        handlers = [h for h in root.handlers if h.get_name() == "omni"]
        return {
            "level": logging.getLevelName(root.getEffectiveLevel()),
            "formats": [type(h.formatter).__name__ for h in handlers],
            "deadline_left": None if ctx.deadline is None else ctx.deadline - __import__("time").monotonic(),
        }


def log_setup() -> LogSetup:
    return LogSetup()
