"""The asyncio channels: plain sockets woken through ZMQ_FD, batch receive, listeners.

ZMQ_FD is edge-triggered, so the dangerous cases are a message that arrives
just after the inbox found its socket empty (a lost edge hangs the receiver
forever) and a wait that ends early (close, cancel, timeout) and must leave
no reader registered on the event loop.
"""

from __future__ import annotations

import asyncio
import random
import threading

import pytest
import zmq

from omni_runtime.testing import Outbox
from omni_runtime.transport import (
    AsyncInbox,
    AsyncOutbox,
    ChannelClosedError,
    ChannelError,
    ChannelTimeoutError,
    Codec,
    CodecError,
    encode_envelope,
)

DEADLINE = 30.0  # generous: only a lost wake-up should ever reach it


def no_reader(inbox_or_outbox) -> bool:
    """True when the running loop has no reader on the channel's descriptor (removing none)."""
    return not asyncio.get_running_loop().remove_reader(inbox_or_outbox._fd)


async def collect(inbox: AsyncInbox, count: int, max_messages: int = 64) -> list:
    got: list = []
    while len(got) < count:
        batch = await inbox.recv_batch(timeout=DEADLINE, max_messages=max_messages)
        assert batch, f"no message within {DEADLINE}s after {len(got)} of {count}: a wake-up was lost"
        assert len(batch) <= max_messages
        got.extend(batch)
    return got


def test_a_burst_is_delivered_complete_and_in_order(run_dir):
    async def main():
        inbox = AsyncInbox(run_dir.address("in"))
        out = AsyncOutbox(run_dir.address("in"))
        try:
            for seq in range(300):
                await out.send({"seq": seq}, {"x": [seq, str(seq)]})
            messages = await collect(inbox, 300, max_messages=50)
            return [(m.header["seq"], m.payload()["x"]) for m in messages]
        finally:
            inbox.close()
            out.close(linger=0)

    assert asyncio.run(main()) == [(seq, [seq, str(seq)]) for seq in range(300)]


def test_a_message_after_the_socket_was_drained_wakes_the_receiver(run_dir):
    async def main():
        inbox = AsyncInbox(run_dir.address("in"))
        out = AsyncOutbox(run_dir.address("in"))
        try:
            for seq in range(100):
                receiver = asyncio.ensure_future(inbox.recv_batch(timeout=DEADLINE))
                await asyncio.sleep(0)  # it found the socket empty and waits on the descriptor now
                assert not receiver.done()
                await out.send({"seq": seq})
                assert [m.header["seq"] for m in await receiver] == [seq]
        finally:
            inbox.close()
            out.close(linger=0)

    asyncio.run(main())


def test_messages_from_another_thread_at_any_moment_are_all_received(run_dir):
    """The sender races the receiver's empty-check / wait / drain cycle at random points."""
    count = 2000

    def sender() -> None:
        out = Outbox(run_dir.address("in"))
        rng = random.Random(7)
        try:
            for seq in range(count):
                out.send({"seq": seq})
                if rng.random() < 0.3:
                    threading.Event().wait(rng.random() / 2000)
        finally:
            out.close(linger=5.0)

    async def main():
        inbox = AsyncInbox(run_dir.address("in"))
        thread = threading.Thread(target=sender)
        thread.start()
        try:
            return [m.header["seq"] for m in await collect(inbox, count)]
        finally:
            thread.join()
            inbox.close()

    assert asyncio.run(main()) == list(range(count))


def test_recv_timeout_returns_none_and_leaves_the_inbox_usable(run_dir):
    async def main():
        inbox = AsyncInbox(run_dir.address("in"))
        out = AsyncOutbox(run_dir.address("in"))
        try:
            assert await inbox.recv(timeout=0.05) is None
            assert await inbox.recv_batch(timeout=0.05) == []
            assert await inbox.recv(timeout=0) is None
            assert inbox.recv_batch_nowait() == []
            await out.send({"after": "timeouts"})
            msg = await inbox.recv(timeout=DEADLINE)
            assert msg is not None and msg.header == {"after": "timeouts"}
        finally:
            inbox.close()
            out.close(linger=0)
        with pytest.raises(ChannelClosedError, match="is closed"):
            await inbox.recv(timeout=0)

    asyncio.run(main())


def test_close_while_waiting_raises_and_leaves_no_reader(run_dir):
    async def main():
        inbox = AsyncInbox(run_dir.address("in"))
        waiting = asyncio.ensure_future(inbox.recv())
        await asyncio.sleep(0)
        assert not waiting.done()
        inbox.close()
        with pytest.raises(ChannelClosedError):
            await waiting
        assert no_reader(inbox)

    asyncio.run(main())


def test_cancel_while_waiting_leaves_no_reader_and_the_inbox_usable(run_dir):
    async def main():
        inbox = AsyncInbox(run_dir.address("in"))
        out = AsyncOutbox(run_dir.address("in"))
        try:
            for wait in (inbox.recv(), inbox.recv_batch(), inbox.recv(timeout=DEADLINE)):
                waiting = asyncio.ensure_future(wait)
                await asyncio.sleep(0)
                waiting.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiting
                assert no_reader(inbox)
            await out.send({"still": "works"})
            msg = await inbox.recv(timeout=DEADLINE)
            assert msg is not None and msg.header == {"still": "works"}
        finally:
            inbox.close()
            out.close(linger=0)

    asyncio.run(main())


def test_one_inbox_serves_successive_event_loops(run_dir):
    inbox = AsyncInbox(run_dir.address("in"))
    out = Outbox(run_dir.address("in"))
    try:
        for seq in range(3):

            async def one(seq=seq):
                waiting = asyncio.ensure_future(inbox.recv(timeout=DEADLINE))
                await asyncio.sleep(0)
                out.send({"seq": seq})
                return await waiting

            msg = asyncio.run(one())
            assert msg is not None and msg.header == {"seq": seq}
    finally:
        inbox.close()
        out.close(linger=0)


def test_a_malformed_message_ends_the_batch_then_raises_once(run_dir):
    ctx = zmq.Context.instance()
    raw = ctx.socket(zmq.PUSH)
    raw.connect(run_dir.address("in"))
    body = Codec().encode(None).frames

    async def main():
        inbox = AsyncInbox(run_dir.address("in"))
        try:
            raw.send_multipart([encode_envelope({"seq": 0}), *body])
            raw.send_multipart([b"not an envelope", b"x"])
            raw.send_multipart([encode_envelope({"seq": 1}), *body])
            seen: list = []
            while len(seen) < 3:
                try:
                    batch = await inbox.recv_batch(timeout=DEADLINE)
                except CodecError:
                    seen.append("malformed")
                    continue
                assert batch
                seen.extend(m.header["seq"] for m in batch)
            return seen
        finally:
            inbox.close()

    try:
        assert asyncio.run(main()) == [0, "malformed", 1]
    finally:
        raw.close(linger=0)


def test_a_listener_is_called_from_the_loop_and_takes_every_message(run_dir):
    async def main():
        loop = asyncio.get_running_loop()
        inbox = AsyncInbox(run_dir.address("in"))
        out = AsyncOutbox(run_dir.address("in"))
        got: list = []
        all_there = loop.create_future()

        def take() -> None:
            while batch := inbox.recv_batch_nowait(max_messages=16):  # until empty: the notice is spent
                got.extend(m.header["seq"] for m in batch)
            if len(got) == 200 and not all_there.done():
                all_there.set_result(None)

        try:
            await out.send({"seq": 0})  # queued before anyone listens: still delivered
            inbox.listen(take)
            with pytest.raises(ChannelError, match="listener"):
                await inbox.recv(timeout=0.01)
            for seq in range(1, 200):
                await out.send({"seq": seq})
            await asyncio.wait_for(all_there, DEADLINE)
            inbox.listen(None)
            await out.send({"seq": "after"})
            msg = await inbox.recv(timeout=DEADLINE)
            assert msg is not None and msg.header == {"seq": "after"}
            return got
        finally:
            inbox.close()
            out.close(linger=0)

    assert asyncio.run(main()) == list(range(200))


def test_a_busy_listener_takes_the_messages_later_itself(run_dir):
    """A listener that skips its notice (consumer busy) finds the messages queued when it pulls."""

    async def main():
        loop = asyncio.get_running_loop()
        inbox = AsyncInbox(run_dir.address("in"))
        out = AsyncOutbox(run_dir.address("in"))
        notified = loop.create_future()

        def busy() -> None:
            if not notified.done():
                notified.set_result(None)

        try:
            inbox.listen(busy)
            for seq in range(5):
                await out.send({"seq": seq})
            await asyncio.wait_for(notified, DEADLINE)
            got: list = []
            deadline = loop.time() + DEADLINE
            while len(got) < 5 and loop.time() < deadline:
                got.extend(m.header["seq"] for m in inbox.recv_batch_nowait())
                await asyncio.sleep(0.001)
            return got
        finally:
            inbox.close()
            out.close(linger=0)

    assert asyncio.run(main()) == list(range(5))


def test_async_send_waits_for_a_late_peer_and_keeps_the_order(run_dir):
    async def main():
        out = AsyncOutbox(run_dir.address("late"), send_timeout=None)
        inbox = None
        try:
            first = asyncio.ensure_future(out.send({"seq": 0}))
            second = asyncio.ensure_future(out.send({"seq": 1}))
            await asyncio.sleep(0)
            # no peer yet (ZMQ_IMMEDIATE): the first waits for it, the second queues behind
            assert not first.done() and not second.done()
            inbox = AsyncInbox(run_dir.address("late"))
            await asyncio.wait_for(asyncio.gather(first, second), DEADLINE)
            await out.send({"seq": 2})
            assert no_reader(out)  # an outbox watches its descriptor only while it waits
            return [m.header["seq"] for m in await collect(inbox, 3)]
        finally:
            if inbox is not None:
                inbox.close()
            out.close(linger=0)

    assert asyncio.run(main()) == [0, 1, 2]


def test_async_send_timeout_and_cancel_leave_no_reader(run_dir):
    async def main():
        out = AsyncOutbox(run_dir.address("nobody"))
        try:
            with pytest.raises(ChannelTimeoutError, match="not connected or not reading"):
                await out.send({"kind": "x"}, timeout=0.05)
            assert no_reader(out)
            waiting = asyncio.ensure_future(out.send({"kind": "x"}, timeout=None))
            await asyncio.sleep(0)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert no_reader(out)
            waiting = asyncio.ensure_future(out.send({"kind": "x"}, timeout=None))
            await asyncio.sleep(0)
            out.close(linger=0)
            with pytest.raises(ChannelClosedError):
                await waiting
            assert no_reader(out)
        finally:
            out.close(linger=0)

    asyncio.run(main())
