"""The server's listening socket makes asyncio turn Nagle off on every connection.

asyncio sets TCP_NODELAY only on accepted sockets whose ``proto`` is
IPPROTO_TCP; a socket made with proto 0 left Nagle on, and every keep-alive
response then waited for the client's delayed ACK (a steady ~40 ms per request).
"""

from __future__ import annotations

import asyncio
import socket

from omni_runtime.serving.server import bind


def test_accepted_connections_have_tcp_nodelay():
    listener = bind("127.0.0.1", 0)
    port = listener.getsockname()[1]
    seen: list[int] = []

    async def scenario() -> None:
        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.append(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=listener)
        async with server:
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.01)
            writer.close()

    asyncio.run(scenario())
    assert seen and seen[0] != 0
