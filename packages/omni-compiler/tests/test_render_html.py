"""``omni-compile show --format html``: a standalone page drawing the topology, and the JSON it draws."""

from __future__ import annotations

import json
import re

from compiler_helpers import FIXTURES, compiled

from omni_compiler import render_html

SPEC_REPLICAS = ["--processes.vocoder.num_replicas", "2", "--processes.vocoder.replica_devices", "1,2"]


def _embedded_view(page: str) -> dict:
    match = re.search(r'<script id="topology-view" type="application/json">(.*?)</script>', page, re.S)
    assert match, "the page embeds the topology JSON"
    return json.loads(match.group(1))


def test_view_groups_stages_in_processes_with_replicas_and_transports(higgs):
    view = render_html.view(compiled(higgs, SPEC_REPLICAS))
    processes = {p["name"]: p for p in view["processes"]}
    assert processes["tts_frontend"]["stages"] == ["preprocessing", "audio_encoder"]
    assert processes["vocoder"]["instances"] == ["vocoder@r0", "vocoder@r1"]
    assert [i["gpus"] for i in view["instances"] if i["process"] == "vocoder"] == [[1], [2]]
    edges = {(e["src"], e["dst"]): e for e in view["edges"]}
    stream = edges[("tts_engine", "vocoder")]
    assert stream["cross_process"] and "ZeroMQ" in stream["transport"] and "shared memory" in stream["transport"]
    same = edges[("preprocessing", "audio_encoder")]
    assert not same["cross_process"] and same["transport"].startswith(("in-process", "process-local"))


def test_process_local_edges_are_marked_with_the_models_reason(qwen3):
    view = render_html.view(compiled(qwen3))
    local = [e for e in view["edges"] if e["process_local"]]
    assert local, "the qwen3 fixture pins an edge inside one process"
    assert all(e["transport"].startswith("process-local (in memory): ") and not e["cross_process"] for e in local)


def test_page_is_standalone_and_embeds_the_view(higgs):
    topology = compiled(higgs, SPEC_REPLICAS)
    page = render_html.render(topology)
    assert page.startswith("<!DOCTYPE html>")
    assert _embedded_view(page) == json.loads(json.dumps(render_html.view(topology)))
    assert not re.search(r'(src|href)="(https?:)?//', page), "no CDN or remote asset"
    assert "{{" not in page


def test_names_cannot_break_out_of_the_page(write):
    path = write("evil.yaml", """\
        name: "</script><script>alert(1)</script>"
        stages:
          - {name: only, factory: "x.y:z", terminal: true}
        """)
    from omni_compiler.compiler import compile_file

    page = render_html.render(compile_file(path))
    assert "<script>alert(1)" not in page
    assert _embedded_view(page)["name"] == "</script><script>alert(1)</script>"


def test_cli_writes_the_html_file(cli, tmp_path):
    out = tmp_path / "topology.html"
    code, stdout, stderr = cli("show", FIXTURES / "higgs_tts.yaml", "--format", "html", "-o", out, *SPEC_REPLICAS)
    assert code == 0 and stdout == ""
    assert f"wrote {out}" in stderr
    view = _embedded_view(out.read_text(encoding="utf-8"))
    assert [i["name"] for i in view["instances"]] == ["tts_frontend", "pipeline", "vocoder@r0", "vocoder@r1"]


def test_cli_reports_an_unwritable_output(cli, tmp_path):
    code, _, stderr = cli("show", FIXTURES / "higgs_tts.yaml", "--format", "html", "-o", tmp_path / "missing" / "t.html")
    assert code == 2 and "cannot write" in stderr
