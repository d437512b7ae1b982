"""Counting the SQL statements a piece of Baton sends, without changing what it sends.

Two kinds of statements leave `SqlStore`: those through SQLAlchemy (every read and CAS),
seen by a `before_cursor_execute` listener on the store's engine, and the hot-path writes
(journal start/finish, put_blob), which `core/store/hot_path.py` executes on its own DBAPI
connections where no SQLAlchemy event fires; those are counted by wrapping `HotPath.run`
of this one store instance (the statement still executes; only a counter is added).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event

from core.store.repository import SqlStore


@dataclass
class QueryCount:
    sqlalchemy: int = 0
    hot_path: int = 0
    statements: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.sqlalchemy + self.hot_path


@contextlib.contextmanager
def counting(store: SqlStore, *, keep: bool = False) -> Iterator[QueryCount]:
    count = QueryCount()
    engine = store._engine  # the store's own engine: the bench observes, it changes nothing
    hot = store._hot

    def before(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        count.sqlalchemy += 1
        if keep:
            count.statements.append(statement.split("\n")[0][:80])

    original = hot.run

    def run(prepared: Any, params: Any, *, operation: str) -> Any:
        count.hot_path += 1
        if keep:
            count.statements.append(f"[hot] {operation}")
        return original(prepared, params, operation=operation)

    event.listen(engine, "before_cursor_execute", before)
    hot.run = run  # type: ignore[method-assign]
    try:
        yield count
    finally:
        event.remove(engine, "before_cursor_execute", before)
        del hot.run  # back to the class attribute
