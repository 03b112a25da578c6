"""omni-lint benchmark: first run, cached second run and libcst-only parsing, with ratios.

For the omni-models tree and a generated 1,000-file tree, three measurements,
each in a fresh interpreter (imports done before the clock starts), best of
``--repeat``:

* ``parse``: ``libcst.parse_module`` on every ``.py`` file of the tree, one after
  the other (the floor any libcst-based linter pays);
* ``first``: ``omni_lint.lint`` with an empty cache directory (parallel workers
  on every core this process may use);
* ``second``: the same call again over the unchanged tree (results from the cache).

Targets (issue 14): first / parse <= 1.5 and first / second >= 10. The CLI rows
add interpreter start and imports (what a pre-commit run pays).

    python benchmarks/lint_bench.py [--files 1000] [--repeat 3] [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OMNI_MODELS = ROOT / "packages" / "omni-models" / "src" / "omni_models"
FILES_PER_MODEL = 10  # __init__, handoff, stages and 7 helpers


def _helper(model: str, index: int) -> str:
    nxt = f"from .helper{index + 1} import step{index + 1}\n" if index < 6 else ""
    call = f"step{index + 1}(value)" if index < 6 else "value"
    return textwrap.dedent(
        f"""
        \"\"\"Synthetic helper {index} of {model}: a call chain, a class, a cache.\"\"\"
        import functools
        {nxt.strip()}

        _CACHE{index}: dict = {{}}
        LIMIT{index} = {index * 10}


        def cached{index}(key):
            value = _CACHE{index}.get(key)
            if value is None:
                value = _CACHE{index}[key] = len(key) + LIMIT{index}
            return value


        class Block{index}:
            def __init__(self, width=4):
                self.width = width

            def forward(self, value):
                return [v * self.width for v in value]


        @functools.lru_cache(maxsize=None)
        def table{index}():
            return tuple(range(LIMIT{index}))


        def step{index}(value):
            value = Block{index}().forward(value)
            cached{index}(str(value))
            return {call}
        """
    ).lstrip()


def _model_files(model: str) -> dict[str, str]:
    files = {
        f"{model}/__init__.py": "",
        f"{model}/handoff.py": textwrap.dedent(
            """
            _PREPARED: dict = {}


            def publish(request_id, value):
                _PREPARED[request_id] = value


            def take(request_id):
                return _PREPARED.pop(request_id)
            """
        ).lstrip(),
        f"{model}/stages.py": textwrap.dedent(
            """
            from . import handoff
            from .helper0 import step0


            def build_preprocessing():
                def process(payload):
                    handoff.publish(payload.request_id, step0([1, 2, 3]))
                    return payload
                return process


            def build_tts_engine():
                def process(payload):
                    payload.data["codes"] = handoff.take(payload.request_id)
                    return payload
                return process


            def build_vocoder():
                return lambda payload: payload
            """
        ).lstrip(),
        f"{model}/pipeline.yaml": textwrap.dedent(
            f"""
            name: synth/{model}
            stages:
              - name: preprocessing
                factory: synth.{model}.stages:build_preprocessing
                next: tts_engine
              - name: tts_engine
                factory: synth.{model}.stages:build_tts_engine
                next: vocoder
                stream_to: vocoder
              - name: vocoder
                factory: synth.{model}.stages:build_vocoder
                terminal: true
            process_local_edges:
              - {{src: preprocessing, dst: tts_engine, reason: prepared requests live in handoff._PREPARED}}
            """
        ).lstrip(),
    }
    for index in range(7):
        files[f"{model}/helper{index}.py"] = _helper(model, index)
    return files


def synthetic_tree(base: Path, files: int) -> Path:
    """A package ``synth`` of model folders with ``FILES_PER_MODEL`` Python files each."""
    pkg = base / "synth"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for m in range(max(1, files // FILES_PER_MODEL)):
        for rel, text in _model_files(f"model{m:04d}").items():
            path = pkg / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return pkg


def _measure(kind: str, tree: Path, cache: Path, jobs: int | None) -> dict:
    """Runs in a fresh interpreter (``--measure``): time one piece of work, imports excluded."""
    import libcst

    from omni_lint import Settings, lint
    from omni_lint.engine import _preload

    _preload()  # imports (libcst, omni-config, pydantic) outside the clock, as libcst's for the parse row
    files = sorted(tree.rglob("*.py"))
    start, cpu = time.perf_counter(), _cpu()
    if kind == "parse":
        for path in files:
            libcst.parse_module(path.read_text(encoding="utf-8"))
        return {"seconds": time.perf_counter() - start, "cpu": _cpu() - cpu, "files": len(files)}
    report = lint([tree], Settings(base=tree.parent), cwd=tree.parent, cache_dir=cache, jobs=jobs)
    return {"seconds": time.perf_counter() - start, "cpu": _cpu() - cpu, "files": report.files, "cached": report.cached}


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the worker processes)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _run(args: list[str]) -> dict:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _best(kind: str, tree: Path, cache: Path, repeat: int, jobs: int | None) -> dict:
    best: dict = {}
    for _ in range(repeat):
        if kind == "first":
            shutil.rmtree(cache, ignore_errors=True)
        extra = ["--jobs", str(jobs)] if jobs else []
        found = _run(["--measure", kind, str(tree), str(cache), *extra])
        if not best or found["seconds"] < best["seconds"]:
            best = found
    return best


def _cli(tree: Path, cache: Path, repeat: int, fresh: bool) -> float:
    best = float("inf")
    for _ in range(repeat):
        if fresh:
            shutil.rmtree(cache, ignore_errors=True)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "omni_lint", "--quiet", "--cache-dir", str(cache), str(tree)], capture_output=True, check=False, cwd=tree.parent)
        best = min(best, time.perf_counter() - start)
    return best


def _table(name: str, tree: Path, repeat: int, jobs: int | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        parse = _best("parse", tree, cache, repeat, jobs)
        first = _best("first", tree, cache, repeat, jobs)
        second = _best("second", tree, cache, repeat, jobs)
        cli_first = _cli(tree, cache, repeat, fresh=True)
        cli_second = _cli(tree, cache, repeat, fresh=False)
    print(f"\n{name}: {parse['files']} .py files in the tree, {first['files']} read by omni-lint")
    print(f"  {'measurement':<34} {'wall s':>8} {'cpu s':>8}")
    print(f"  {'libcst parse of every file':<34} {parse['seconds']:>8.3f} {parse['cpu']:>8.3f}")
    print(f"  {'omni-lint first run (cold cache)':<34} {first['seconds']:>8.3f} {first['cpu']:>8.3f}")
    print(f"  {'omni-lint second run (cached)':<34} {second['seconds']:>8.3f} {second['cpu']:>8.3f}   ({second['cached']} folders from the cache)")
    print(f"  {'CLI first run (with start-up)':<34} {cli_first:>8.3f}")
    print(f"  {'CLI second run (with start-up)':<34} {cli_second:>8.3f}")
    ratio_parse = first["seconds"] / parse["seconds"]
    ratio_cache = first["seconds"] / second["seconds"]
    print(f"  first / parse  = {ratio_parse:6.2f} wall, {first['cpu'] / parse['cpu']:.2f} cpu   (target <= 1.5 wall: {'met' if ratio_parse <= 1.5 else 'NOT met'})")
    print(f"  first / second = {ratio_cache:6.1f} wall, {first['cpu'] / second['cpu']:.1f} cpu   (target >= 10 wall: {'met' if ratio_cache >= 10 else 'NOT met'})")
    print(f"  CLI first / CLI second = {cli_first / cli_second:.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000, help="Python files in the generated tree (default 1000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is shown (default 3)")
    parser.add_argument("--jobs", type=int, default=None, help="omni-lint worker processes (default: every usable core)")
    parser.add_argument("--measure", nargs=3, metavar=("KIND", "TREE", "CACHE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        kind, tree, cache = args.measure
        print(json.dumps(_measure(kind, Path(tree), Path(cache), args.jobs)))
        return 0
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {cores} usable cores, load average {load:.1f}; omni-lint jobs: {args.jobs or cores}")
    if OMNI_MODELS.is_dir():
        _table("omni-models", OMNI_MODELS, args.repeat, args.jobs)
    with tempfile.TemporaryDirectory() as tmp:
        _table(f"generated tree ({args.files} files)", synthetic_tree(Path(tmp), args.files), args.repeat, args.jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
