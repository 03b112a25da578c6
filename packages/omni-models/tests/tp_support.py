"""What the tensor-parallel tests run in each spawned rank, and the TP=1 reference they compare to.

A rank forms its group, loads the AR engine through the stage loader (which shards it because the
process is a TP rank), and rank 0 generates greedy codes for a set of requests alone and then all
in one batch, through the engine's ``StepScheduler``; the other ranks follow its steps.
"""

from __future__ import annotations

import threading
import traceback
from typing import Any

import torch

from omni_models.common.ar import ARConfig
from omni_models.common.components import Loader, build_ar
from omni_models.common.limits import GenerationLimits
from omni_models.common.sampling import SamplingParams, generator_for
from omni_models.common.scheduler import StepScheduler

LAYOUTS = ("parallel", "delay", "depth")
GREEDY = SamplingParams(temperature=0.0, top_k=0)


def config(layout: str) -> ARConfig:
    return ARConfig(num_codebooks=4, codebook_size=64, layout=layout, dim=64, layers=2, heads=4, max_seq_len=512, cond_dim=8, depth_dim=16)


def components(layout: str) -> dict[str, Any]:
    return {"llm": (build_ar, config(layout))}


def load(layout: str, load_format: str = "dummy", path: str | None = None) -> Any:
    return Loader(load_format, path, 7, "cpu").get(components(layout), "llm")


def _request(model: Any, i: int) -> tuple:
    with torch.inference_mode():
        prompt = model.prompt(list(range(3, 10 + 4 * i)), torch.randn(8, generator=torch.Generator().manual_seed(i)))
    return prompt, GenerationLimits(4, 12 + 3 * i), GREEDY, generator_for("tp", i)


def _codes(stream) -> list[list[int]]:
    return [frame.tolist() for frame in stream]


def generate(model: Any, n: int = 3) -> dict[str, list]:
    """Greedy codes of ``n`` requests, each alone, then all of them in one running batch."""
    scheduler = StepScheduler(model, name="tp-test")
    try:
        alone = [_codes(scheduler.submit(*_request(model, i))) for i in range(n)]
        streams = [scheduler.submit(*_request(model, i)) for i in range(n)]
        batched: list[Any] = [None] * n

        def drain(i: int) -> None:
            batched[i] = _codes(streams[i])

        threads = [threading.Thread(target=drain, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        peak = scheduler.peak_batch
        # deadline schedule: admitted together, prefilled in one packed forward (join_many); the
        # non-streamed requests sit out steps while the stream is due (step(only=...))
        with scheduler._cond:
            streams = [scheduler.submit(*_request(model, i), chunking=(1, 2) if i == 0 else None) for i in range(n)]
        mixed: list[Any] = [None] * n

        def drain_mixed(i: int) -> None:
            mixed[i] = _codes(streams[i])

        threads = [threading.Thread(target=drain_mixed, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {"alone": alone, "batched": batched, "peak_batch": peak, "mixed": mixed, "packed": max(scheduler.prefills), "sat_out": scheduler.sat_out}
    finally:
        scheduler.close()


def rank_main(rdv: dict[str, Any], checkpoint: str, out: Any) -> None:
    """Every layout with dummy weights (parity), then the checkpoint read slice by slice (bytes)."""
    from omni_runtime.distributed import Rendezvous, form

    torch.set_num_threads(1)
    try:
        group = form(Rendezvous.from_dict(rdv))
        result: dict[str, Any] = {"rank": group.rank}
        jobs = [(layout, "dummy", None) for layout in LAYOUTS] + [("parallel", "safetensors", checkpoint)]
        for layout, load_format, path in jobs:
            model = load(layout, load_format, path)
            key = layout if load_format == "dummy" else "checkpoint"
            result[f"{key}_param_bytes"] = sum(p.numel() * p.element_size() for p in model.decoder.blocks.parameters())
            result[f"{key}_bytes_read"] = getattr(model, "checkpoint_bytes_read", None)
            if group.rank == 0:
                result[key] = generate(model)
                model.decoder.mirror.stop()
            else:
                model.tp_follower.thread.join()
                result[key] = {"steps": model.tp_follower.steps}
        out.put(result)
    except Exception:  # noqa: BLE001 - the test reads it
        out.put({"rank": rdv["rank"], "error": traceback.format_exc()})


# -- the real Qwen3-TTS talker (tiny checkpoint in the published layout) ------------------------

QWEN3_REQUESTS = [{"text": f"sentence number {i} " * (1 + i % 3), "voice": ["vivian", "dylan"][i % 2], "seed": 100 + i,
                   "max_new_tokens": 10 + 2 * i, "temperature": 0} for i in range(3)]


class _Ctx:
    cancelled = False
    deadline = None


def qwen3_step_codes(engine: Any, prepared: list[Any], pick: Any, batch: Any = None) -> dict[int, list[list[int]]]:
    """Drive a talker batch (default: the engine's, whose scheduler must be idle) directly: every request
    joins, then steps of the rows ``pick(step, owners)`` chooses (None: all) until all finished; each
    request's frames (by index)."""
    from omni_models.qwen3_tts_12hz.batch import TalkerJob
    from omni_models.qwen3_tts_12hz.prompt import build_prompt

    batch = batch if batch is not None else engine.batch
    frames: dict[int, list[list[int]]] = {i: [] for i in range(len(prepared))}
    with torch.inference_mode():
        for i, p in enumerate(prepared):
            prompt, trailing, pad = build_prompt(batch.talker, p.inputs)
            f = p.fields
            batch.join(i, prompt, f.limits, TalkerJob(f.talker, f.sub, trailing, pad), generator_for(engine.seed, f.seed, engine.name))
        step = 0
        while batch:
            only = pick(step, set(batch.rows))
            for result in batch.step(only) if only is not None else batch.step():
                if result.frame is not None:
                    frames[result.owner].append(result.frame)
            step += 1
    return frames


def in_turns(step: int, owners: set[int]) -> set[int]:
    """A different subset of rows each step (row 0 every other step at most, the others in turn)."""
    return {o for o in owners if (o + step) % 3 != 0 and not (o == 0 and step % 2)} or owners


def qwen3_codes(pre: Any, engine: Any) -> dict[str, Any]:
    """Greedy codes of ``QWEN3_REQUESTS`` through the talker engine: each alone, then all in one batch
    (one packed prefill), then driving its batch with rows sitting out steps in turn."""
    prepared = [pre.prepare(r) for r in QWEN3_REQUESTS]
    alone = [engine.collect(p, _Ctx()).tolist() for p in prepared]
    with engine.scheduler._cond:  # admitted together: one running batch
        streams = [engine.submit(p, _Ctx(), chunked=False) for p in prepared]
    batched: list[Any] = [None] * len(streams)
    threads = [threading.Thread(target=lambda i=i: batched.__setitem__(i, [f.tolist() for f in streams[i]])) for i in range(len(streams))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    turns = qwen3_step_codes(engine, prepared, in_turns)
    return {"alone": alone, "batched": batched, "peak_batch": engine.scheduler.peak_batch, "prefills": engine.scheduler.prefills,
            "in_turns": [turns[i] for i in range(len(prepared))]}


def layer_bytes(talker: Any) -> int:
    return sum(p.numel() * p.element_size() for p in talker.model.layers.parameters())


def qwen3_rank_main(rdv: dict[str, Any], checkpoint: str, out: Any) -> None:
    """One rank of a TP=2 Qwen3 talker: rank 0 generates, rank 1 follows its steps."""
    from omni_models.qwen3_tts_12hz import stages
    from omni_runtime.distributed import Rendezvous, form

    torch.set_num_threads(1)
    try:
        group = form(Rendezvous.from_dict(rdv))
        pre = stages.build_preprocessing(model_path=checkpoint)
        engine = stages.build_tts_engine(model_path=checkpoint).engine
        result: dict[str, Any] = {"rank": group.rank, "layer_bytes": layer_bytes(engine.batch.talker)}
        if group.rank == 0:
            result.update(qwen3_codes(pre, engine))
            engine.scheduler.close()
            engine.batch.mirror.stop()
        else:
            engine.batch.tp_follower.thread.join()
            result["steps"] = engine.batch.tp_follower.steps
        out.put(result)
    except Exception:  # noqa: BLE001 - the test reads it
        out.put({"rank": rdv["rank"], "error": traceback.format_exc()})
