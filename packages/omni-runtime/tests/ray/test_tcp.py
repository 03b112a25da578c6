"""The node-aware data plane without Ray: TCP between "nodes", IPC + shared memory on one, chunked frames.

Two :class:`NodePlane` ends in this process stand for processes on two nodes
(different node ids, both listening on 127.0.0.1), so the TCP path, the
per-peer choice and the byte counters are exercised with real sockets.
"""

from __future__ import annotations

import asyncio

import pytest
import torch

from omni_runtime.raycluster.dataplane import NodePlane
from omni_runtime.transport import Codec, CodecError, RunDir
from omni_runtime.transport.tcp import IPC, TCP, Endpoint, transport_for

MiB = 1 << 20


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.bool, torch.int64, torch.complex64])
def test_chunked_tensor_round_trip_keeps_every_frame_bounded(dtype):
    source = (torch.rand(3, 1000) * 100).to(dtype)
    encoded = Codec(chunk_bytes=4096).encode({"x": source, "small": torch.arange(4)})
    assert max(memoryview(f).nbytes for f in encoded.frames[1:]) <= 4096
    assert len(encoded.frames) > 2
    decoded = Codec().decode([bytes(f) for f in encoded.frames])
    assert decoded["x"].dtype == dtype and torch.equal(decoded["x"], source)
    assert torch.equal(decoded["small"], torch.arange(4))


def test_a_truncated_chunked_tensor_is_a_codec_error_not_garbage():
    frames = [bytes(f) for f in Codec(chunk_bytes=1000).encode(torch.rand(1000)).frames]
    with pytest.raises(CodecError, match="chunked tensor"):
        Codec().decode(frames[:-1])
    with pytest.raises(CodecError, match="does not fit"):
        Codec().decode([*frames[:-1], frames[-1] + b"\0"])  # one byte more than the tensor holds


def test_transport_rule_is_by_node():
    assert transport_for("n1", Endpoint("n1", "tcp://127.0.0.1:5")) == IPC
    assert transport_for("n1", Endpoint("n2", "tcp://127.0.0.1:5")) == TCP
    assert transport_for("n1", None) == IPC  # not known yet: the node-local default (the parent's own node)
    with pytest.raises(ValueError):
        Endpoint.from_dict({"node": "n1", "tcp": "ipc:///tmp/x"})


def test_hops_between_nodes_go_over_tcp_and_within_a_node_over_ipc_and_shm():
    async def scenario():
        run = RunDir.create()
        a = NodePlane(run, "a", {"id": "node-1", "host": "127.0.0.1"})
        b = NodePlane(run, "b", {"id": "node-2", "host": "127.0.0.1"})
        c = NodePlane(run, "c", {"id": "node-1", "host": "127.0.0.1"})
        try:
            book = {name: plane.endpoint() for name, plane in (("a", a), ("b", b), ("c", c))}
            for plane in (a, b, c):
                plane.learn(book)
            tensor = torch.arange(10 * MiB // 4, dtype=torch.float32)
            await a.outbox("b").send({"k": "run"}, {"t": tensor})
            await a.outbox("c").send({"k": "run"}, {"t": tensor})
            got_b = await (await b.inbox.recv(timeout=30)).payload_async()
            got_c = await (await c.inbox.recv(timeout=30)).payload_async()
            return a.sent_bytes(), a.transport("b"), a.transport("c"), got_b["t"], got_c["t"], tensor
        finally:
            for plane in (a, b, c):
                plane.close()
            run.cleanup()

    sent, to_b, to_c, got_b, got_c, tensor = asyncio.run(scenario())
    assert (to_b, to_c) == (TCP, IPC)
    assert torch.equal(got_b, tensor) and torch.equal(got_c, tensor)
    assert sent["b"].get("tcp", 0) >= 10 * MiB and sent["b"].get("shm", 0) == 0
    assert sent["c"].get("shm", 0) >= 10 * MiB and sent["c"].get("tcp", 0) == 0


def test_a_restarted_peer_is_reached_at_its_new_address():
    async def scenario():
        run = RunDir.create()
        a = NodePlane(run, "a", {"id": "node-1", "host": "127.0.0.1"})
        old = NodePlane(run, "b", {"id": "node-2", "host": "127.0.0.1"})
        try:
            a.learn({"b": old.endpoint()})
            await a.outbox("b").send({"k": "one"})
            assert (await old.inbox.recv(timeout=30)).header["k"] == "one"
            old.close()
            new = NodePlane(RunDir.create(), "b", {"id": "node-3", "host": "127.0.0.1"})
            a.learn({"b": new.endpoint()})
            await a.outbox("b").send({"k": "two"})
            msg = await new.inbox.recv(timeout=30)
            new.close()
            new.run.cleanup()
            return msg.header["k"]
        finally:
            a.close()
            run.cleanup()

    assert asyncio.run(scenario()) == "two"
