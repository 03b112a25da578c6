"""Property-based: the compiler and the CLI never fail with anything but a config error.

Two generators: arbitrary junk shaped loosely like a config (must only ever give a
``ConfigError``), and near-valid pipelines with random placement (processes, GPUs,
TP, fractions, replicas, contracts). For the latter, every topology the compiler
accepts is checked against the spec's rules independently of the compiler's code.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from compiler_helpers import FIXTURES, fixture_dict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omni_compiler import CompiledTopology, TopologyError, compile, render
from omni_compiler.cli import main
from omni_config import ConfigError, raw_config

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
ROOTS = ("stages", "processes", "placement", "process_local_edges", "entry_stage", "--gpus", "name", "command line")

# --- junk ---------------------------------------------------------------------------------------

NAMES = st.one_of(st.sampled_from(["a", "b", "c", "p", "q", "vocoder", "x@r1", "a_tp0", "", "1"]), st.text(max_size=4))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2, 5), st.floats(allow_nan=True), st.text(max_size=4))
ANY = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)), max_leaves=6)
REFS = st.one_of(NAMES, st.lists(NAMES, max_size=3), ANY)
JUNK_STAGE = st.fixed_dictionaries({"name": NAMES, "factory": st.sampled_from(["m.x:f", "bad path"])}, optional={
    "next": REFS, "stream_to": REFS, "wait_for": REFS, "terminal": st.one_of(st.booleans(), ANY),
    "merge_fn": st.sampled_from(["m.x:merge", "??"]), "process": st.one_of(NAMES, ANY),
    "gpu": st.one_of(st.integers(-1, 3), st.lists(st.integers(-1, 3), max_size=3), ANY), "tp_size": st.one_of(st.integers(0, 3), ANY),
    "runtime": st.one_of(st.fixed_dictionaries({"resources": st.fixed_dictionaries({"total_gpu_memory_fraction": st.one_of(st.floats(-1, 2), ANY)})}), ANY),
})
JUNK = st.one_of(
    st.fixed_dictionaries({"stages": st.one_of(st.lists(JUNK_STAGE, min_size=1, max_size=5), ANY)}, optional={
        "entry_stage": NAMES,
        "processes": st.one_of(st.dictionaries(NAMES, st.fixed_dictionaries({}, optional={
            "num_replicas": st.one_of(st.integers(0, 3), ANY), "replica_devices": st.one_of(st.lists(st.integers(-1, 3), max_size=5), ANY)}), max_size=3), ANY),
        "placement": st.one_of(st.fixed_dictionaries({}, optional={
            "max_total_gpu_memory_fraction_per_gpu": st.one_of(st.floats(-1, 2), ANY),
            "require_memory_fraction_for_colocation": st.one_of(st.booleans(), ANY), "num_gpus": st.one_of(st.integers(-1, 4), ANY)}), ANY),
        "process_local_edges": st.one_of(st.lists(st.fixed_dictionaries({"src": NAMES, "dst": NAMES, "reason": st.text(max_size=4)}), max_size=3), ANY),
    }),
    st.dictionaries(st.text(max_size=5), ANY, max_size=3),
)


def _check_error(error: ConfigError) -> None:
    assert error.issues
    for issue in error.issues:
        assert isinstance(issue.path, str) and issue.rule and issue.fix
        issue.render()
    json.dumps(error.to_dict())


@SETTINGS
@given(JUNK, st.one_of(st.none(), st.integers(-1, 4)))
def test_junk_configs_only_raise_config_errors(data, num_gpus):
    try:
        topology = compile(raw_config(data), num_gpus=num_gpus)
    except ConfigError as error:
        _check_error(error)
    else:
        assert CompiledTopology.from_json(topology.to_json()) == topology
        render.text(topology)


# --- near-valid pipelines, checked against the spec's rules ----------------------------------------

PROCESS_NAMES = ["p0", "p1", "p2"]


@st.composite
def pipelines(draw) -> tuple[dict[str, Any], int | None]:
    count = draw(st.integers(1, 6))
    names = [f"s{i}" for i in range(count)]
    stages = []
    for index, name in enumerate(names):
        entry: dict[str, Any] = {"name": name, "factory": f"m.stages:build_{name}"}
        if index == count - 1:
            entry["terminal"] = True
        else:
            entry["next"] = names[index + 1]
            later = names[index + 2:]
            if later and draw(st.booleans()):
                entry["stream_to"] = draw(st.sampled_from(later))
        process = draw(st.sampled_from([None, *PROCESS_NAMES]))
        if process:
            entry["process"] = process
        tp = draw(st.sampled_from([1, 1, 1, 2]))
        if tp > 1:
            entry["tp_size"] = tp
        if draw(st.booleans()):
            entry["gpu"] = draw(st.integers(0, 2)) if tp == 1 else draw(st.lists(st.integers(0, 2), min_size=tp, max_size=tp))
        fraction = draw(st.sampled_from([None, 0.1, 0.2, 0.3, 0.5]))
        if fraction is not None:
            entry["runtime"] = {"resources": {"total_gpu_memory_fraction": fraction}}
        stages.append(entry)
    declared = sorted({s.get("process", s["name"]) for s in stages})
    processes = {}
    for process in draw(st.lists(st.sampled_from(declared), max_size=2, unique=True)):
        replicas = draw(st.integers(1, 3))
        settings_: dict[str, Any] = {"num_replicas": replicas}
        if draw(st.booleans()):
            group = max(s.get("tp_size", 1) for s in stages if s.get("process", s["name"]) == process)
            size = replicas * group + draw(st.sampled_from([0, 0, 0, 1]))
            settings_["replica_devices"] = draw(st.lists(st.integers(0, 3), min_size=size, max_size=size))
        processes[process] = settings_
    edges = [(names[i], names[i + 1]) for i in range(count - 1)]
    contract = [{"src": s, "dst": d, "reason": f"state {s}->{d}"} for s, d in draw(st.lists(st.sampled_from(edges), unique=True, max_size=2))] if edges else []
    data: dict[str, Any] = {"name": "generated", "stages": stages, "process_local_edges": contract}
    if processes:
        data["processes"] = processes
    data["placement"] = {
        "require_memory_fraction_for_colocation": draw(st.booleans()),
        "max_total_gpu_memory_fraction_per_gpu": draw(st.sampled_from([1.0, 0.9, 0.5])),
    }
    return data, draw(st.one_of(st.none(), st.integers(1, 4)))


def _check_topology(data: dict[str, Any], topology: CompiledTopology) -> None:
    stages = {s["name"]: s for s in data["stages"]}
    # every stage runs somewhere: once, or once per TP rank
    for name, spec in stages.items():
        groups = topology.processes_of(name)
        assert len(groups) == spec.get("tp_size", 1)
        if spec.get("tp_size", 1) > 1:
            declared = spec.get("process", name)
            assert groups == tuple(f"{declared}_tp{r}" for r in range(spec["tp_size"]))
    # replicas: one instance per replica of every process, unique names, whole process copied
    names = [i.name for i in topology.instances]
    assert len(names) == len(set(names))
    for process in topology.processes:
        instances = topology.instances_of(process.name)
        assert len(instances) == process.num_replicas
        for index, instance in enumerate(instances):
            suffix = f"@r{index}" if process.num_replicas > 1 else ""
            assert instance.name == process.name + suffix
            assert tuple(p.stage for p in instance.stages) == process.stages
            assert all(p.instance_stage == p.stage + suffix for p in instance.stages)
    # edges: cross-process exactly when the endpoints' OS processes differ; the contract holds
    for edge in topology.edges:
        src, dst = topology.processes_of(edge.src), topology.processes_of(edge.dst)
        assert edge.cross_process == (src != dst or len(src) != 1)
        if edge.cross_process:
            assert edge.process_local_reason is None
    # fractions are carried exactly as declared, and every GPU fits its limit
    limit = data["placement"]["max_total_gpu_memory_fraction_per_gpu"]
    for instance in topology.instances:
        for placement in instance.stages:
            declared = stages[placement.stage].get("runtime", {}).get("resources", {}).get("total_gpu_memory_fraction")
            assert placement.memory_fraction == declared
    moved = {p for p in data.get("processes", {}) if data["processes"][p].get("replica_devices") is not None}
    for budget in topology.gpus:
        assert sum(s.memory_fraction or 0 for s in budget.shares) <= limit + 1e-9
        shared = len(budget.processes) > 1
        by_replica_devices = any(topology.process(i.process).declared_process in moved for i in topology.instances if i.name in budget.processes)
        if shared and (data["placement"]["require_memory_fraction_for_colocation"] or by_replica_devices):
            assert all(s.memory_fraction is not None for s in budget.shares)
    for instance in topology.instances:
        if topology.process(instance.process).declared_process in moved:
            assert all(p.memory_fraction is not None for p in instance.stages if p.gpu is not None)
    assert CompiledTopology.from_json(topology.to_json()) == topology
    assert len(render.table(topology).splitlines()) == len(topology.processes)
    render.text(topology), render.mermaid(topology), render.dot(topology)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipelines())
def test_accepted_topologies_obey_the_spec(case):
    data, num_gpus = case
    config = raw_config(data)  # the generator only makes schema-valid configs
    try:
        topology = compile(config, num_gpus=num_gpus)
    except TopologyError as error:
        _check_error(error)
        assert all(i.path.split(".")[0] in ROOTS for i in error.issues), [i.path for i in error.issues]
    else:
        _check_topology(data, topology)


# --- the CLI: random override tokens and random files ---------------------------------------------

FLAGS = st.sampled_from([
    "--stages.vocoder.process", "--stages.tts_engine.gpu", "--stages.tts_engine.tp_size", "--stages.vocoder.next",
    "--stages.vocoder.runtime.resources.total_gpu_memory_fraction", "--processes.vocoder.num_replicas",
    "--processes.vocoder.replica_devices", "--processes.pipeline.num_replicas", "--placement.num_gpus",
    "--placement.require_memory_fraction_for_colocation", "--stages.vocodr.process", "--format", "--gpus", "--", "-h",
    "--stages..x", "--a.b=", "-",
])
VALUES = st.one_of(
    st.sampled_from(["0", "1", "2", "1,2", "[1,2]", "[1", "json", "text", "dot", "mermaid", "pipeline", "vocoder", "-1", "0.5", "false", "", "x@r1"]),
    st.text(max_size=6),
)
TOKENS = st.lists(st.one_of(FLAGS, VALUES, st.builds(lambda f, v: f"{f}={v}", FLAGS, VALUES)), max_size=8)


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # pragma: no cover - main() must return, not exit
            raise AssertionError(f"main() raised SystemExit({exc.code})") from None
    return code, out.getvalue(), err.getvalue()


def _assert_clean(code: int, out: str, err: str) -> None:
    assert code in (0, 1, 2)
    assert "internal error" not in err, err
    assert "Traceback" not in out + err


@SETTINGS
@given(st.sampled_from(["validate", "show"]), TOKENS)
def test_cli_random_override_tokens(command, tokens):
    code, out, err = _cli([command, str(FIXTURES / "higgs_tts.yaml"), *tokens])
    _assert_clean(code, out, err)
    if code == 1:
        assert "error" in out + err


@SETTINGS
@given(st.one_of(JUNK, pipelines().map(lambda case: case[0])), st.sampled_from(["text", "json", "mermaid", "dot"]), TOKENS)
def test_cli_random_config_files(data, fmt, tokens):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(data))
        code, out, err = _cli(["show", str(path), "--format", fmt, *tokens])
        _assert_clean(code, out, err)
        if code == 0 and fmt == "json" and not tokens:
            CompiledTopology.from_dict(json.loads(out)["topology"])


@SETTINGS
@given(st.binary(max_size=300))
def test_cli_random_file_bytes(content):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_bytes(content)
        code, out, err = _cli(["validate", str(path)])
        _assert_clean(code, out, err)
        assert code in (1, 2)


def test_fixture_strategies_see_valid_and_invalid_cases():
    """Guard against a generator that silently stopped producing accepted topologies."""
    accepted = rejected = 0
    for seed_case in [fixture_dict("higgs_tts"), fixture_dict("qwen3_tts"), fixture_dict("ming_omni_tts")]:
        compile(raw_config(seed_case))
        accepted += 1
    try:
        compile(raw_config(fixture_dict("qwen3_tts"), ["--stages.preprocessing.process", "x"]))
    except TopologyError:
        rejected += 1
    assert (accepted, rejected) == (3, 1)
