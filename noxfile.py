"""Sessions: ruff, one per package in its own venv, a compiler-only install, the
cross-package integration suite, and the benchmarks.

`nox` runs every test session; `nox -s bench` (and bench_*) run benchmarks.
Sibling packages are installed from this checkout (they are not on PyPI), and
torch is pinned through constraints.txt to the CPU build on local disk.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

import nox

ROOT = Path(__file__).parent
nox.options.sessions = ["lint", "omni_config", "omni_compiler", "compiler_only", "omni_lint", "omni_runtime", "omni_models", "integration", "browser", "ray", "parity"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = False

CONSTRAINTS = ("-c", str(ROOT / "constraints.txt"))
PKG = {name: str(ROOT / "packages" / name) for name in ("omni-config", "omni-compiler", "omni-runtime", "omni-models", "omni-lint")}
LOCAL_DEPS = {
    "omni-config": [],
    "omni-compiler": ["omni-config"],
    "omni-runtime": ["omni-config", "omni-compiler"],
    "omni-models": ["omni-config", "omni-compiler", "omni-runtime"],
    "omni-lint": ["omni-config"],
}
NEEDS_TORCH = {"omni-runtime", "omni-models"}


def _install(session: nox.Session, package: str, extras: str = "[test]", editable: bool = True) -> None:
    if package in NEEDS_TORCH:
        session.install(*CONSTRAINTS, "torch==2.13.0")
    args = []
    for dep in LOCAL_DEPS[package]:
        args += ["-e", PKG[dep]] if editable else [PKG[dep]]
    target = PKG[package] + extras
    args += ["-e", target] if editable else [target]
    session.install(*CONSTRAINTS, *args)


def _pytest(session: nox.Session, *paths: str) -> None:
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *paths, *session.posargs)


def _package_session(package: str):
    def session_fn(session: nox.Session) -> None:
        _install(session, package)
        _pytest(session, f"packages/{package}/tests")

    session_fn.__doc__ = f"Install {package} (and its local deps) in its own venv and run its tests."
    return session_fn


for _name in PKG:
    nox.session(name=_name.replace("-", "_"))(_package_session(_name))


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the whole tree with the rule set pinned in pyproject.toml (style drift fails fast, before the tests)."""
    session.install(*CONSTRAINTS, "ruff", "grimp")
    session.run("ruff", "check", ".")
    # no import cycles among the omni packages, type-level imports included (grimp reads the source, imports nothing)
    session.run("python", str(ROOT / ".ci" / "import_cycles.py"), env={"PYTHONPATH": os.pathsep.join(str(Path(PKG[p]) / "src") for p in PKG)})


@nox.session
def compiler_only(session: nox.Session) -> None:
    """What CI users install: omni-config + omni-compiler alone (no torch, no libcst); validate every config."""
    session.install(*CONSTRAINTS, PKG["omni-config"], PKG["omni-compiler"])
    session.run("python", "-c", (
        "import importlib.util, sys\n"
        "for heavy in ('torch', 'libcst', 'numpy', 'omni_runtime', 'omni_models', 'omni_lint'):\n"
        "    assert importlib.util.find_spec(heavy) is None, heavy + ' must not be installed with omni-compiler'\n"
        "import omni_config, omni_compiler, omni_compiler.cli\n"
        "print('compiler-only install: torch and libcst are not importable')"
    ))
    for path in sorted(glob.glob(str(ROOT / "configs" / "*.yaml"))):
        expected = 1 if path.endswith(".invalid.yaml") else 0
        session.log(f"omni-compile validate {Path(path).name} (expect exit {expected})")
        session.run("omni-compile", "validate", path, success_codes=[expected])
        session.run("omni-compile", "show", path, "--format", "json", success_codes=[expected], silent=True)


@nox.session
def integration(session: nox.Session) -> None:
    """Cross-package and end-to-end tests (tests/), with every package installed; lints omni-models."""
    session.install(*CONSTRAINTS, "torch==2.13.0")
    args = []
    for name in PKG:
        args += ["-e", PKG[name] + "[test]"]
    session.install(*CONSTRAINTS, *args)
    models = ROOT / "packages" / "omni-models" / "src" / "omni_models"
    if models.is_dir():
        session.run("omni-lint", str(models))
    _pytest(session, "tests")


@nox.session
def ray(session: nox.Session) -> None:
    """The Ray backend on a real three-node Ray cluster on 127.0.0.1 (omni-runtime[ray], and omni-models for Higgs)."""
    session.install(*CONSTRAINTS, "torch==2.13.0")
    args = []
    for name in ("omni-config", "omni-compiler"):
        args += ["-e", PKG[name]]
    args += ["-e", PKG["omni-runtime"] + "[test,ray]", "-e", PKG["omni-models"]]
    session.install(*CONSTRAINTS, *args)
    session.env.update({"OMNI_REQUIRE_RAY": "1", "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
    _pytest(session, "packages/omni-runtime/tests/ray", "tests/ray")


@nox.session
def bench(session: nox.Session) -> None:
    """Compiler benchmark: compile time at 100 / 1,000 / 10,000 stages and CLI cold start."""
    session.install(*CONSTRAINTS, PKG["omni-config"], PKG["omni-compiler"])
    session.run("python", "benchmarks/compile_bench.py", *session.posargs)


@nox.session
def bench_lint(session: nox.Session) -> None:
    """omni-lint benchmark: first run, cached run and libcst-only parsing on omni-models and a 1,000-file tree."""
    _install(session, "omni-lint", extras="")
    session.run("python", "benchmarks/lint_bench.py", *session.posargs)


@nox.session
def bench_runtime(session: nox.Session) -> None:
    """Runtime benchmark: transport throughput, per-hop latency, omni vs Ray Serve."""
    _install(session, "omni-runtime", extras="[test]")
    session.install(*CONSTRAINTS, "ray[serve]")
    session.run("python", "benchmarks/runtime_bench.py", *session.posargs)


@nox.session
def bench_ray(session: nox.Session) -> None:
    """Ray backend benchmark: the 4-stage no-op pipeline local vs Ray (one node, two nodes) vs Ray Serve; TCP vs IPC hops."""
    _install(session, "omni-runtime", extras="[test,ray]")
    session.install(*CONSTRAINTS, "ray[serve]")
    session.env.update({"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
    session.run("python", "benchmarks/ray_bench.py", *session.posargs)


@nox.session
def chaos(session: nox.Session) -> None:
    """Chaos benchmark (not in the default set): omni serve under load while workers are killed, then 10x overload."""
    _install(session, "omni-models", extras="")
    session.install(*CONSTRAINTS, "httpx")
    session.run("python", "benchmarks/chaos_bench.py", *session.posargs)


@nox.session
def bench_models(session: nox.Session) -> None:
    """`omni bench` for every model on the CPU: throughput and TTFA at concurrency 1, 8 and 32 with ratios (--split adds the fully split topology)."""
    _install(session, "omni-models", extras="")
    session.run("python", "benchmarks/models_bench.py", *session.posargs)


@nox.session
def bench_voice(session: nox.Session) -> None:
    """Time to first audio on the WebSocket stream vs streamed HTTP, and barge-in, for espeak and Qwen3-TTS."""
    _install(session, "omni-models", extras="")
    _install(session, "omni-runtime")
    session.run("python", "benchmarks/voice_stream_bench.py", *session.posargs)


@nox.session
def bench_ws_append(session: nox.Session) -> None:
    """Qwen3-TTS 12 Hz on the WebSocket: true append (one request per answer) vs separate segments, time to first audio."""
    _install(session, "omni-models", extras="")
    _install(session, "omni-runtime")
    session.run("python", "benchmarks/ws_append_bench.py", *session.posargs)


@nox.session
def browser(session: nox.Session) -> None:
    """omni serve's topology page in Debian's headless Chromium (apt: chromium, chromium-driver; .ci/run installs them)."""
    import os
    import shutil

    if not (shutil.which("chromium") and shutil.which("chromedriver")) and hasattr(os, "geteuid") and os.geteuid() == 0:
        session.run("apt-get", "update", "-qq", external=True)
        session.run("apt-get", "install", "-y", "-qq", "chromium", "chromium-driver", external=True, env={"DEBIAN_FRONTEND": "noninteractive"})
    _install(session, "omni-runtime")
    _install(session, "omni-models", extras="")  # the voice page test serves Qwen3-TTS (a model that clones voices)
    session.install(*CONSTRAINTS, "selenium>=4.20")
    session.env["OMNI_REQUIRE_BROWSER"] = "1"  # here a missing browser fails the session instead of skipping
    _pytest(session, "packages/omni-runtime/browser_tests")


@nox.session
def bench_stream(session: nox.Session) -> None:
    """Streaming under load (not in the default set): deadline vs fifo scheduler per model, open-loop max rate, TTFA goals."""
    _install(session, "omni-models", extras="")
    session.run("python", "benchmarks/stream_bench.py", *session.posargs)


# Reference implementations each parity venv installs next to omni-models (reference code lives in these venvs only).
# qwen3_tts: qwen-tts pins transformers 4.57.3 / accelerate 1.12.0 and declares gradio, torchaudio, sox and onnxruntime,
# which its 12 Hz path never calls: it is installed --no-deps with what that path imports.
# higgs_tts: transformers' Qwen3Model and HiggsAudioV2TokenizerModel (transformers 5.24). The tokenizer imports
# torchaudio, whose PyPI wheel's compiled ops cannot load next to torch 2.13; only its pure-Python resampling is used,
# so the session removes the compiled libraries after installing it (torchaudio then imports without them).
PARITY_REFERENCES = {
    "qwen3_tts": {
        "extras": "[test]",
        "deps": ["transformers==4.57.3", "accelerate==1.12.0", "librosa>=0.10", "soundfile>=0.12", "einops>=0.7"],
        "no_deps": ["qwen-tts==0.1.1"],
        "tests": ["packages/omni-models/parity_tests"],
    },
    "higgs_tts": {
        "extras": "[test,higgs]",
        "deps": ["transformers==5.24.0"],
        "no_deps": ["torchaudio"],
        "strip_torchaudio_ops": True,
        "tests": ["-s", "packages/omni-models/tests/test_higgs_tts_parity.py"],
    },
}


@nox.session(name="parity")
@nox.parametrize("model", list(PARITY_REFERENCES))
def parity(session: nox.Session, model: str) -> None:
    """omni's real-checkpoint models against their reference implementations on tiny checkpoints in the published layout."""
    reference = PARITY_REFERENCES[model]
    _install(session, "omni-models", extras=reference["extras"])
    session.install(*CONSTRAINTS, *reference["deps"])
    if reference.get("no_deps"):
        session.install(*CONSTRAINTS, "--no-deps", *reference["no_deps"])
    if reference.get("strip_torchaudio_ops"):
        session.run("python", "-c", (
            "import importlib.util, pathlib\n"
            "lib = pathlib.Path(importlib.util.find_spec('torchaudio').submodule_search_locations[0]) / 'lib'\n"
            "for so in lib.glob('*.so'):\n"
            "    so.unlink()\n"
            "import torchaudio.functional\n"
            "print('torchaudio', torchaudio.__version__, 'without compiled ops: pure-Python resampling only')"
        ))
    session.env["OMNI_REQUIRE_PARITY"] = "1"
    _pytest(session, *reference["tests"])


@nox.session
def bench_real(session: nox.Session) -> None:
    """Qwen3-TTS 12 Hz on a mid-size random checkpoint in the published layout: omni's batched engine vs qwen-tts (batched call, one call per text)."""
    reference = PARITY_REFERENCES["qwen3_tts"]
    _install(session, "omni-models", extras="")
    session.install(*CONSTRAINTS, *reference["deps"])
    session.install("--no-deps", *reference["no_deps"])
    session.run("python", "benchmarks/real_bench.py", *session.posargs)


@nox.session
def bench_tp(session: nox.Session) -> None:
    """Tensor parallelism on the CPU (not default): TP=1 vs TP=2 weight memory per rank, decode step, all-reduce share, audio s per wall s; benchmarks/tp_gpu_check.py is its GPU counterpart."""
    _install(session, "omni-models", extras="")
    session.install(*CONSTRAINTS, "psutil")
    session.run("python", "benchmarks/tp_bench.py", *session.posargs)


@nox.session
def bench_overload(session: nox.Session) -> None:
    """Overload benchmark (not default): 10x the sustainable rate against --max-inflight; 429 latency client-side and server-side, admitted latency, the client's ceiling."""
    _install(session, "omni-models", extras="")
    session.install(*CONSTRAINTS, "h11", "httpx", "psutil")
    session.run("python", "benchmarks/overload_bench.py", *session.posargs)
