"""A Unix socket service for escape tests: anyone may connect (0777), and each peer is told a
token, as a database or Docker answers a peer it authenticates by uid. A step that reached
it would print the token."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def answering(path: Path) -> Iterator[tuple[str, list[str]]]:
    """Serve at `path` until the block ends: (the token, the peers it answered)."""
    token = f"SOCKET-ANSWERED-{uuid.uuid4().hex}"
    answered: list[str] = []
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    path.chmod(0o777)
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                peer, _ = server.accept()
            except TimeoutError:
                continue
            with peer:
                answered.append("peer")
                peer.sendall(token.encode())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield token, answered
    finally:
        stop.set()
        thread.join(5)
        server.close()
