"""A real parent process for the parent-death test: start a runtime, print its pids, wait.

Run as ``python -m runtime_stages.parent_script`` with ``packages/omni-runtime/tests`` on PYTHONPATH.
"""

from __future__ import annotations

import asyncio
import json
import sys

from omni_compiler import compile as compile_topology
from omni_config.schema import PipelineConfig
from omni_runtime import Runtime


async def main() -> None:
    config = PipelineConfig.model_validate(
        {
            "stages": [
                {"name": "a", "factory": "runtime_stages.broken:build_ok", "process": "pa", "next": "b"},
                {"name": "b", "factory": "runtime_stages.broken:build_ok", "process": "pb", "terminal": True},
            ]
        }
    )
    rt = Runtime(compile_topology(config), device="cpu", log=lambda _m: None)
    await rt.start()
    handle = await rt.submit({"text": "hi"})
    await handle.result()
    print(json.dumps({"pids": rt.instance_pids(), "run_dir": rt.run.path, "shm_prefix": rt.run.shm_prefix}), flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
