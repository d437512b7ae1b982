"""A keyed unit of work on PostgreSQL in pipeline mode: its statements in as few round trips
as admission's reads allow (`unit_sql.SqlUnits._keyed`).

The statements and their order are those of any keyed unit (`admission_sql.py`): BEGIN, the
keys' lock upserts, admission's reads, the unit's writes, the queue's settling, COMMIT. Sent
one by one, each costs a round trip (13 for a run created and brought to rest, against 2
without a key). Here they are queued on the connection (psycopg's pipeline mode) and sent
together up to the next read whose answer admission needs: the server still runs them one
after the other, each statement with its own snapshot (READ COMMITTED), so a read queued
behind the lock upsert sees what the unit it waited for committed, as before. A run created
and admitted: [BEGIN, lock, slots] then [writes, COMMIT]; one brought to rest: [BEGIN, lock,
transition, outbox, queue head] then [COMMIT].

A compare-and-swap write's rows are read when a later read has brought them back anyway (or
before COMMIT, at the latest): a CAS that matched nothing still undoes the whole unit.
Statements are compiled once for the engine's dialect, with SQLAlchemy's bind processors
(JSON values) applied as its execution layer would.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Dialect, Engine

from core.store.tables import CONCURRENCY_LOCKS


@dataclass(frozen=True, slots=True)
class _Sql:
    text: str
    defaults: Mapping[str, Any]
    processors: Mapping[str, Any]

    def bind(self, params: Mapping[str, Any]) -> dict[str, Any]:
        merged = {**self.defaults, **params}
        for name, process in self.processors.items():
            if name in merged:
                merged[name] = process(merged[name])
        return merged


#: (statement, driver) -> its SQL: the statements are built once each (`functools.cache`), so
#: this holds a few dozen entries however many stores a process opens
_COMPILED: dict[tuple[Any, str], _Sql] = {}


def _compiled(statement: Any, dialect: Dialect) -> _Sql:
    key = (statement, f"{dialect.name}+{dialect.driver}")
    found = _COMPILED.get(key)
    if found is None:
        compiled = statement.compile(dialect=dialect)
        defaults = {k: v for k, v in compiled.params.items() if v is not None}
        found = _COMPILED[key] = _Sql(compiled.string, defaults, dict(compiled._bind_processors))
    return found


@functools.cache
def _lock_one() -> Any:
    insert = pg_insert(CONCURRENCY_LOCKS).values(key=sa.bindparam("l_key"), touched_at=sa.bindparam("l_at"))
    touched = {"touched_at": insert.excluded.touched_at}
    return insert.on_conflict_do_update(index_elements=["key"], set_=touched)


class Sent:
    """A statement queued on the pipeline; its rows are read (a flush) only when asked."""

    def __init__(self, cursor: Any, returns: bool) -> None:
        self._cursor = cursor
        self._returns = returns
        self._rows: list[Mapping[str, Any]] | None = None if returns else []

    def rows(self) -> list[Mapping[str, Any]]:
        if self._rows is None:
            self._rows = self._cursor.fetchall()
        return self._rows


class Pipe:
    """The `admission_sql.Sender` of a pipelined keyed unit (module docstring)."""

    eager = False

    def __init__(self, pg: Any, dialect: Dialect) -> None:
        self._pg = pg
        self._dialect = dialect
        from psycopg.rows import dict_row

        self._dict_row = dict_row

    def send(self, statement: Any, params: Mapping[str, Any], *, returns: bool = False) -> Sent:
        sql = _compiled(statement, self._dialect)
        cursor = self._pg.cursor(row_factory=self._dict_row)
        cursor.execute(sql.text, sql.bind(params))
        return Sent(cursor, returns)

    def rows(self, statement: Any, params: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        return self.send(statement, params, returns=True).rows()

    def lock(self, keys: Iterable[str], now: float) -> None:
        """The keys' lock upserts, in key order (`admission_sql.lock`), queued."""
        for key in sorted(set(keys)):
            self.send(_lock_one(), {"l_key": key, "l_at": now})


@contextlib.contextmanager
def pipelined(engine: Engine) -> Iterator[Pipe]:
    """A pooled connection in pipeline mode inside one transaction: committed (COMMIT sent
    with whatever is still queued, one round trip) when the block ends, rolled back when it
    raises. Driver errors come out as SQLAlchemy's `DBAPIError`, as on every other path."""
    raw = engine.raw_connection()
    pg: Any = raw.driver_connection
    dbapi_error: type[Exception] = engine.dialect.loaded_dbapi.Error
    # autocommit, and BEGIN sent as one of the queued statements: psycopg's own BEGIN (outside
    # autocommit) is followed by a Sync that waits for it, a round trip of its own
    pg.autocommit = True
    try:
        try:
            with pg.pipeline():
                pg.cursor().execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                yield Pipe(pg, engine.dialect)
                pg.cursor().execute("COMMIT")  # sent with the pipeline's closing Sync
        except BaseException:
            with contextlib.suppress(dbapi_error):
                pg.rollback()
            raise
    except dbapi_error as exc:
        raise sa.exc.DBAPIError(None, None, exc) from exc
    finally:
        try:
            pg.autocommit = False  # as the pool lends its connections
        except dbapi_error:  # still in a transaction the ROLLBACK could not end: not lent again
            raw.invalidate()
        raw.close()
