"""Stages for the replica tests: each records which OS process ran it."""

from __future__ import annotations

import os
import pathlib
import time

from omni_runtime import StageContext, StagePayload


class Record:
    def __init__(self, stage_name: str) -> None:
        self.stage_name = stage_name

    def process(self, payload: StagePayload, ctx: StageContext) -> StagePayload:
        data = payload.data
        data.setdefault("seen", []).append({"stage": ctx.stage_name, "process": ctx.process_name, "pid": os.getpid()})
        if data.get("hold") and self.stage_name == "rep_a":
            # park until cancelled (the test kills this process meanwhile)
            pathlib.Path(data["marker_dir"], f"held-{payload.request_id}-{os.getpid()}").write_text("")
            while not ctx.cancelled:
                time.sleep(0.01)
        return payload


def build_record(stage_name: str) -> Record:
    return Record(stage_name)
