"""A pseudo-terminal session with a subprocess: type lines, wait for text with a deadline."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from collections.abc import Sequence
from pathlib import Path

_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-B]|[=>])")


def plain(text: str) -> str:
    """Terminal output without escape sequences and carriage returns."""
    return _ANSI.sub("", text).replace("\r", "")


class Terminal:
    """`argv` running on the slave side of a pty of `columns` x `rows`."""

    def __init__(
        self, argv: Sequence[str], *, cwd: Path, env: dict[str, str], columns: int = 120, rows: int = 40
    ) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self._master = master
        self.process = subprocess.Popen(
            list(argv), stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, start_new_session=True
        )
        os.close(slave)
        self.output = ""  # everything read so far, raw

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self._master], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self._master, 65536)
        except OSError:  # the child closed the terminal
            return False
        if not chunk:
            return False
        self.output += chunk.decode("utf-8", errors="replace")
        return True

    def expect(self, pattern: str, *, after: int = 0, timeout: float = 30.0) -> re.Match[str]:
        """Wait until `pattern` appears in the plain output (from offset `after`)."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            found = regex.search(plain(self.output)[after:])
            if found:
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (not self._read(remaining) and self.process.poll() is not None):
                raise AssertionError(
                    f"{pattern!r} not seen; the terminal shows:\n{plain(self.output)[after:]}"
                )

    def mark(self) -> int:
        """An offset into the plain output: expect text after this point."""
        return len(plain(self.output))

    def type(self, text: str) -> None:
        os.write(self._master, text.encode())

    def wait(self, timeout: float = 30.0) -> int:
        """Wait for the process to exit, draining its output meanwhile."""
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            self._read(min(0.5, max(0.0, deadline - time.monotonic())))
        return self.process.wait(timeout=max(0.1, deadline - time.monotonic()))

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        os.close(self._master)
