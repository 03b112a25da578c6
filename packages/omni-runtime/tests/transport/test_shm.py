"""Shared-memory pool: budget, back-pressure, release on every path, cleanup."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading

import pytest
import torch

from omni_runtime.transport import (
    Codec,
    CodecError,
    ShmBudgetError,
    ShmPool,
    ShmReader,
    ShmTimeoutError,
    cleanup_run,
    new_run_prefix,
    validate_prefix,
)
from omni_runtime.transport.shm import HEADER_BYTES, SHM_DIR

MiB = 1 << 20


def segments(prefix: str) -> list[str]:
    return sorted(n for n in os.listdir(SHM_DIR) if n.startswith(prefix))


def send(pool: ShmPool, tensor: torch.Tensor, timeout: float | None = None):
    enc = Codec(pool=pool, shm_threshold=1).encode(tensor, shm_timeout=timeout)
    enc.mark_sent()
    return enc.frames


def test_segments_are_named_by_run_prefix_and_pid_and_unlinked_on_close(run_dir):
    pool = ShmPool(run_dir.shm_prefix, budget_bytes=16 * MiB)
    frames = send(pool, torch.ones(MiB // 4))
    names = segments(run_dir.shm_prefix)
    assert names == [f"{run_dir.shm_prefix}{os.getpid()}-0"]
    assert torch.equal(Codec().decode(frames), torch.ones(MiB // 4))
    pool.close()
    assert segments(run_dir.shm_prefix) == []
    pool.close()  # idempotent


def test_segments_are_reused_not_recreated(run_dir):
    with ShmPool(run_dir.shm_prefix, budget_bytes=16 * MiB) as pool:
        reader = ShmReader()
        for i in range(20):
            frames = send(pool, torch.full((MiB // 4,), float(i)))
            assert Codec(reader=reader).decode(frames)[0].item() == float(i)
        assert len(segments(run_dir.shm_prefix)) == 1
        reader.close()


def test_budget_bounds_allocated_bytes_and_oversize_fails_fast(run_dir):
    with ShmPool(run_dir.shm_prefix, budget_bytes=4 * MiB, timeout=0.2) as pool:
        with pytest.raises(ShmBudgetError, match="does not fit the shared-memory budget of 4194304 bytes"):
            pool.acquire(4 * MiB)
        leases = [pool.acquire(MiB) for _ in range(3)]
        assert pool.allocated_bytes == 3 * (MiB + HEADER_BYTES) <= pool.budget_bytes
        with pytest.raises(ShmTimeoutError, match="still held by receivers"):
            pool.acquire(MiB)
        for lease in leases:
            lease.cancel()
        assert pool.busy_segments == 0


def test_back_pressure_blocks_until_receiver_releases(run_dir):
    with ShmPool(run_dir.shm_prefix, budget_bytes=2 * MiB + 2 * HEADER_BYTES, timeout=10) as pool:
        pending = [send(pool, torch.full((MiB // 4,), float(i))) for i in range(2)]
        assert pool.try_acquire(MiB) is None
        got = []

        def blocked_sender():
            got.append(Codec().decode(send(pool, torch.full((MiB // 4,), 9.0))))

        th = threading.Thread(target=blocked_sender)
        th.start()
        th.join(0.3)
        assert th.is_alive(), "sender should wait for room in the budget"
        assert Codec().decode(pending[0])[0].item() == 0.0  # receiver releases one segment
        th.join(10)
        assert not th.is_alive() and got[0][0].item() == 9.0
        Codec().discard(pending[1])
        assert pool.busy_segments == 0


def test_back_pressure_async(run_dir):
    async def main():
        with ShmPool(run_dir.shm_prefix, budget_bytes=MiB + HEADER_BYTES, timeout=0.2) as pool:
            lease = await pool.acquire_async(MiB)
            with pytest.raises(ShmTimeoutError):
                await pool.acquire_async(MiB)
            waiter = asyncio.ensure_future(pool.acquire_async(MiB, timeout=5))
            await asyncio.sleep(0.05)
            assert not waiter.done()
            lease.cancel()
            (await waiter).cancel()

    asyncio.run(main())


def test_unclaimed_reference_is_reclaimed_and_late_reader_gets_clear_error(run_dir):
    with ShmPool(run_dir.shm_prefix, budget_bytes=8 * MiB, claim_timeout=0.0) as pool:
        frames = send(pool, torch.ones(MiB // 4))
        assert pool.reclaim_unclaimed() == 1
        with pytest.raises(CodecError, match="was reclaimed by its sender"):
            Codec().decode(frames)


def test_each_reference_decodes_once(run_dir):
    with ShmPool(run_dir.shm_prefix, budget_bytes=8 * MiB) as pool:
        frames = send(pool, torch.ones(MiB // 4))
        reader = ShmReader()
        Codec(reader=reader).decode(frames)
        with pytest.raises(CodecError):
            Codec(reader=reader).decode(frames)
        reader.close()


def test_encode_error_gives_leases_back(run_dir):
    with ShmPool(run_dir.shm_prefix, budget_bytes=8 * MiB) as pool:
        codec = Codec(pool=pool, shm_threshold=1024)
        with pytest.raises(CodecError, match=r"value\['z'\]"):
            codec.encode({"a": torch.ones(MiB // 4), "z": {1, 2}})
        assert pool.busy_segments == 0


def test_decode_error_releases_the_other_segments(run_dir):
    with ShmPool(run_dir.shm_prefix, budget_bytes=8 * MiB) as pool:
        codec = Codec(pool=pool, shm_threshold=1024)
        enc = codec.encode([torch.ones(MiB // 4), torch.ones(MiB // 4), torch.ones(4)])
        enc.mark_sent()
        with pytest.raises(CodecError):
            codec.decode(enc.frames[:1])  # inline buffer frame missing
        assert pool.busy_segments == 0


def test_reader_allowed_prefix_rejects_foreign_segments(run_dir):
    with ShmPool(run_dir.shm_prefix, budget_bytes=8 * MiB) as pool:
        frames = send(pool, torch.ones(MiB // 4))
        with pytest.raises(CodecError, match="invalid shared-memory segment name"):
            Codec(reader=ShmReader(allowed_prefix="omni-other-")).decode(frames)
        Codec().discard(frames)
        assert pool.busy_segments == 0


def test_size_classes_let_similar_sizes_share_segments(run_dir):
    with ShmPool(run_dir.shm_prefix, budget_bytes=64 * MiB) as pool:
        for n in (MiB + 50000, MiB, MiB + 4096, MiB - 100):
            pool.acquire(n).cancel()
        assert len(pool.segment_names()) == 1


def test_full_budget_evicts_idle_segments_for_a_new_size(run_dir):
    with ShmPool(run_dir.shm_prefix, budget_bytes=3 * MiB, timeout=1) as pool:
        pool.acquire(MiB).cancel()
        pool.acquire(MiB // 2 + MiB).cancel()  # a second segment
        lease = pool.acquire(2 * MiB + MiB // 2)  # needs both freed
        assert len(pool.segment_names()) == 1
        lease.cancel()


def test_idle_segments_expire(run_dir):
    with ShmPool(run_dir.shm_prefix, budget_bytes=8 * MiB, idle_ttl=0.0) as pool:
        pool.acquire(MiB).cancel()
        first = pool.segment_names()
        pool.acquire(2 * MiB).cancel()
        assert first[0] not in pool.segment_names()
        assert pool.trim() > 0 and pool.segment_names() == []


def test_cleanup_run_removes_only_that_run(run_dir):
    other = new_run_prefix()
    with ShmPool(other, budget_bytes=8 * MiB) as keep:
        keep.acquire(4096).cancel()
        pool = ShmPool(run_dir.shm_prefix, budget_bytes=8 * MiB)
        pool.acquire(4096).cancel()
        pool.acquire(MiB).cancel()
        removed = cleanup_run(run_dir.shm_prefix)
        assert len(removed) == 2 and all(n.startswith(run_dir.shm_prefix) for n in removed)
        assert len(segments(other)) == 1
        pool.close()  # segments already unlinked: closing still works


@pytest.mark.parametrize("prefix", ["", "omni", "omni-x", "../x-", "a b-c-", "-" * 200])
def test_invalid_prefixes_are_rejected(prefix):
    with pytest.raises(ValueError, match="new_run_prefix"):
        validate_prefix(prefix)
    with pytest.raises(ValueError):
        cleanup_run(prefix)


def test_zero_byte_and_exact_threshold_tensors(run_dir):
    with ShmPool(run_dir.shm_prefix, budget_bytes=8 * MiB) as pool:
        codec = Codec(pool=pool, shm_threshold=4096)
        value = {"empty": torch.empty(0, 1024), "at": torch.ones(1024), "below": torch.ones(1023)}
        enc = codec.encode(value)
        assert len(enc.leases) == 1  # only the tensor of exactly the threshold
        enc.mark_sent()
        out = codec.decode(enc.frames)
        assert out["empty"].shape == (0, 1024) and torch.equal(out["at"], value["at"])


def test_out_of_order_release_is_found_when_the_budget_is_full(run_dir):
    seg = 64 * 1024 + HEADER_BYTES
    with ShmPool(run_dir.shm_prefix, budget_bytes=20 * seg, timeout=1) as pool:
        sent = [send(pool, torch.full((16384,), float(i))) for i in range(20)]
        assert pool.try_acquire(64 * 1024) is None
        # Only the newest is released: beyond the oldest-first polling window.
        assert Codec().decode(sent[-1])[0].item() == 19.0
        lease = pool.acquire(64 * 1024)
        assert lease.ref.name.endswith("-19") and pool.allocated_bytes == 20 * seg
        lease.cancel()
        for frames in sent[:-1]:
            Codec().discard(frames)
        assert pool.busy_segments == 0 and len(pool.segment_names()) == 20


def test_closing_the_pool_under_a_live_lease_keeps_its_memory_mapped(run_dir):
    """An encode thread may still be copying into a lease when the pool closes (shutdown, cancel).

    The segment is unlinked at once, but its mapping must outlive every tensor over it: run in a
    child so an unmap under the copy (a segfault) fails this test instead of killing the suite.
    """
    code = (
        "import torch\n"
        "from omni_runtime.transport import ShmPool\n"
        f"pool = ShmPool({run_dir.shm_prefix!r}, budget_bytes={16 * MiB})\n"
        f"lease = pool.acquire({8 * MiB})\n"
        "pool.close()\n"
        "lease.view.fill_(7)\n"
        f"assert int(lease.view[-1]) == 7 and lease.view.numel() == {8 * MiB}\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert segments(run_dir.shm_prefix) == []
