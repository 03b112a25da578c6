"""A process's data plane when the run spans nodes: IPC + shared memory on its node, TCP across.

:class:`NodePlane` is the :class:`~omni_runtime.plane.Plane` of one process
of a run placed by the Ray backend. Its inbox listens on the run's ``ipc://``
socket *and* on a TCP port of its node's address; :meth:`NodePlane.endpoint`
is what the parent passes on to every peer. Each outbox is chosen per peer:
``ipc://`` with the shared-memory pool for a peer on the same node, ``tcp://``
with a pool-less, chunking codec for a peer on another node
(:func:`~omni_runtime.transport.tcp.transport_for`). Every outbox counts the
bytes it sends per transport (:meth:`NodePlane.sent_bytes`).

The peer book starts with the parent's endpoint (in the run spec) and is
completed by a ``peers`` message from the parent once every instance has
reported where it listens; a restarted instance's new address arrives the same
way and replaces the outbox to its old one.
"""

from __future__ import annotations

from typing import Any

from ..plane import DEFAULT_SHM_BUDGET, Plane
from ..transport import AsyncOutbox, RunDir
from ..transport.tcp import TCP, TCP_CHUNK_BYTES, CountingCodec, Endpoint, bind_tcp, transport_for


class NodePlane(Plane):
    def __init__(
        self,
        run: RunDir,
        me: str,
        node: dict[str, str],
        peers: dict[str, dict[str, Any]] | None = None,
        shm_budget_bytes: int = DEFAULT_SHM_BUDGET,
        send_timeout: float | None = None,
        arrays: str = "torch",
    ) -> None:
        super().__init__(run, me, shm_budget_bytes, send_timeout, arrays=arrays)
        self.node = str(node["id"])
        self.tcp_address = bind_tcp(self.inbox.socket, str(node["host"]))
        self.peers: dict[str, Endpoint] = {}
        self._transports: dict[str, str] = {}
        self._counts: dict[str, dict[str, int]] = {}
        self.learn(peers or {})

    def endpoint(self) -> dict[str, Any]:
        """Where this process listens, for the parent to pass on."""
        return Endpoint(self.node, self.tcp_address).to_dict()

    def learn(self, peers: dict[str, dict[str, Any]]) -> None:
        """Take peers' endpoints; an outbox to a peer whose endpoint changed (a restart) is replaced."""
        for name, data in peers.items():
            if name == self.me:
                continue
            endpoint = Endpoint.from_dict(data)
            if self.peers.get(name) == endpoint:
                continue
            self.peers[name] = endpoint
            old = self._outboxes.pop(name, None)
            if old is not None:
                old.close(linger=0)

    def transport(self, peer: str) -> str:
        """``ipc`` or ``tcp``: how this process reaches ``peer``."""
        return transport_for(self.node, self.peers.get(peer))

    def outbox(self, peer: str) -> AsyncOutbox:
        box = self._outboxes.get(peer)
        if box is not None:
            return box
        transport = self.transport(peer)
        counts = self._counts.setdefault(peer, {})
        if transport == TCP:
            address = self.peers[peer].tcp
            if address is None:
                raise RuntimeError(f"process {peer} is on node {self.peers[peer].node} but listens on no TCP address")
            codec = CountingCodec(socket_transport=TCP, counts=counts, reader=self.reader, chunk_bytes=TCP_CHUNK_BYTES)
        else:
            address = self.run.address(peer)
            codec = CountingCodec(socket_transport=transport, counts=counts, pool=self.pool, reader=self.reader)
        self._transports[peer] = transport
        box = self._outboxes[peer] = AsyncOutbox(address, codec=codec, ctx=self.zctx, sndhwm=0, linger=0.0, send_timeout=self.send_timeout)
        return box

    def sent_bytes(self) -> dict[str, dict[str, int]]:
        """Bytes sent so far, per peer and transport (``ipc``, ``shm``, ``tcp``)."""
        return {peer: dict(counts) for peer, counts in self._counts.items() if counts}
