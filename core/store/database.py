"""Opening a database: URL normalisation, SQLite pragmas, driver-error translation.

`normalize_url` is pure. `open_engine` builds the SQLAlchemy engine for SQLite (WAL,
busy timeout, foreign keys, chosen `synchronous`) or PostgreSQL (psycopg 3).
`translate_errors` / `store_operation` turn every driver error into a one-line `StoreError`.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, ParamSpec, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from core.errors import ConfigurationError, StoreError
from core.store.tables import postgresql_options

SqliteSynchronous = Literal["NORMAL", "FULL"]
P = ParamSpec("P")
T = TypeVar("T")

#: How long a SQLite writer waits for another one before giving up.
SQLITE_BUSY_TIMEOUT_MS = 10_000

WAL_PRAGMA = "PRAGMA journal_mode = WAL"

_PG_PREFIXES = ("postgres://", "postgresql://")


def normalize_url(url: str) -> URL:
    """Parse a database URL; plain `postgres://`/`postgresql://` get the psycopg 3 driver."""
    text = url.strip()
    for prefix in _PG_PREFIXES:
        if text.startswith(prefix):
            text = "postgresql+psycopg://" + text[len(prefix) :]
            break
    try:
        parsed = make_url(text)
    except ArgumentError as exc:
        raise ConfigurationError(
            f"BATON_DATABASE_URL is not a database URL: {url.rsplit('@', 1)[-1]!r}",
            hint="Use sqlite:///path/to/baton.db or postgresql://user@host/db.",
        ) from exc
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise ConfigurationError(
            f"BATON_DATABASE_URL uses {backend!r}; Baton stores runs in SQLite or PostgreSQL",
            hint="Use sqlite:///path/to/baton.db or postgresql://user@host/db.",
        )
    if backend == "sqlite" and (parsed.host or parsed.port or parsed.username):
        raise ConfigurationError(  # SQLite's dialect refuses it only when an engine is made
            f"BATON_DATABASE_URL names a host ({parsed.host!r}), which SQLite has none of",
            hint="Write three slashes before a relative path (sqlite:///baton.db), four before an "
                 "absolute one (sqlite:////srv/baton/baton.db).",
        )
    return parsed


def dialect_insert(dialect: str) -> Any:
    """The dialect's `insert` (with `on_conflict_…`); imports only that dialect's module: a
    SQLite deployment never loads SQLAlchemy's PostgreSQL dialect (≈ 40 ms of a cold start)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert
    from sqlalchemy.dialects import sqlite

    return sqlite.insert


def is_memory_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def sqlite_pragmas(synchronous: SqliteSynchronous) -> list[str]:
    """The statements run on every new SQLite connection (busy timeout first: the switch
    to WAL needs a lock another process may hold)."""
    if synchronous not in ("NORMAL", "FULL"):
        raise ValueError(f"sqlite_synchronous must be NORMAL or FULL, not {synchronous!r}")
    return [
        f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}",
        WAL_PRAGMA,
        f"PRAGMA synchronous = {synchronous}",
        "PRAGMA foreign_keys = ON",
    ]


def open_engine(url: URL, *, sqlite_synchronous: SqliteSynchronous = "NORMAL") -> Engine:
    """An engine for `url` (already normalised)."""
    if url.get_backend_name() != "sqlite":
        if url.get_backend_name() == "postgresql":
            postgresql_options()
        return sa.create_engine(url, pool_size=5, max_overflow=10)

    kwargs: dict[str, Any] = {}
    if is_memory_sqlite(url):
        # one shared connection, or every checkout would see its own empty database
        kwargs = {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
    else:
        Path(str(url.database)).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(url, **kwargs)
    pragmas = sqlite_pragmas(sqlite_synchronous)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            run_pragmas(cursor, pragmas)
        finally:
            cursor.close()

    return engine


def run_pragmas(cursor: Any, pragmas: Sequence[str]) -> None:
    """Run `pragmas` on a new SQLite connection's cursor (the switch to WAL retried)."""
    for pragma in pragmas:
        if pragma == WAL_PRAGMA:
            _switch_to_wal(cursor)
        else:
            cursor.execute(pragma)


def _is_locked(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def _switch_to_wal(cursor: Any) -> None:
    """`PRAGMA journal_mode = WAL`, retried while another process holds the lock.

    Processes opening a new file together all switch it to WAL, which takes the file's
    exclusive lock; SQLite then answers some of them "database is locked" at once, without
    waiting out the busy timeout (its deadlock avoidance: each holds the shared lock the
    other needs). They retry with jittered backoff for as long as the busy timeout."""
    try:
        cursor.execute(WAL_PRAGMA)
        return
    except sqlite3.OperationalError as exc:
        if not _is_locked(exc):
            raise
    import tenacity  # only on contention: a start stays light

    for attempt in tenacity.Retrying(
        stop=tenacity.stop_after_delay(SQLITE_BUSY_TIMEOUT_MS / 1000),
        wait=tenacity.wait_random_exponential(multiplier=0.005, max=0.25),
        retry=tenacity.retry_if_exception(_is_locked),
        reraise=True,
    ):
        with attempt:
            cursor.execute(WAL_PRAGMA)


def pg_conninfo(database_url: str) -> str:
    """A libpq connection string for a Baton database URL (PostgreSQL only: distributed
    execution's job queue and workers)."""
    url = normalize_url(database_url)
    if url.get_backend_name() != "postgresql":
        raise ConfigurationError(
            "BATON_EXECUTOR=procrastinate needs PostgreSQL; BATON_DATABASE_URL is SQLite",
            hint="Set BATON_DATABASE_URL=postgresql://… or BATON_EXECUTOR=local.",
        )
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def describe(exc: BaseException) -> str:
    """One line naming a driver error without SQL text or parameters."""
    orig = getattr(exc, "orig", None) or exc
    first = (str(orig).strip().splitlines() or [""])[0]
    return f"{type(orig).__name__}: {first}" if first else type(orig).__name__


@contextmanager
def translate_errors(operation: str) -> Iterator[None]:
    """Re-raise any SQLAlchemy/driver error as `StoreError` (`from exc`)."""
    try:
        yield
    except SQLAlchemyError as exc:
        raise StoreError(f"The run store could not {operation} ({describe(exc)}).") from exc


def store_operation(operation: str) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Decorator form of `translate_errors` for repository methods."""

    def decorate(fn: Callable[P, T]) -> Callable[P, T]:
        @functools.wraps(fn)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> T:
            try:
                return fn(*args, **kwargs)
            except SQLAlchemyError as exc:
                raise StoreError(f"The run store could not {operation} ({describe(exc)}).") from exc

        return guarded

    return decorate
