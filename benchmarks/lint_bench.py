"""omni-lint benchmark: lint time for the omni-models tree and synthetic trees.

Targets: under 2 s for omni-models, and linear growth with the number of
modules (the per-module time of the 500-module tree close to the 50-module
one). Each lint runs in-process from a cold cache (a new run parses
everything again); the best of ``--repeat`` runs is reported, with its CPU
time, because wall time on a shared machine includes other processes' load.
The CLI row adds interpreter start and imports (what a pre-commit run pays).

    python benchmarks/lint_bench.py [--sizes 50,500] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from omni_lint import Settings, lint

ROOT = Path(__file__).resolve().parents[1]
OMNI_MODELS = ROOT / "packages" / "omni-models" / "src" / "omni_models"
MODULES_PER_MODEL = 10  # pipeline + stages.py + handoff.py + 7 helpers + __init__ counted as modules below


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


def synthetic_tree(base: Path, modules: int) -> tuple[Path, int]:
    """A package ``synth`` of model folders, ``MODULES_PER_MODEL`` Python modules each (9 .py + __init__)."""
    root = base / f"tree{modules}"
    pkg = root / "synth"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    models = max(1, modules // MODULES_PER_MODEL)
    for m in range(models):
        for rel, text in _model_files(f"model{m:04d}").items():
            path = pkg / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    count = sum(1 for _ in pkg.rglob("*.py"))
    return pkg, count


def _time_lint(path: Path, repeat: int) -> tuple[float, float, object]:
    best_wall, best_cpu, report = float("inf"), float("inf"), None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        report = lint([path], Settings(base=path))
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return best_wall, best_cpu, report


def _time_cli(path: Path, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "omni_lint", "--quiet", str(path)], capture_output=True, check=False)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,500", help="synthetic tree sizes in modules (comma-separated)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    if OMNI_MODELS.is_dir():
        wall, cpu, report = _time_lint(OMNI_MODELS, args.repeat)
        rows.append(("omni-models (in-process)", report.files, report.pipelines, wall, cpu, report))
        cli = _time_cli(OMNI_MODELS, args.repeat)
        rows.append(("omni-models (CLI, cold start)", report.files, report.pipelines, cli, float("nan"), None))
    synthetic = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in [int(s) for s in args.sizes.split(",") if s.strip()]:
            path, count = synthetic_tree(Path(tmp), size)
            wall, cpu, report = _time_lint(path, args.repeat)
            rows.append((f"synthetic {size}", report.files, report.pipelines, wall, cpu, report))
            synthetic.append((count, wall, cpu))

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.1f} (wall time includes other processes' load; cpu s does not)\n")
    print(f"{'tree':<30} {'modules':>8} {'pipelines':>9} {'wall s':>8} {'cpu s':>7} {'ms/module':>10} {'findings':>9}")
    for name, files, pipelines, wall, cpu, report in rows:
        findings = "" if report is None else f"{report.errors}E/{report.infos}I"
        print(f"{name:<30} {files:>8} {pipelines:>9} {wall:>8.3f} {cpu:>7.3f} {1000 * wall / max(files, 1):>10.2f} {findings:>9}")
    if len(synthetic) >= 2:
        (n0, w0, c0), (n1, w1, c1) = synthetic[0], synthetic[-1]
        print(
            f"\ngrowth {n0} -> {n1} modules ({n1 / n0:.1f}x): wall {w1 / w0:.1f}x, cpu {c1 / c0:.1f}x; "
            f"per-module cpu ratio {(c1 / n1) / (c0 / n0):.2f} (1.00 = linear)"
        )
    if OMNI_MODELS.is_dir():
        wall = rows[0][3]
        cpu = rows[0][4]
        print(f"omni-models: {wall:.3f} s wall, {cpu:.3f} s cpu in-process (target < 2 s: wall {'met' if wall < 2 else 'NOT met'}, cpu {'met' if cpu < 2 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
