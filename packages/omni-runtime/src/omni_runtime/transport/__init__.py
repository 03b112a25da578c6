"""Cross-process transport of omni-runtime: codec, shared memory, channels.

Quick map (each module's docstring has the why):

* :mod:`.codec` - :class:`Codec` encodes stage payloads (dict/list/tuple/
  str/int/float/bool/None/bytes/torch.Tensor of every dtype and shape) into
  ZeroMQ frames without pickle; large tensors via shared memory.
* :mod:`.shm` - :class:`ShmPool` (sender, bounded budget, back-pressure,
  segment reuse), :class:`ShmReader` (receiver), :func:`cleanup_run`.
* :mod:`.channel` - :class:`RunDir` (per-run ipc dir + shm prefix),
  :class:`Inbox`/:class:`Outbox` and their asyncio twins, :class:`Message`.
* :mod:`.leakcheck` - :class:`LeakCheck` for tests (no new /dev/shm entry,
  no child left).

Typical wiring in one process of a run::

    run = RunDir.from_dict(spec["run_dir"])              # from the parent
    pool = ShmPool(run.shm_prefix, budget_bytes=1 << 30)  # one per process
    codec = Codec(pool=pool, reader=ShmReader(allowed_prefix=run.shm_prefix))
    inbox = AsyncInbox(run.address("vocoder@r0"), codec=codec)
    to_parent = AsyncOutbox(run.address("parent"), codec=codec)
    await to_parent.send({"kind": "ready", "instance": "vocoder@r0"})
    msg = await inbox.recv()
    data = await msg.payload_async()     # or msg.discard() to drop it
    # shm receive mode: Codec(shm_mode="copy" | "view" | "adopt"), see .shm
    ...
    pool.close()                          # and in the parent: run.cleanup()
"""

from .channel import AsyncInbox, AsyncOutbox, Inbox, Message, Outbox, RunDir
from .codec import Codec, CodecLimits, Encoded, decode, decode_envelope, discard, encode, encode_envelope
from .dtypes import SUPPORTED_DTYPES
from .errors import (
    ChannelClosedError,
    ChannelError,
    ChannelTimeoutError,
    CodecError,
    ShmBudgetError,
    ShmError,
    ShmTimeoutError,
    TransportError,
)
from .leakcheck import LeakCheck
from .shm import ShmLease, ShmPool, ShmReader, ShmRef, cleanup_run, new_run_prefix, validate_prefix

__all__ = [
    "SUPPORTED_DTYPES",
    "AsyncInbox",
    "AsyncOutbox",
    "ChannelClosedError",
    "ChannelError",
    "ChannelTimeoutError",
    "Codec",
    "CodecError",
    "CodecLimits",
    "Encoded",
    "Inbox",
    "LeakCheck",
    "Message",
    "Outbox",
    "RunDir",
    "ShmBudgetError",
    "ShmError",
    "ShmLease",
    "ShmPool",
    "ShmReader",
    "ShmRef",
    "ShmTimeoutError",
    "TransportError",
    "cleanup_run",
    "decode",
    "decode_envelope",
    "discard",
    "encode",
    "encode_envelope",
    "new_run_prefix",
    "validate_prefix",
]
