"""SQLite WAL checkpoints in a background thread, off the steps' commits.

In WAL mode a commit appends pages to the `-wal` file; a *checkpoint* copies them back into
the database file (and, with `synchronous=NORMAL`, syncs it). By default SQLite runs one
inside whichever commit finds the WAL over 1,000 pages, so every few hundred steps one
step's journal write also copied megabytes and waited for the disk (≈ 0.1 ms a step on
average on the reference machine, milliseconds for the step that drew it).

The hot path's connections (`hot_path.HotPath`, the journal writes of every step) therefore
run with `wal_autocheckpoint = 0`, and every `EVERY` of their commits wake a thread that
runs `PRAGMA wal_checkpoint(PASSIVE)` on a connection of its own: it copies what no reader
still needs and never blocks a writer, so the steps go on committing meanwhile. Durability
is unchanged (a commit is in the WAL either way; NORMAL syncs at checkpoints, FULL at every
commit). Other connections keep SQLite's automatic checkpoints, a backstop should this
thread fall behind. The thread starts at the first nudge (a process that writes no steps
never has it: `bot/supervisor.py` forks only thread-free parents) and stops with the store.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from core.store.database import run_pragmas

log = logging.getLogger("baton.store")

#: hot-path commits between checkpoints (a step commits once or twice, a few pages each:
#: about SQLite's default of a checkpoint per 1,000 WAL pages)
EVERY = 256
NO_AUTOCHECKPOINT = "PRAGMA wal_autocheckpoint = 0"


class Checkpointer:
    """Checkpoints the WAL of a SQLite database when nudged, in its own thread, on its own
    connection (`connect()`, set up with `pragmas`)."""

    def __init__(self, connect: Callable[[], Any], *, pragmas: list[str], every: int = EVERY) -> None:
        self._connect = connect
        self.every = every
        self._pragmas = pragmas
        self._commits = 0
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.checkpoints = 0  # done so far (tests, logs)

    def committed(self) -> None:
        """A hot-path commit happened; every `every` of them, a checkpoint is asked for."""
        self._commits += 1  # racy across threads: only a rough count is needed
        if self._commits % self.every == 0:
            self.nudge()

    def nudge(self) -> None:
        with self._lock:
            if self._stop:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="baton-wal-checkpoint", daemon=True)
                self._thread.start()
        self._wake.set()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread after the checkpoint in progress, if any."""
        thread = self.stop()
        if thread is not None:
            thread.join(timeout)

    def stop(self) -> threading.Thread | None:
        """Ask the thread to stop (without waiting for it); the thread, if it was started."""
        with self._lock:
            self._stop = True
            thread = self._thread
        self._wake.set()
        return thread

    def _run(self) -> None:
        try:
            conn = self._connect()
            run_pragmas(conn, self._pragmas)
        except sqlite3.Error as exc:
            log.warning("WAL checkpoints left to SQLite's automatic ones: %s", exc,
                        extra={"action": "wal_checkpoint_failed"})  # fmt: skip
            return
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stop:
                    return
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
                except sqlite3.Error as exc:  # a busy or failing database: the next nudge tries again
                    log.warning("WAL checkpoint failed: %s", exc, extra={"action": "wal_checkpoint_failed"})
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
