"""WAL checkpoints run in a background thread, never inside the steps' commits
(core/store/checkpoints.py), through the real `SqlStore` on a SQLite file."""

from __future__ import annotations

import time
from pathlib import Path

from core.store.checkpoints import Checkpointer
from core.store.repository import SqlStore


def _checkpointer(store: SqlStore) -> Checkpointer:
    checkpoints = store._hot._checkpoints
    assert checkpoints is not None
    return checkpoints


def test_hot_path_commits_leave_checkpoints_to_a_thread(tmp_path: Path) -> None:
    db = tmp_path / "baton.db"
    with SqlStore(f"sqlite:///{db}") as store:
        store.migrate()
        checkpoints = _checkpointer(store)
        store.blobs.put_blob(b"first")
        conn = store._hot._connection()
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0  # never in a commit
        migrated = db.stat().st_size
        for i in range(checkpoints.every * 2):  # ~5 MB of pages through the hot path's commits
            store.blobs.put_blob(i.to_bytes(4, "big") * 5000)
        deadline = time.monotonic() + 10
        while checkpoints.checkpoints < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert checkpoints.checkpoints >= 1
        # only a checkpoint copies WAL pages into the database file: the thread's did
        assert db.stat().st_size > migrated + 1_000_000
        thread = checkpoints._thread
        assert thread is not None and thread.is_alive()
    thread.join(5)
    assert not thread.is_alive()  # closing the store stopped it


def test_a_store_that_writes_no_steps_starts_no_thread(tmp_path: Path) -> None:
    with SqlStore(f"sqlite:///{tmp_path / 'baton.db'}") as store:
        store.migrate()
        store.blobs.put_blob(b"one")
        assert _checkpointer(store)._thread is None  # e.g. a supervisor's parent, before it forks


def test_in_memory_sqlite_has_no_checkpointer() -> None:
    with SqlStore("sqlite://") as store:
        store.migrate()
        assert store._hot._checkpoints is None
