"""The control header of every runtime message (first ZeroMQ frame).

A small msgspec struct encoded as a msgpack array: request id, message kind,
the stage it is for, the stage it came from, the request's replica binding and
the stage timings gathered so far. The payload or chunk itself follows in the
next frames, encoded by the transport codec; no pickle anywhere.
"""

from __future__ import annotations

import msgspec

# message kinds -------------------------------------------------------------
RUN = "run"  # a payload for a stage (next / wait_for edge)
CHUNK = "chunk"  # one streamed chunk for a consumer stage
DONE = "done"  # a producer's done signal (carries its payload when the consumer is also a next target)
CANCEL = "cancel"  # abort a request everywhere
SHUTDOWN = "shutdown"  # worker: stop
READY = "ready"  # worker -> parent: every stage built
STARTUP_ERROR = "startup_error"  # worker -> parent: a factory (or import) failed
RESULT = "result"  # worker -> parent: terminal payload
OUT = "out"  # worker -> parent: a terminal stage's streamed output chunk
ERROR = "error"  # worker -> parent: a stage failed this request


class Envelope(msgspec.Struct, array_like=True, frozen=True):
    kind: str
    rid: str = ""
    stage: str = ""
    src: str = ""
    binding: dict[str, int] = {}
    timings: dict[str, float] = {}
    text: str = ""
    """Error message, traceback or sender instance name, depending on ``kind``."""
    has_data: bool = False
    """Whether payload/chunk frames follow (a done signal may carry none)."""


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Envelope)


def pack(envelope: Envelope) -> bytes:
    return _encoder.encode(envelope)


def unpack(frame: bytes | memoryview) -> Envelope:
    return _decoder.decode(frame)
