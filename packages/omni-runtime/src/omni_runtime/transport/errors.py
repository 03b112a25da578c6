"""Errors raised by the cross-process transport.

Every error names what went wrong and how to fix it, because these surface in
worker logs and request failures where the reader has no debugger attached.
All of them derive from :class:`TransportError`, so a worker loop can catch
the whole family with one clause and keep serving other requests.
"""

from __future__ import annotations


class TransportError(Exception):
    """Base class of every transport error."""


class CodecError(TransportError, ValueError):
    """A value cannot be encoded, or received bytes are not a valid message.

    Raised for unsupported Python types (with the path inside the payload,
    e.g. ``data["audio"][2]``), integers outside int64/uint64, non-string
    dict keys, unknown wire type tags, truncated or oversized frames, and
    shared-memory references that are stale or missing. Never a crash: a
    malformed message from a peer only fails that message.
    """


class ShmError(TransportError):
    """A shared-memory segment could not be created, opened or mapped."""


class ShmBudgetError(ShmError, ValueError):
    """One tensor is larger than the sender's whole shared-memory budget.

    Waiting would never help, so this is raised immediately rather than
    after the back-pressure timeout.
    """


class ShmTimeoutError(ShmError, TimeoutError):
    """Back-pressure: the budget stayed full for the whole timeout.

    The receiver is not releasing segments (it is slow, stuck, or holds
    zero-copy tensor views for a long time). Raise the sender's budget,
    release views sooner, or drain the receiver.
    """


class ChannelError(TransportError):
    """A ZeroMQ channel could not bind, connect, send or receive."""


class ChannelTimeoutError(ChannelError, TimeoutError):
    """A send could not be queued within its timeout (peer gone or full)."""


class ChannelClosedError(ChannelError):
    """The channel was used after :meth:`close`."""
