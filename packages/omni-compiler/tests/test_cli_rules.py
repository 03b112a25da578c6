"""Every rule, through the CLI: exit code 1 and the exact config path in `--format json` output.

One row per rule of the spec (docs/rules.md). Deployment-tier rules are
triggered with command-line overrides on the spec-shaped fixtures; model-tier rules
(wiring, contract) need a pipeline file, written per test.
"""

from __future__ import annotations

import json

import pytest
import yaml
from compiler_helpers import FIXTURES, chain, pipeline, stage

HIGGS = FIXTURES / "higgs_tts.yaml"
QWEN3 = FIXTURES / "qwen3_tts.yaml"
FRACTION = "runtime.resources.total_gpu_memory_fraction"

OVERRIDE_RULES = [
    # schema and overrides (docs/concepts.md)
    ("unknown-stage", HIGGS, ["--stages.vocodr.process", "x"], "stages.vocodr"),
    ("unknown-stage-field", HIGGS, ["--stages.vocoder.procss", "x"], "stages.vocoder.procss"),
    ("unknown-process-field", HIGGS, ["--processes.vocoder.num_replica", "2"], "processes.vocoder.num_replica"),
    ("unknown-placement-field", HIGGS, ["--placement.num_gpu", "2"], "placement.num_gpu"),
    ("model-tier-next", HIGGS, ["--stages.vocoder.next", "tts_engine"], "stages.vocoder.next"),
    ("model-tier-factory", HIGGS, ["--stages.vocoder.factory", "x.y:z"], "stages.vocoder.factory"),
    ("model-tier-env", HIGGS, ["--stages.vocoder.env.A", "1"], "stages.vocoder.env.A"),
    ("model-tier-contract", HIGGS, ["--process_local_edges.x", "y"], "process_local_edges.x"),
    ("model-tier-entry", HIGGS, ["--entry_stage.x", "y"], "entry_stage.x"),
    ("undeclared-factory-arg", HIGGS, ["--stages.tts_engine.factory_args.nope", "1"], "stages.tts_engine.factory_args.nope"),
    ("same-path-twice", HIGGS, ["--stages.vocoder.process", "a", "--stages.vocoder.process", "b"], "stages.vocoder.process"),
    ("override-without-value", HIGGS, ["--stages.vocoder.process"], "stages.vocoder.process"),
    ("bad-type", HIGGS, ["--stages.vocoder.tp_size", "two"], "stages.vocoder.tp_size"),
    ("bad-yaml-value", HIGGS, ["--processes.vocoder.replica_devices", "[1"], "processes.vocoder.replica_devices"),
    ("fraction-range", HIGGS, [f"--stages.vocoder.{FRACTION}", "1.5"], f"stages.vocoder.{FRACTION}"),
    ("replicas-range", HIGGS, ["--processes.vocoder.num_replicas", "0"], "processes.vocoder.num_replicas"),
    ("negative-gpu", HIGGS, ["--stages.vocoder.gpu", "-1"], "stages.vocoder.gpu"),
    ("reserved-suffix-process", HIGGS, ["--stages.vocoder.process", "vocoder@r1"], "stages.vocoder.process"),
    ("reserved-suffix-processes-key", HIGGS, ["--processes.vocoder@r1.num_replicas", "2"], "processes.vocoder@r1"),
    # grouping, TP, replicas (docs/rules.md, rules 1-4)
    ("processes-entry-without-stage", HIGGS, ["--processes.vocodr.num_replicas", "2"], "processes.vocodr"),
    ("tp-gpu-count", HIGGS, ["--stages.tts_engine.tp_size", "2"], "stages.tts_engine.gpu"),
    ("tp-rank-name-taken", HIGGS, ["--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "0,1", "--stages.vocoder.process", "pipeline_tp1"], "stages.tts_engine.tp_size"),
    ("two-tp-stages-one-process", HIGGS, ["--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "0,1", "--stages.vocoder.process", "pipeline",
                                          "--stages.vocoder.tp_size", "2", "--stages.vocoder.gpu", "2,3"], "stages.vocoder.process"),
    ("replica-devices-required", HIGGS, ["--processes.vocoder.num_replicas", "2"], "processes.vocoder.replica_devices"),
    ("replica-devices-count", HIGGS, ["--processes.vocoder.num_replicas", "2", "--processes.vocoder.replica_devices", "1"], "processes.vocoder.replica_devices"),
    ("replica-devices-unique-in-group", HIGGS, ["--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "0,1",
                                                "--processes.pipeline.replica_devices", "1,1"], "processes.pipeline.replica_devices"),
    ("replica-devices-cpu-only", HIGGS, ["--stages.preprocessing.process", "pre", "--processes.pre.replica_devices", "1"], "processes.pre.replica_devices"),
    ("replica-devices-need-fractions", HIGGS, ["--processes.vocoder.replica_devices", "1", f"--stages.vocoder.{FRACTION}", "null"], f"stages.vocoder.{FRACTION}"),
    # contract (step 5)
    ("contract-split", QWEN3, ["--stages.preprocessing.process", "frontend"], "stages.preprocessing.process"),
    ("contract-broken-by-tp", QWEN3, ["--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "1,2", f"--stages.tts_engine.{FRACTION}", "0.5",
                                      f"--stages.vocoder.{FRACTION}", "0.3"], "stages.tts_engine.tp_size"),
    # placement (step 7)
    ("colocation-needs-fractions", HIGGS, [f"--stages.vocoder.{FRACTION}", "null"], f"stages.vocoder.{FRACTION}"),
    ("per-gpu-limit", HIGGS, [f"--stages.vocoder.{FRACTION}", "0.5"], "placement.max_total_gpu_memory_fraction_per_gpu"),
    ("per-gpu-limit-single-process", QWEN3, [f"--stages.tts_engine.{FRACTION}", "0.7", f"--stages.vocoder.{FRACTION}", "0.4"], "placement.max_total_gpu_memory_fraction_per_gpu"),
    ("opt-out-not-for-replica-devices", HIGGS, ["--placement.require_memory_fraction_for_colocation", "false", "--processes.vocoder.replica_devices", "0",
                                                f"--stages.tts_engine.{FRACTION}", "null"], f"stages.tts_engine.{FRACTION}"),
    ("gpus-count", HIGGS, ["--stages.vocoder.gpu", "5", "--gpus", "2"], "stages.vocoder.gpu"),
    ("placement-num-gpus", HIGGS, ["--placement.num_gpus", "1", "--stages.vocoder.gpu", "1"], "stages.vocoder.gpu"),
    ("replica-devices-vs-gpus", HIGGS, ["--processes.vocoder.replica_devices", "3", "--gpus", "2"], "processes.vocoder.replica_devices"),
]


@pytest.mark.parametrize("file,tokens,path", [r[1:] for r in OVERRIDE_RULES], ids=[r[0] for r in OVERRIDE_RULES])
def test_rule_through_cli(cli, file, tokens, path):
    code, out, err = cli("validate", file, "--format", "json", *tokens)
    assert code == 1, (out, err)
    errors = json.loads(out)["errors"]
    assert path in [e["path"] for e in errors], errors
    assert all(e["rule"] and e["fix"] for e in errors)
    # the text form reports the same paths, on stderr
    code, out, err = cli("validate", file, *tokens)
    assert code == 1 and out == ""
    assert f"error: {path}" in err


def _wired(**top):
    return pipeline(chain("a", "b", "c"), **top)


MODEL_RULES = [
    ("unknown-reference", pipeline([stage("a", next="bb"), stage("b", terminal=True)]), "stages.a.next"),
    ("cycle", pipeline([stage("a", next="b"), stage("b", next=["a", "c"]), stage("c", terminal=True)]), "stages.b.next"),
    ("unreachable", pipeline([stage("a", next="b"), stage("b", terminal=True), stage("c", terminal=True)]), "stages.c"),
    ("no-reachable-terminal", pipeline([stage("a", next="b"), stage("b", next="a")]), "stages"),
    ("wait-for-without-merge-fn", pipeline([stage("a", next="b"), stage("b", wait_for="a", terminal=True)]), "stages.b.merge_fn"),
    ("dead-end", pipeline([stage("a", next=["b", "c"]), stage("b"), stage("c", terminal=True)]), "stages.b.next"),
    ("terminal-with-next", pipeline([stage("a", next="b", terminal=True), stage("b", terminal=True)]), "stages.a.next"),
    ("duplicate-stage", pipeline([stage("a", next="b"), stage("b", terminal=True), stage("b", terminal=True)]), "stages.b"),
    ("unknown-entry-stage", _wired(entry_stage="z"), "entry_stage"),
    ("contract-unknown-stage", _wired(process_local_edges=[{"src": "a", "dst": "bb", "reason": "r"}]), "process_local_edges.a->bb.dst"),
    ("contract-non-edge", _wired(process_local_edges=[{"src": "a", "dst": "c", "reason": "r"}]), "process_local_edges.a->c"),
    ("contract-listed-twice", _wired(process_local_edges=[{"src": "a", "dst": "b", "reason": "r"}] * 2), "process_local_edges.a->b"),
    ("contract-without-reason", _wired(process_local_edges=[{"src": "a", "dst": "b"}]), "process_local_edges.a->b.reason"),
    ("unknown-top-level-key", _wired(placment={}), "placment"),
    ("unknown-stage-key", pipeline([stage("a", next="b", stream_too="b"), stage("b", terminal=True)]), "stages.a.stream_too"),
    ("reserved-suffix-stage", pipeline([stage("a", next="b@r0"), stage("b@r0", terminal=True)]), "stages.b@r0.name"),
]


@pytest.mark.parametrize("data,path", [r[1:] for r in MODEL_RULES], ids=[r[0] for r in MODEL_RULES])
def test_model_rule_through_cli(cli, write, data, path):
    file = write("model.yaml", yaml.safe_dump(data, sort_keys=False))
    code, out, _ = cli("validate", file, "--format", "json")
    assert code == 1, out
    assert path in [e["path"] for e in json.loads(out)["errors"]]


DEPLOYMENT_RULES = [
    ("model-tier-field", "extends: higgs_tts.yaml\nstages:\n  - {name: vocoder, wait_for: [tts_engine]}\n", "stages.vocoder.wait_for"),
    ("adding-a-stage", "extends: higgs_tts.yaml\nstages:\n  - {name: denoiser, factory: m.x:d}\n", "stages.denoiser"),
    ("contract-edit", "extends: qwen3_tts.yaml\nprocess_local_edges: []\n", "process_local_edges"),
    ("unknown-model", "extends: bosonai/higgs-tts-3-4\n", "extends"),
    ("extends-cycle", "extends: deploy.yaml\n", "extends"),
    ("forbidden-split", "extends: qwen3_tts.yaml\nstages:\n  - {name: preprocessing, process: frontend}\n", "stages.preprocessing.process"),
]


@pytest.mark.parametrize("text,path", [r[1:] for r in DEPLOYMENT_RULES], ids=[r[0] for r in DEPLOYMENT_RULES])
def test_deployment_rule_through_cli(cli, model_files, text, path):
    deploy = model_files / "deploy.yaml"
    deploy.write_text(text)
    code, out, _ = cli("validate", deploy, "--format", "json")
    assert code == 1, out
    assert path in [e["path"] for e in json.loads(out)["errors"]]


def test_independent_errors_from_every_step_at_once(cli, write):
    """Schema-valid but broken in several independent ways: one run reports all of them."""
    data = pipeline(
        [
            stage("a", next="b", process="p", gpu=0),
            stage("b", next="c", process="q", gpu=0),
            stage("c", next="ghost"),
            stage("d", terminal=True),
        ],
        processes={"q": {"num_replicas": 2}},
        process_local_edges=[{"src": "a", "dst": "b", "reason": "shared queue"}],
    )
    code, out, _ = cli("validate", write("broken.yaml", yaml.safe_dump(data, sort_keys=False)), "--format", "json")
    assert code == 1
    found = {e["path"] for e in json.loads(out)["errors"]}
    assert {
        "stages.c.next",                      # unknown reference
        "stages.d",                           # unreachable
        "stages",                             # no reachable terminal
        "stages.b.process",                   # contract violation a -> b
        "processes.q.replica_devices",        # replicated GPU process without devices
        f"stages.a.{FRACTION}",               # GPU 0 shared without fractions
    } <= found
