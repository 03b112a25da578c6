"""Cross-process transport of omni-runtime: codec, shared memory, channels.

Quick map (each module's docstring has the why):

* :mod:`.codec` - :class:`Codec` encodes stage payloads (dict/list/tuple/
  str/int/float/bool/None/bytes/torch.Tensor of every dtype and shape) into
  ZeroMQ frames without pickle; large tensors via shared memory
  (:mod:`.wire` the format, :mod:`.decoding` the receiving side,
  :mod:`.arrays` whether tensors decode into torch or numpy). Importing this
  package does not import torch (``SUPPORTED_DTYPES`` does, when read).
* :mod:`.envelope` - the header frame every message starts with.
* :mod:`.shm` - :class:`ShmPool` (sender, bounded budget, back-pressure,
  segment reuse), :class:`ShmReader` (receiver), :func:`cleanup_run`.
* :mod:`.rundir` - :class:`RunDir` (per-run ipc dir + shm prefix).
* :mod:`.message` - :class:`Message`, a received header with a lazily decoded payload.
* :mod:`.inbox` / :mod:`.outbox` - :class:`AsyncInbox` / :class:`AsyncOutbox`
  (:mod:`.async_base`: how they wait on the event loop without ``zmq.asyncio``).

Blocking channels and leak checks for tests live in :mod:`omni_runtime.testing`.

Typical wiring in one process of a run::

    run = RunDir.from_dict(spec["run_dir"])              # from the parent
    pool = ShmPool(run.shm_prefix, budget_bytes=1 << 30)  # one per process
    codec = Codec(pool=pool, reader=ShmReader(allowed_prefix=run.shm_prefix))
    inbox = AsyncInbox(run.address("vocoder@r0"), codec=codec)
    to_parent = AsyncOutbox(run.address("parent"), codec=codec)
    await to_parent.send({"kind": "ready", "instance": "vocoder@r0"})
    msg = await inbox.recv()
    data = await msg.payload_async()     # or msg.discard() to drop it
    ...
    pool.close()                          # and in the parent: run.cleanup()
"""

from .codec import Codec, Encoded, decode, discard, encode
from .envelope import decode_envelope, encode_envelope
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
from .inbox import AsyncInbox
from .message import Message
from .outbox import AsyncOutbox
from .rundir import RunDir
from .shm import ShmLease, ShmPool, ShmReader, ShmRef, cleanup_run, new_run_prefix, remove_sender_segments, validate_prefix
from .wire import CodecLimits

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
    "Message",
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
    "remove_sender_segments",
    "validate_prefix",
]


def __getattr__(name: str) -> object:
    """``SUPPORTED_DTYPES`` (this torch build's dtypes) imports torch, so only when asked for."""
    if name == "SUPPORTED_DTYPES":
        from . import dtypes

        return dtypes.SUPPORTED_DTYPES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
