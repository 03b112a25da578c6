"""Message kinds and the header of every runtime message.

Messages travel through the transport's channels (``omni_runtime.transport``):
a small header dict (msgpack, plain values only) plus an optional payload
encoded by the typed codec (tensors inline or through shared memory; no
pickle anywhere). Header keys are one letter because every hop pays for them.
"""

from __future__ import annotations

from typing import Any

PARENT = "@parent"
"""Endpoint name of the parent's inbox (``@`` cannot appear in a user's process name)."""

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
CREDIT = "credit"  # consumer -> producer instance (or parent -> terminal instance): took COUNT more chunks
TERM = "term"  # worker -> parent: this worker received SIGTERM; the parent decides what it means
PEER_DIED = "peer_died"  # parent -> workers: instance SRC died; reclaim what was sent to it
HEARTBEAT = "heartbeat"  # worker -> parent: this worker's event loop still turns (sent every heartbeat_interval)
PEERS = "peers"  # parent -> worker: where every process of the run listens (node and TCP address; a cluster backend)
APPEND = "append"  # parent -> the entry stage's process: more input for a running request (its stage's append hook)

# header keys ---------------------------------------------------------------
KIND = "k"
RID = "r"
STAGE = "s"  # destination stage (or reporting stage for error / startup_error)
SRC = "f"  # source stage, or sender instance for ready / startup_error / error
BINDING = "b"  # replica binding of the request: group -> replica index
TIMINGS = "t"  # stage -> seconds gathered so far along this path
HAS_DATA = "p"  # a payload follows (a done signal may carry none)
TEXT = "x"  # error message
DEADLINE = "d"  # the request's deadline, seconds since the epoch (one clock for every host)
INSTANCE = "i"  # sending process instance (chunks: where credit goes back; credit: the consumer)
COUNT = "n"  # credits returned
OUTPUT = "@out"
"""Stage name of the edge from a terminal stage to the parent (for credits on streamed output)."""
PARAM = "q"  # error: the request field a stage rejected (InvalidRequest); absent for stage failures
FINAL = "z"  # append: the request's input is complete after this piece


def header(kind: str, rid: str = "", stage: str = "", src: str = "", binding: dict[str, int] | None = None,
           timings: dict[str, float] | None = None, has_data: bool = False, text: str = "",
           deadline: float | None = None, instance: str = "", count: int = 0) -> dict[str, Any]:
    h: dict[str, Any] = {KIND: kind}
    if rid:
        h[RID] = rid
    if stage:
        h[STAGE] = stage
    if src:
        h[SRC] = src
    if binding:
        h[BINDING] = binding
    if timings:
        h[TIMINGS] = timings
    if has_data:
        h[HAS_DATA] = True
    if text:
        h[TEXT] = text
    if deadline is not None:
        h[DEADLINE] = deadline
    if instance:
        h[INSTANCE] = instance
    if count:
        h[COUNT] = count
    return h
