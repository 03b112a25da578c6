"""ZeroMQ over TCP between nodes, and the choice of transport per peer.

Processes on one node talk over ``ipc://`` sockets in the run directory and
pass large tensors through shared memory. Processes on different nodes cannot
share either, so each node-aware process also binds its inbox on a TCP port of
its node's address (the port is chosen by the kernel and reported back to the
parent, which tells every peer), and sends to a peer on another node with a
codec that has no shared-memory pool: every tensor travels in the message,
split into frames of at most :data:`TCP_CHUNK_BYTES` so no single frame is
larger than that however large the tensor. It is the same typed codec (no
pickle) on both transports.

:func:`transport_for` is the whole rule: same node id -> ``ipc`` (plus ``shm``
for large tensors), different node -> ``tcp``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import zmq

from .codec import Codec, Encoded

TCP_CHUNK_BYTES = 4 << 20
"""Largest frame a tensor is split into on a TCP hop."""

IPC = "ipc"
SHM = "shm"
TCP = "tcp"
TRANSPORTS = (IPC, SHM, TCP)


@dataclass(frozen=True)
class Endpoint:
    """Where one process listens: its node, and its TCP address (``None`` for a node-local-only process)."""

    node: str
    tcp: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "tcp": self.tcp}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Endpoint:
        node, tcp = data.get("node"), data.get("tcp")
        if not isinstance(node, str) or not (tcp is None or (isinstance(tcp, str) and tcp.startswith("tcp://"))):
            raise ValueError(f"malformed endpoint {data!r}")
        return cls(node, tcp)


def transport_for(my_node: str, peer: Endpoint | None) -> str:
    """``ipc`` for a peer on this node (or one whose node is not known yet: the local default), else ``tcp``."""
    if peer is None or peer.node == my_node:
        return IPC
    return TCP


def bind_tcp(sock: zmq.Socket, host: str) -> str:
    """Bind ``sock`` on a free TCP port of ``host``; returns the endpoint peers connect to."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
        sock.setsockopt(zmq.IPV6, 1)
    sock.bind(f"tcp://{host}:0")
    return sock.getsockopt_string(zmq.LAST_ENDPOINT)


class CountingCodec(Codec):
    """A codec that adds the bytes it encodes to ``counts`` (``ipc`` on the socket, ``shm`` in segments, or ``tcp``).

    One per outbox, so the counts are per peer and transport (``/metrics``,
    ``omni topology --backend ray`` and the tests read them).
    """

    def __init__(self, *, socket_transport: str, counts: dict[str, int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.socket_transport = socket_transport
        self.counts = counts

    def _count(self, encoded: Encoded) -> Encoded:
        counts = self.counts
        counts[self.socket_transport] = counts.get(self.socket_transport, 0) + encoded.nbytes
        if encoded.leases:
            counts[SHM] = counts.get(SHM, 0) + sum(lease.ref.nbytes for lease in encoded.leases)
        return encoded

    def encode(self, obj: Any, *, shm_timeout: float | None = None) -> Encoded:
        return self._count(super().encode(obj, shm_timeout=shm_timeout))

    def encode_inline(self, obj: Any) -> Encoded | None:
        encoded = super().encode_inline(obj)
        return self._count(encoded) if encoded is not None else None
