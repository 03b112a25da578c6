"""Channels across real spawned processes: exact bytes, SHM, back-pressure, crashes."""

from __future__ import annotations

import asyncio
import contextlib
import os

import pytest
import torch
import zmq
from test_codec import SHAPES, random_tensor, same
from transport_workers import crash_sender_worker, digest_tree, echo_worker, stream_sender_worker

from omni_runtime.testing import Inbox, Outbox
from omni_runtime.transport import (
    SUPPORTED_DTYPES,
    AsyncInbox,
    AsyncOutbox,
    ChannelTimeoutError,
    Codec,
    CodecError,
    RunDir,
    ShmPool,
    ShmReader,
    ShmTimeoutError,
)
from omni_runtime.transport.shm import HEADER_BYTES, SHM_DIR

MiB = 1 << 20
THRESHOLD = 64 << 10


@contextlib.contextmanager
def child(ctx, target, *args):
    proc = ctx.Process(target=target, args=args, daemon=True)
    proc.start()
    try:
        yield proc
    finally:
        proc.join(20)
        if proc.is_alive():
            proc.kill()
            proc.join(5)


def make_codec(run: RunDir, budget: int, **kw) -> tuple[ShmPool, Codec]:
    pool = ShmPool(run.shm_prefix, budget_bytes=budget, **kw)
    return pool, Codec(pool=pool, reader=ShmReader(allowed_prefix=run.shm_prefix), shm_threshold=THRESHOLD)


def expect(inbox: Inbox, kind: str, timeout: float = 60.0):
    msg = inbox.recv(timeout=timeout)
    assert msg is not None, f"no {kind!r} message within {timeout}s"
    assert msg.header["kind"] == kind, msg.header
    return msg


def stop_echo(out: Outbox, inbox: Inbox, proc) -> None:
    out.send({"kind": "trim"})
    expect(inbox, "trimmed").discard()
    out.send({"kind": "stop"})
    proc.join(30)
    assert proc.exitcode == 0


def everything() -> dict:
    tensors = {f"{dtype}/{shape}": random_tensor(dtype, shape, seed=i) for i, (dtype, shape) in enumerate((d, s) for d in SUPPORTED_DTYPES for s in SHAPES)}
    large = {f"{dtype}/large": random_tensor(dtype, (3, 40000), seed=7) for dtype in SUPPORTED_DTYPES}
    return {
        "tensors": tensors,
        "large_via_shm": large,
        "non_contiguous": (torch.randn(300, 200).t(), torch.randn(64, 64, dtype=torch.complex64)[::3, 1::2]),
        "plain": [None, True, False, -(2**63), 2**64 - 1, 3.25, float("inf"), "ünïcode", b"\x00\x01", b"z" * 70000],
        "nested": {"tuple": (1, (2, [3, (4,)])), "list": [[], {}, ()], "empty": {}},
    }


def test_every_type_and_dtype_crosses_a_process_byte_identical(run_dir, spawn_ctx):
    pool, codec = make_codec(run_dir, 256 * MiB)
    inbox = Inbox(run_dir.address("parent"), codec=codec)
    out = Outbox(run_dir.address("child"), codec=codec)
    try:
        with child(spawn_ctx, echo_worker, run_dir.to_dict(), 256 * MiB, THRESHOLD) as proc:
            expect(inbox, "ready").discard()
            value = everything()
            out.send({"kind": "echo", "seq": 1}, value)
            reply = expect(inbox, "echo")
            assert reply.header == {"kind": "echo", "seq": 1}
            assert reply.shm_count == len(SUPPORTED_DTYPES) + 1  # large ones + the 240 KB transpose
            back = reply.payload()
            # what the child saw, hashed in the child: identical bytes, dtypes, shapes
            assert back["digest"] == digest_tree(value)
            # and the same values back again across the boundary
            assert same(back["value"], value)
            assert pool.busy_segments == 0
            stop_echo(out, inbox, proc)
    finally:
        inbox.close()
        out.close(linger=0)
        pool.close()


def test_async_channels_cross_process(run_dir, spawn_ctx):
    async def main(proc):
        pool, codec = make_codec(run_dir, 64 * MiB)
        inbox = AsyncInbox(run_dir.address("parent"), codec=codec)
        out = AsyncOutbox(run_dir.address("child"), codec=codec)
        try:
            ready = await inbox.recv(timeout=60)
            assert ready.header["kind"] == "ready"
            ready.discard()
            value = {"big": torch.randn(2, MiB // 4).to(torch.bfloat16), "small": (torch.arange(5), "x")}
            for seq in range(3):
                await out.send({"kind": "echo", "seq": seq}, value)
                reply = await inbox.recv(timeout=60)
                assert reply.header == {"kind": "echo", "seq": seq}
                back = await reply.payload_async()
                assert same(back["value"], value) and back["digest"] == digest_tree(value)
            await out.send({"kind": "trim"})
            (await inbox.recv(timeout=60)).discard()
            await out.send({"kind": "stop"})
            assert pool.busy_segments == 0
        finally:
            inbox.close()
            out.close(linger=1)
            pool.close()

    with child(spawn_ctx, echo_worker, run_dir.to_dict(), 64 * MiB, THRESHOLD) as proc:
        asyncio.run(main(proc))
        proc.join(30)
        assert proc.exitcode == 0


def test_back_pressure_across_processes(run_dir, spawn_ctx):
    seg = MiB + HEADER_BYTES
    pool, codec = make_codec(run_dir, 2 * seg)
    inbox = Inbox(run_dir.address("parent"), codec=codec)
    out = Outbox(run_dir.address("child"), codec=codec)
    try:
        with child(spawn_ctx, echo_worker, run_dir.to_dict(), 8 * MiB, THRESHOLD) as proc:
            expect(inbox, "ready").discard()
            out.send({"kind": "hold"}, [torch.ones(MiB // 4), torch.ones(MiB // 4)])
            assert expect(inbox, "holding").header["n"] == 2
            # The receiver pins both segments: a third large send must wait, then time out.
            with pytest.raises(ShmTimeoutError, match="still held by receivers"):
                out.send({"kind": "echo", "seq": 0}, torch.ones(MiB // 4), timeout=0.3)
            assert pool.busy_segments == 2 and pool.allocated_bytes <= 2 * seg
            out.send({"kind": "drop"})
            expect(inbox, "dropped").discard()
            # Released by the receiver: the same send now goes through.
            out.send({"kind": "echo", "seq": 1}, torch.full((MiB // 4,), 3.0), timeout=10)
            reply = expect(inbox, "echo").payload()
            assert torch.equal(reply["value"], torch.full((MiB // 4,), 3.0))
            stop_echo(out, inbox, proc)
            assert pool.busy_segments == 0
    finally:
        inbox.close()
        out.close(linger=0)
        pool.close()


def test_stream_of_large_messages_under_a_small_budget(run_dir, spawn_ctx):
    # The sender polls for releases while this process claims concurrently.
    codec = Codec(reader=ShmReader(allowed_prefix=run_dir.shm_prefix))
    inbox = Inbox(run_dir.address("parent"), codec=codec)
    budget = 3 * (MiB + HEADER_BYTES)
    try:
        with child(spawn_ctx, stream_sender_worker, run_dir.to_dict(), 40, MiB, budget) as proc:
            out = Outbox(run_dir.address("child"))
            for i in range(40):
                msg = expect(inbox, "chunk")
                assert msg.header["seq"] == i  # in order
                t = msg.payload()
                assert t.shape == (MiB // 8,) and bool((t == i).all())
                del t
            done = expect(inbox, "done")
            assert 0 < done.header["allocated"] <= budget
            out.send({"kind": "ack"})
            out.close(linger=5)
            proc.join(30)
            assert proc.exitcode == 0
    finally:
        inbox.close()


def test_receiver_killed_before_claiming_is_reclaimed_when_its_death_is_observed(run_dir, spawn_ctx):
    pool, codec = make_codec(run_dir, 8 * MiB)
    inbox = Inbox(run_dir.address("parent"), codec=codec)
    out = Outbox(run_dir.address("child"), codec=codec)
    try:
        with child(spawn_ctx, echo_worker, run_dir.to_dict(), 8 * MiB, THRESHOLD) as proc:
            expect(inbox, "ready").discard()
            out.send({"kind": "die"}, torch.ones(MiB // 4))
            proc.join(30)
            assert proc.exitcode == -9
        # Nobody will claim the reference now: the sender reclaims it on the death notice
        # instead of waiting for the claim timeout.
        assert pool.busy_segments == 1
        assert pool.reclaim_unclaimed() == 1
        assert pool.busy_segments == 0
        assert pool.acquire(MiB, timeout=1).ref.gen == 2
    finally:
        inbox.close()
        out.close(linger=0)
        pool.close()


def test_sender_killed_leaves_segments_that_cleanup_run_removes(run_dir, spawn_ctx):
    inbox = Inbox(run_dir.address("parent"), codec=Codec())
    try:
        with child(spawn_ctx, crash_sender_worker, run_dir.to_dict(), MiB) as proc:
            msg = expect(inbox, "tensor")
            proc.join(30)
            assert proc.exitcode == -9
        orphans = sorted(n for n in os.listdir(SHM_DIR) if n.startswith(f"{run_dir.shm_prefix}{proc.pid}-"))
        assert len(orphans) == 2  # one sent, one leased when it died
        # The message outlives its sender: the segment is still readable.
        assert bool((msg.payload() == 7).all())
        assert sorted(run_dir.cleanup()) == orphans
    finally:
        inbox.close()


def test_malformed_messages_fail_alone_and_the_inbox_keeps_working(run_dir):
    inbox = Inbox(run_dir.address("in"))
    raw = zmq.Context.instance().socket(zmq.PUSH)
    raw.connect(run_dir.address("in"))
    out = Outbox(run_dir.address("in"))
    try:
        raw.send_multipart([b"only-one-frame"])
        raw.send_multipart([b"\xc1", b"x"])
        raw.send_multipart([b"\x94\xa8omni-msg\x01\x80\x00", b"\xc1"])  # good envelope, bad body
        with pytest.raises(CodecError, match="1 frame"):
            inbox.recv(timeout=10)
        with pytest.raises(CodecError, match="malformed message header"):
            inbox.recv(timeout=10)
        bad_body = inbox.recv(timeout=10)
        assert bad_body.header == {}
        with pytest.raises(CodecError, match="malformed message body"):
            bad_body.payload()
        with pytest.raises(CodecError, match="already decoded"):
            bad_body.payload()
        out.send({"kind": "fine"}, {"x": torch.arange(3)})
        msg = inbox.recv(timeout=10)
        assert msg.header == {"kind": "fine"} and torch.equal(msg.payload()["x"], torch.arange(3))
    finally:
        raw.close(linger=0)
        out.close(linger=0)
        inbox.close()


def test_send_to_absent_peer_times_out_and_gives_shared_memory_back(run_dir):
    with ShmPool(run_dir.shm_prefix, budget_bytes=8 * MiB) as pool:
        out = Outbox(run_dir.address("nobody"), codec=Codec(pool=pool, shm_threshold=1024))
        try:
            with pytest.raises(ChannelTimeoutError, match="not connected or not reading"):
                out.send({"kind": "x"}, torch.ones(MiB // 4), timeout=0.2)
            assert pool.busy_segments == 0
        finally:
            out.close(linger=0)

        async def main():
            aout = AsyncOutbox(run_dir.address("nobody2"), codec=Codec(pool=pool, shm_threshold=1024))
            try:
                with pytest.raises(ChannelTimeoutError):
                    await aout.send({"kind": "x"}, torch.ones(MiB // 4), timeout=0.2)
                task = asyncio.ensure_future(aout.send({"kind": "x"}, torch.ones(MiB // 4), timeout=None))
                await asyncio.sleep(0.2)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            finally:
                aout.close(linger=0)

        asyncio.run(main())
        assert pool.busy_segments == 0


def test_recv_timeout_returns_none_and_closed_channel_raises(run_dir):
    inbox = Inbox(run_dir.address("quiet"))
    assert inbox.recv(timeout=0.05) is None
    inbox.close()
    with pytest.raises(Exception, match="is closed"):
        inbox.recv(timeout=0)


def test_run_dir_addresses_are_validated(run_dir):
    assert run_dir.address("vocoder@r1") == f"ipc://{run_dir.path}/vocoder@r1.sock"
    with pytest.raises(ValueError, match="endpoint name"):
        run_dir.address("a/b")
    deep = RunDir(path="/tmp/" + "d" * 120, shm_prefix=run_dir.shm_prefix)
    with pytest.raises(ValueError, match="Unix socket limit"):
        deep.address("x")
    assert RunDir.from_dict(run_dir.to_dict()) == run_dir
    with pytest.raises(ValueError):
        RunDir.from_dict({"path": "/tmp/x", "shm_prefix": ""})
