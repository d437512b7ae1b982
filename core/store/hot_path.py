"""The engine's hot path: single-statement writes on per-thread DBAPI connections.

A durable step commits twice: its journal start, then its output blob with the journal
finish (`run_after`: one transaction); steps whose start need not be journaled write their
blobs and `completed` entries together (`run_many`: one transaction, one fsync, for one step or a
group-committed batch). These statements are built with SQLAlchemy Core against the table
objects, compiled once for the engine's dialect, and executed directly on a DBAPI
connection that each thread keeps open in autocommit mode (each statement is its own
transaction; on PostgreSQL that saves the BEGIN and COMMIT round trips). What that buys
over SQLAlchemy's execution layer is measured by `bench/hot_path_ab.py` and stated in
docs/storage.md ("What the hot path buys"). Driver errors are translated to `StoreError`
here, like everywhere else in the store.

Only short autocommitted writes belong here; every read and every CAS on runs goes
through SQLAlchemy (`repository.py`).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy.engine import Engine
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement

from core.errors import StoreError
from core.store.checkpoints import NO_AUTOCHECKPOINT, Checkpointer
from core.store.database import describe, is_memory_sqlite, run_pragmas

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Prepared:
    """A statement compiled for one dialect: its SQL text and how to bind parameters."""

    sql: str
    positional_names: tuple[str, ...] | None  # qmark drivers (SQLite); None: named (psycopg)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    returns: bool = False

    def bind(self, params: Mapping[str, Any]) -> Sequence[Any] | Mapping[str, Any]:
        merged = {**self.defaults, **params} if self.defaults else params
        if self.positional_names is None:
            return merged
        return tuple(merged[name] for name in self.positional_names)


@dataclass(frozen=True, slots=True)
class Outcome:
    rowcount: int
    returned: Any = None  # first column of the first returned row, if the statement returns


class HotPath:
    """Runs `Prepared` statements, one committed transaction each, on a connection per thread."""

    def __init__(self, engine: Engine, *, pragmas: Sequence[str] = ()) -> None:
        self._engine = engine
        self._pragmas = list(pragmas)
        #: a file SQLite database: its WAL is checkpointed by a thread, never in these commits
        self._checkpoints: Checkpointer | None = None
        self._dbapi_error: type[Exception] = engine.dialect.loaded_dbapi.Error
        self._local = threading.local()
        self._lock = threading.Lock()
        self._opened: list[Any] = []
        self._shared: Any = None
        # close this path's connections even if the store is dropped without close()
        self._finalizer = weakref.finalize(self, _close_all, self._opened, self._dbapi_error)
        if is_memory_sqlite(engine.url):
            # a private in-memory database has exactly one connection: share the pool's
            fairy = engine.raw_connection()
            self._shared = fairy.dbapi_connection
            fairy.close()
        elif engine.dialect.name == "sqlite":
            self._checkpoints = Checkpointer(self._connect, pragmas=list(self._pragmas))
            self._pragmas.append(NO_AUTOCHECKPOINT)
        self._finish = self._checkpoints.committed if self._checkpoints is not None else _nothing
        if self._checkpoints is not None:  # a store dropped without close(): its thread ends too
            weakref.finalize(self, self._checkpoints.stop)

    def prepare(self, statement: ClauseElement, column_keys: Sequence[str] | None = None) -> Prepared:
        compiled = statement.compile(
            dialect=self._engine.dialect, column_keys=list(column_keys) if column_keys else None
        )
        if not isinstance(compiled, SQLCompiler):
            raise TypeError(f"the hot path runs SQL statements, not {type(statement).__name__}")
        names = tuple(compiled.positiontup) if compiled.positional and compiled.positiontup else None
        defaults = {k: v for k, v in compiled.params.items() if column_keys is None or k not in column_keys}
        defaults = {k: v for k, v in defaults.items() if v is not None}
        returns = bool(getattr(compiled, "effective_returning", None) or getattr(compiled, "returning", None))
        return Prepared(sql=compiled.string, positional_names=names, defaults=defaults, returns=returns)

    def _connection(self) -> Any:
        if self._shared is not None:
            return self._shared
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            cursor = conn.cursor()
            try:
                run_pragmas(cursor, self._pragmas)
            finally:
                cursor.close()
            conn.commit()
            _autocommit(conn)  # one statement = one transaction, without BEGIN/COMMIT round trips
            self._local.conn = conn
            with self._lock:
                self._opened.append(conn)
        return conn

    def _connect(self) -> Any:
        cargs, cparams = self._engine.dialect.create_connect_args(self._engine.url)
        return self._engine.dialect.connect(*cargs, **cparams)

    def _discard(self, conn: Any) -> None:
        if conn is self._shared:
            return
        self._local.conn = None
        with self._lock:
            if conn in self._opened:
                self._opened.remove(conn)
        with contextlib.suppress(self._dbapi_error):
            conn.close()

    def run(self, prepared: Prepared, params: Mapping[str, Any], *, operation: str) -> Outcome:
        """Execute and commit; any driver error becomes a `StoreError`."""
        conn = None
        try:
            conn = self._connection()
            cursor = conn.cursor()
            try:
                cursor.execute(prepared.sql, prepared.bind(params))
                returned = None
                if prepared.returns:
                    row = cursor.fetchone()
                    returned = row[0] if row is not None else None
                rowcount = cursor.rowcount
            finally:
                cursor.close()
            if conn is self._shared:  # the pool's connection is not in autocommit mode
                conn.commit()
            self._finish()
        except self._dbapi_error as exc:
            if conn is None:
                pass  # connecting failed; the next call tries again
            elif conn is self._shared:
                conn.rollback()
            else:
                self._discard(conn)  # it may be broken; the next call opens a fresh one
            raise StoreError(f"The run store could not {operation} ({describe(exc)}).") from exc
        return Outcome(rowcount=rowcount, returned=returned)

    def run_after(
        self,
        before: Sequence[tuple[Prepared, Sequence[Mapping[str, Any]]]],
        prepared: Prepared,
        params: Mapping[str, Any],
        *,
        operation: str,
    ) -> Outcome:
        """`before` (as `run_many`), then `prepared`, in ONE committed transaction; the
        outcome of `prepared` (which may not return rows): `run_many` with `prepared` last."""
        return Outcome(rowcount=self.run_many([*before, (prepared, [params])], operation=operation))

    def run_many(
        self, batches: Sequence[tuple[Prepared, Sequence[Mapping[str, Any]]]], *, operation: str
    ) -> int:
        """Each statement with each of its parameter sets (`executemany`), all in ONE
        committed transaction: one fsync for any number of rows. No statement may return rows.
        The rows the last statement run changed (for a compare-and-swap that comes last)."""
        conn = None
        rowcount = 0
        try:
            conn = self._connection()
            cursor = conn.cursor()
            try:
                with _transaction(conn, shared=conn is self._shared):
                    for prepared, rows in batches:
                        if rows:
                            cursor.executemany(prepared.sql, [prepared.bind(row) for row in rows])
                            rowcount = cursor.rowcount
            finally:
                cursor.close()
            self._finish()
        except self._dbapi_error as exc:
            if conn is not None and conn is not self._shared:
                self._discard(conn)
            raise StoreError(f"The run store could not {operation} ({describe(exc)}).") from exc
        return rowcount

    def transact(self, work: Callable[[Any], _T], *, operation: str) -> _T:
        """`work(connection)` inside ONE committed transaction on this thread's connection
        (the driver's own), for a few statements that must commit together; any driver
        error becomes a `StoreError` and rolls everything back."""
        conn = None
        try:
            conn = self._connection()
            with _transaction(conn, shared=conn is self._shared):
                return work(conn)
        except self._dbapi_error as exc:
            if conn is not None and conn is not self._shared:
                self._discard(conn)
            raise StoreError(f"The run store could not {operation} ({describe(exc)}).") from exc

    def close(self) -> None:
        if self._checkpoints is not None:
            self._checkpoints.close()
        with self._lock:
            _close_all(self._opened, self._dbapi_error)
        self._local = threading.local()


def _nothing() -> None:
    pass


def _autocommit(conn: Any) -> None:
    if hasattr(conn, "autocommit"):  # psycopg 3
        conn.autocommit = True
    else:  # sqlite3: no implicit BEGIN; each statement commits by itself
        conn.isolation_level = None


@contextlib.contextmanager
def _transaction(conn: Any, *, shared: bool) -> Iterator[None]:
    """BEGIN … COMMIT on a hot-path connection (autocommit), or commit the shared one."""
    if hasattr(conn, "transaction"):  # psycopg 3 in autocommit: an explicit transaction block
        with conn.transaction():
            yield
        return
    if not shared:
        conn.execute("BEGIN")
    try:
        yield
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def _close_all(connections: list[Any], error: type[Exception]) -> None:
    while connections:
        conn = connections.pop()
        with contextlib.suppress(error):
            conn.close()
