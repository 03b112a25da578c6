"""The Ray backend on a real three-node cluster (head, node_a, node_b; all on 127.0.0.1).

Three processes: ``front`` (make a tensor) and ``middle`` (hold it) pinned to
node_a, ``back`` (check it) pinned to node_b. front -> middle is a same-node
hop (IPC socket + shared memory for the 2 MiB tensor), middle -> back crosses
nodes (TCP), and the parent on the head node reaches both nodes over TCP.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from omni_compiler import compile as compile_topology
from omni_config import raw_config
from omni_runtime import RequestFailed, Runtime

MiB = 1 << 20


def three_nodes_topology(restart: dict | None = None):
    """front, middle on node_a; back on node_b (``restart``: the same restart policy for each)."""
    stages = [
        {"name": "a", "factory": "ray_stages:make", "process": "front", "next": "b"},
        {"name": "b", "factory": "ray_stages:hold", "process": "middle", "next": "c"},
        {"name": "c", "factory": "ray_stages:finish", "process": "back", "terminal": True},
    ]
    processes = {
        "front": {"ray": {"resources": {"node_a": 1}}},
        "middle": {"ray": {"resources": {"node_a": 1}}},
        "back": {"ray": {"resources": {"node_b": 1}, "num_cpus": 0.25}},
    }
    if restart is not None:
        for entry in processes.values():
            entry["restart"] = restart
    return compile_topology(raw_config({"name": "three-nodes", "stages": stages, "processes": processes, "process_local_edges": []}))


def one_stage_topology(factory: str, process: str, resource: str):
    """One terminal stage in ``process``, which asks Ray for one unit of the custom ``resource``."""
    return compile_topology(raw_config({
        "name": f"one-stage-on-{resource}",
        "stages": [{"name": "a", "factory": factory, "process": process, "terminal": True}],
        "processes": {process: {"ray": {"resources": {resource: 1}}}},
        "process_local_edges": [],
    }))


def run(coro, timeout=180):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def omni_actors() -> list[dict]:
    """Live named actors in the omni namespace (what ``ray list actors`` would show)."""
    import ray

    return [a for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == "omni" and a["name"].startswith("omni:")]


def test_actors_sit_on_the_asked_nodes_and_hops_pick_their_transport(cluster):
    async def scenario():
        runtime = Runtime(three_nodes_topology(), backend="ray", device="cpu", log=None, startup_timeout=120)
        await runtime.start()
        try:
            handle = await runtime.submit({"nbytes": 2 * MiB})
            result = await handle.result()
            placements = await runtime.placements()
            sent = await runtime.transport_bytes()
            names = {a["name"] for a in omni_actors()}
            return runtime.run_id, result, placements, sent, names, runtime.edge_transports()
        finally:
            await runtime.shutdown()

    run_id, result, placements, sent, names, edges = run(scenario())
    node_a, node_b = cluster.node_id("node_a"), cluster.node_id("node_b")
    # the actors sit on the nodes the config asked for, under their documented names
    assert {name: p["node_id"] for name, p in placements.items()} == {"front": node_a, "middle": node_a, "back": node_b}
    assert {f"omni:{run_id}:front", f"omni:{run_id}:middle", f"omni:{run_id}:back"} <= names
    assert result["nodes"] == {"a": node_a, "b": node_a, "c": node_b}
    assert result["numel"] == 2 * MiB // 4
    # same node: IPC socket plus shared memory for the tensor, nothing over TCP
    assert sent["front"]["middle"].get("shm", 0) >= 2 * MiB
    assert sent["front"]["middle"].get("tcp", 0) == 0
    # across nodes: TCP, the whole tensor, no shared memory
    assert sent["middle"]["back"].get("tcp", 0) >= 2 * MiB
    assert sent["middle"]["back"].get("shm", 0) == 0
    assert edges[("front", "middle")] == "ipc" and edges[("middle", "back")] == "tcp"
    # every actor is gone after shutdown
    assert not {n for n in (a["name"] for a in omni_actors()) if n.startswith(f"omni:{run_id}:")}


def test_a_request_no_node_can_place_fails_at_startup_naming_the_resource(cluster):
    topology = one_stage_topology("ray_stages:make", "lost", "node_c")

    async def scenario():
        runtime = Runtime(topology, backend="ray", device="cpu", log=None, startup_timeout=60)
        began = time.monotonic()
        with pytest.raises(Exception) as info:
            await runtime.start()
        return info.value, time.monotonic() - began

    error, seconds = run(scenario())
    assert "node_c: 1" in str(error) and "lost" in str(error)
    assert seconds < 30


def test_log_options_and_the_deadline_reach_a_worker_on_another_node(cluster):
    """The Ray actor runs the same worker entry point as a local process: --log-level/--log-format apply there too."""
    topology = one_stage_topology("ray_stages:log_setup", "far", "node_b")

    async def scenario():
        runtime = Runtime(topology, backend="ray", device="cpu", log=None, startup_timeout=120, log_level="debug", log_format="json")
        await runtime.start()
        try:
            return await (await runtime.submit({}, timeout=50.0)).result()
        finally:
            await runtime.shutdown()

    result = run(scenario())
    assert result["level"] == "DEBUG"
    assert result["formats"] == ["JsonFormatter"]
    assert 0 < result["deadline_left"] <= 50.0  # ctx.deadline: a monotonic instant on the worker's own clock


def test_omni_topology_backend_ray_prints_node_devices_and_hop_transports(cluster, tmp_path, capsys):
    import yaml

    from omni_runtime.cli import main

    config = tmp_path / "three.yaml"
    config.write_text(yaml.safe_dump({
        "name": "three-nodes",
        "stages": [
            {"name": "a", "factory": "ray_stages:make", "process": "front", "next": "b"},
            {"name": "b", "factory": "ray_stages:hold", "process": "middle", "next": "c"},
            {"name": "c", "factory": "ray_stages:finish", "process": "back", "terminal": True},
        ],
        "processes": {"front": {"ray": {"resources": {"node_a": 1}}}, "back": {"ray": {"resources": {"node_b": 1}}}},
        "process_local_edges": [],
    }))
    assert main(["topology", "--config", str(config), "--backend", "ray", "--device", "cpu", "--format", "json"]) == 0
    import json

    report = json.loads(capsys.readouterr().out)
    nodes = {row["instance"]: row["node"] for row in report["instances"]}
    assert nodes["front"] == "node_a" and nodes["back"] == "node_b"
    hops = {(h["src"], h["dst"]): h["transport"] for h in report["edges"]}
    assert hops[("front", "middle")] in ("ipc + shm", "tcp")  # middle is unpinned: either node may take it
    assert hops[("@parent", "front")] == "tcp"  # the parent is the driver on the head node
    assert hops[("middle", "back")] == ("ipc + shm" if nodes["middle"] == "node_b" else "tcp")
    assert main(["topology", "--config", str(config), "--backend", "ray", "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    assert "placed on Ray" in text and "node_b" in text and "front -> middle" in text


def test_removing_a_node_fails_its_in_flight_requests_fast(cluster):
    """node_b goes away while requests hold in middle (node_a), bound to back (node_b): they fail at once, none hangs."""

    async def scenario():
        runtime = Runtime(three_nodes_topology(), backend="ray", device="cpu", log=None)
        await runtime.start()
        try:
            handles = [await runtime.submit({"hold_s": 60}) for _ in range(3)]
            await asyncio.sleep(1.0)  # the requests are inside middle, bound to back
            removed = time.monotonic()
            cluster.remove("node_b")
            failures = []
            for handle in handles:
                with pytest.raises(RequestFailed) as info:
                    await asyncio.wait_for(handle.result(), 30)
                failures.append((info.value, time.monotonic() - removed))
            health = runtime.health()
            return runtime.run_id, failures, health
        finally:
            await runtime.shutdown()
            cluster.add("node_b", {"node_b": 4})  # later tests of this module find the cluster whole again

    run_id, failures, health = run(scenario(), timeout=300)
    for error, seconds in failures:
        assert "back" in str(error) and error.kind == "process_died"
        assert seconds < 10, f"an in-flight request took {seconds:.1f} s to fail after its node was removed"
    assert health["processes"]["back"] != "ready" and not health["healthy"]
    assert not {n for n in (a["name"] for a in omni_actors()) if n.startswith(f"omni:{run_id}:")}


def test_after_a_node_is_lost_the_process_restarts_on_a_node_that_fits(cluster):
    """Restart per policy: ``back`` (needs node_b) comes back once a node offering node_b joins, and serves."""

    async def scenario():
        policy = {"max_restarts": 5, "window_s": 120, "backoff_s": 0.2}
        runtime = Runtime(three_nodes_topology(restart=policy), backend="ray", device="cpu", log=None)
        await runtime.start()
        try:
            handle = await runtime.submit({"hold_s": 60})
            await asyncio.sleep(1.0)
            cluster.remove("node_b")
            with pytest.raises(RequestFailed):
                await asyncio.wait_for(handle.result(), 30)
            new_node = cluster.add("node_b_again", {"node_b": 4})
            deadline = time.monotonic() + 120
            result = None
            while result is None and time.monotonic() < deadline:
                try:
                    handle = await runtime.submit({"nbytes": 2 * MiB})
                    result = await asyncio.wait_for(handle.result(), 60)
                except RequestFailed:
                    await asyncio.sleep(0.5)
            placements = await runtime.placements()
            return runtime.run_id, new_node, result, placements
        finally:
            await runtime.shutdown()

    run_id, new_node, result, placements = run(scenario(), timeout=300)
    assert result is not None, "the runtime did not recover once a node offering node_b was back"
    assert result["nodes"]["c"] == new_node and placements["back"]["node_id"] == new_node
    assert result["numel"] == 2 * MiB // 4  # the cross-node hop to the new node works (new TCP address learned)
    assert not {n for n in (a["name"] for a in omni_actors()) if n.startswith(f"omni:{run_id}:")}
