"""The one HTTP server's socket (bot/http.py `bind`): the connections it accepts send a small
response at once. asyncio switches Nagle's algorithm off (TCP_NODELAY) only on a socket whose
`proto` says TCP; a listening socket made with protocol 0 handed that 0 to every connection it
accepted, and each response's body then waited ~40 ms for the client's delayed ACK."""

from __future__ import annotations

import asyncio
import socket

from bot.http import bind


async def _accepted_nodelay(listening: socket.socket) -> int:
    """TCP_NODELAY of the server side of one connection, as uvicorn serves it (`sock=`)."""
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(accepted, sock=listening)
    async with server:
        port = listening.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await asyncio.wait_for(seen, 10)
        finally:
            writer.close()


def test_the_connections_the_server_accepts_have_nagle_off() -> None:
    listening = bind("127.0.0.1", 0)
    assert listening.proto == socket.IPPROTO_TCP
    assert asyncio.run(_accepted_nodelay(listening)) != 0


def test_a_socket_made_with_protocol_zero_would_leave_nagle_on() -> None:
    """The cause, shown with asyncio's own rule: the same server on a protocol-0 socket."""
    plain = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    plain.bind(("127.0.0.1", 0))
    plain.listen(8)
    plain.setblocking(False)
    assert asyncio.run(_accepted_nodelay(plain)) == 0
