"""Factories that fail at startup, for the launcher's error-path tests."""

from __future__ import annotations

import time

from omni_runtime import StageConfigError, StagePayload


def build_ok():
    def ok(payload: StagePayload) -> StagePayload:
        return payload

    return ok


def build_fails(path: str = "/nonexistent/weights"):
    raise RuntimeError(f"cannot load weights from {path}")


def build_refuses(model_path: str | None = None, threads: int = 1):
    """Refuses its arguments as a factory does when only the build can judge them."""
    if model_path is not None:
        raise StageConfigError("model_path", None, "the directory holds no weights file", "pass the checkpoint directory with --weights")
    raise StageConfigError("threads", threads, "more threads than this machine has", "set threads to 8 or fewer",
                           more=(StageConfigError("threads", threads, "a second, independent problem", "also fix it"),))


def build_hangs(seconds: float = 120.0):
    time.sleep(seconds)
    return build_ok()


class BlocksLoop:
    """An async stage that (wrongly) blocks its event loop: only SIGKILL stops its process."""

    async def process(self, payload: StagePayload, ctx) -> StagePayload:
        time.sleep(payload.data.get("seconds", 120.0))
        return payload


def build_blocks_loop() -> BlocksLoop:
    return BlocksLoop()
