"""Admission on SQLite and PostgreSQL: the key locks, the `admission.Ledger` over a
connection, and how a unit's writes ask a slot (`unit_sql.SqlUnits._keyed` runs them).

A unit touches a concurrency key when it creates a run with one or changes the status of a
run that has one. Such a unit is sent as one ordinary transaction (not PostgreSQL's single
statement: admission reads under the lock, then decides) that first locks its keys:

* PostgreSQL: `INSERT … ON CONFLICT (key) DO UPDATE` the key's row of `concurrency_locks`
  (one statement, keys in order): the update takes the row's lock, as `SELECT … FOR UPDATE`
  would, and a second unit of the key waits for the first to commit; every later statement of
  the transaction (READ COMMITTED) sees what it committed, so two replicas admitting at once
  take turns. The key lock is taken before any run row, in every keyed unit.
* SQLite: `BEGIN IMMEDIATE` takes the database's one write lock before anything is read.

Which runs have a key is read once per run and kept (a run's key never changes).

How the statements travel: `Immediate` (each sent and answered in turn: SQLite, a unit in a
batch) or `admission_pg.Pipe` (PostgreSQL: queued, sent together up to each read admission
needs). `SqlLedger` reads and writes through either.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import sqlalchemy as sa
from cachetools import LRUCache
from sqlalchemy.engine import Engine

from core.store import admission
from core.store import writes_sql as w
from core.store.database import dialect_insert
from core.store.records import Run, RunStatus
from core.store.rows import run_from_row
from core.store.tables import CONCURRENCY_LOCKS, RUNS

_HOLDING = (RunStatus.RUNNING.value, RunStatus.NEEDS_ATTENTION.value, RunStatus.PAUSED.value)
_CACHE_SIZE = 50_000


class _Keys:
    """run id -> its concurrency key (or None), as read or written by this process."""

    def __init__(self) -> None:
        self._known: LRUCache[str, str | None] = LRUCache(_CACHE_SIZE)  # run id -> its key
        self._lock = threading.Lock()

    def lookup(self, engine: Engine, run_ids: Iterable[str]) -> set[str]:
        ids = set(run_ids)
        with self._lock:
            missing = [i for i in ids if i not in self._known]
        if missing:
            query = sa.select(RUNS.c.id, RUNS.c.concurrency_key).where(RUNS.c.id.in_(missing))
            with engine.connect() as conn:
                found = {row[0]: row[1] for row in conn.execute(query)}
            with self._lock:
                for run_id in missing:
                    if run_id in found:  # a run not (yet) there is looked up again next time
                        self._known[run_id] = found[run_id]
        with self._lock:
            return {k for i in ids if (k := self._known.get(i)) is not None}

    def remember(self, run_id: str, key: str | None) -> None:
        with self._lock:
            self._known[run_id] = key

    def key_of(self, run_id: str) -> str | None:
        with self._lock:
            return self._known.get(run_id)


KEYS = _Keys()


def keys_of(engine: Engine, writes: Sequence[w.Write]) -> set[str]:
    """The concurrency keys a unit's writes touch (none for most units)."""
    keys: set[str] = set()
    changed: list[str] = []
    for write in writes:
        if write.kind == "create_run":
            key = write.params.get("concurrency_key")
            KEYS.remember(write.params["id"], key)
            if key is not None:
                keys.add(key)
        elif write.kind.startswith("transition"):
            changed.append(write.params["id"])
    if changed:
        keys |= KEYS.lookup(engine, changed)
    return keys


def lock(conn: sa.Connection, dialect: str, keys: Iterable[str], now: float) -> None:
    """Take the keys' locks, in key order (module docstring)."""
    ordered = sorted(set(keys))
    if dialect == "sqlite":  # the database's one write lock, before anything is read
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        return
    # PostgreSQL: the upsert's DO UPDATE locks each key's row (created the first time), in key
    # order, one statement; a second unit of the key waits here until the first commits
    insert = dialect_insert(dialect)(CONCURRENCY_LOCKS)
    touched = {"touched_at": insert.excluded.touched_at}
    upsert = insert.on_conflict_do_update(index_elements=["key"], set_=touched)
    conn.execute(upsert.values([{"key": key, "touched_at": now} for key in ordered]))


def asking(
    write: w.Write, ledger: SqlLedger, now: float, own: dict[str, tuple[str | None, float | None]],
    settle: set[str],
) -> w.Write:  # fmt: skip
    """`write` as the unit sends it. A write that makes a keyed run `running` from a status
    holding no slot asks a slot (`admission.ask`, which may refuse it): it starts now, or is
    written `queued`. A key whose queue may move (a run queued, at rest, cancelled) goes in
    `settle`."""
    params = write.params
    if write.kind == "create_run":
        key = params.get("concurrency_key")
        if key is None:
            return write
        if params["status"] != RunStatus.RUNNING.value:
            settle.add(key)
            return write
        if admission.ask(ledger, run_from_row(params), now, actor=params["requester"]):
            return write
    elif write.kind.startswith("transition"):
        key = KEYS.key_of(params["id"])
        if key is None:
            return write
        if params["status"] != RunStatus.RUNNING.value:
            settle.add(key)
            return write
        current = ledger.get(params["id"])
        allowed = write.kind.partition(":")[2].split(",")
        version = params.get("version")
        if (
            current is None
            or current.holds_slot
            or current.status.value not in allowed
            or version not in (None, current.version)
        ):
            return write  # keeps its slot, or the CAS loses as it would anyway
        actor = params["status_by"]
        if admission.ask(ledger, current.evolve(status_by=actor), now, actor=actor):
            return write
    else:
        return write
    own[params["id"]] = (params["lease_owner"], params["lease_expires_at"])
    settle.add(key)
    queued = {**params, "status": RunStatus.QUEUED.value, "queued_at": now, "lease_owner": None,
              "lease_expires_at": None}  # fmt: skip
    return dataclasses.replace(write, params=queued)


_PUT = ("status", "version", "status_by", "reason", "updated_at", "lease_owner", "lease_expires_at",
        "queued_at")


@functools.cache
def _by_id() -> sa.Select[Any]:
    return sa.select(RUNS).where(RUNS.c.id == sa.bindparam("q_id"))


@functools.cache
def _holders() -> sa.Select[Any]:
    """A key's runs that may hold a slot (statuses as constants: no expanding IN), oldest first."""
    statuses: list[Any] = [sa.literal_column(f"'{s}'") for s in _HOLDING]
    return (
        sa.select(RUNS)
        .where(RUNS.c.concurrency_key == sa.bindparam("q_key"), RUNS.c.status.in_(statuses))
        .order_by(RUNS.c.updated_at, RUNS.c.id)
    )


_IS_QUEUED = RUNS.c.status == sa.literal_column(f"'{RunStatus.QUEUED.value}'")


@functools.cache
def _queued() -> sa.Select[Any]:
    """The head of a key's queue (`ix_runs_concurrency`: key, status, queued_at)."""
    return (
        sa.select(RUNS)
        .where(RUNS.c.concurrency_key == sa.bindparam("q_key"), _IS_QUEUED)
        .order_by(RUNS.c.queued_at, RUNS.c.id)
        .limit(sa.bindparam("q_first"))
    )


@functools.cache
def _slots() -> sa.Select[Any]:
    """`SELECT waiting, runs.* FROM (count of the key's queued runs) LEFT JOIN its holders`."""
    statuses: list[Any] = [sa.literal_column(f"'{s}'") for s in _HOLDING]
    count = (
        sa.select(sa.func.count().label("waiting"))
        .where(RUNS.c.concurrency_key == sa.bindparam("q_key"), _IS_QUEUED)
        .subquery("q")
    )
    joined = count.outerjoin(
        RUNS, sa.and_(RUNS.c.concurrency_key == sa.bindparam("q_key"), RUNS.c.status.in_(statuses))
    )
    return sa.select(count.c.waiting, *RUNS.c).select_from(joined)


@functools.cache
def _queued_count() -> sa.Select[Any]:
    return sa.select(sa.func.count().label("n")).where(
        RUNS.c.concurrency_key == sa.bindparam("q_key"), _IS_QUEUED,
        RUNS.c.queued_at <= sa.bindparam("q_up_to", type_=sa.Float),
    )


@functools.cache
def _put() -> Any:
    values = {c: sa.bindparam(f"q_{c}", type_=RUNS.c[c].type) for c in _PUT}
    return sa.update(RUNS).where(RUNS.c.id == sa.bindparam("q_id")).values(values)


class Immediate:
    """How a keyed unit's statements are sent on a SQLAlchemy connection: each at once, its
    rows read back at once (SQLite; a unit in a batch's transaction)."""

    eager = True

    def __init__(self, conn: sa.Connection, dialect: str) -> None:
        self._conn = conn
        self._dialect = dialect

    def send(self, statement: Any, params: Mapping[str, Any], *, returns: bool = False) -> Read:
        cursor = self._conn.execute(statement, params)
        return Read([dict(row._mapping) for row in cursor] if returns else [])

    def rows(self, statement: Any, params: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        return self.send(statement, params, returns=True).rows()

    def lock(self, keys: Iterable[str], now: float) -> None:
        lock(self._conn, self._dialect, keys, now)


class Read:
    """A statement's rows, already read."""

    def __init__(self, rows: list[Mapping[str, Any]]) -> None:
        self._rows = rows

    def rows(self) -> list[Mapping[str, Any]]:
        return self._rows


class Sender(Protocol):
    """How a keyed unit sends its statements: `Immediate`, or `admission_pg.Pipe` (queued on
    the connection, rows read when asked)."""

    eager: bool

    def send(self, statement: Any, params: Mapping[str, Any], *, returns: bool = False) -> Rows: ...

    def rows(self, statement: Any, params: Mapping[str, Any]) -> list[Mapping[str, Any]]: ...

    def lock(self, keys: Iterable[str], now: float) -> None: ...


class Rows(Protocol):
    def rows(self) -> list[Mapping[str, Any]]: ...


class SqlLedger:
    """`admission.Ledger` over a keyed unit's `Sender`. `put_ids`: the runs it wrote over."""

    def __init__(self, sender: Sender, dialect: str, now: float) -> None:
        self._sender = sender
        self._dialect = dialect
        self._now = now
        self.put_ids: set[str] = set()

    def get(self, run_id: str) -> Run | None:
        rows = self._sender.rows(_by_id(), {"q_id": run_id})
        return run_from_row(rows[0]) if rows else None

    def row(self, run_id: str) -> Mapping[str, Any]:
        (row,) = self._sender.rows(_by_id(), {"q_id": run_id})
        return row

    def holders(self, key: str) -> list[Run]:
        return [run_from_row(row) for row in self._sender.rows(_holders(), {"q_key": key})]

    def queued(self, key: str, first: int) -> list[Run]:
        return [run_from_row(row) for row in self._sender.rows(_queued(), {"q_key": key, "q_first": first})]

    def queued_count(self, key: str, up_to: float | None = None) -> int:
        params = {"q_key": key, "q_up_to": float("inf") if up_to is None else up_to}
        return int(self._sender.rows(_queued_count(), params)[0]["n"])

    def slots(self, key: str) -> tuple[list[Run], int]:
        """One read: the queued count, left-joined with the holders (a row even when none)."""
        rows = self._sender.rows(_slots(), {"q_key": key})
        waiting = int(rows[0]["waiting"])
        holders = [run_from_row(row) for row in rows if row["id"] is not None]
        return sorted(holders, key=lambda r: (r.updated_at, r.id)), waiting

    def put(self, run: Run) -> None:
        values = {"q_id": run.id, "q_status": run.status.value, "q_version": run.version,
                  "q_status_by": run.status_by, "q_reason": run.reason, "q_updated_at": run.updated_at,
                  "q_lease_owner": run.lease_owner, "q_lease_expires_at": run.lease_expires_at,
                  "q_queued_at": run.queued_at}  # fmt: skip
        self._sender.send(_put(), values)
        self.put_ids.add(run.id)

    def write(self, write: w.Write) -> Rows:
        """Send one of the unit's writes (or admission's own); its rows when it returns any."""
        returns = w.kind_of(write.kind).returns
        return self._sender.send(w.statement(write.kind, self._dialect), w.bound(write), returns=returns)

    def close_gates(self, run_id: str, *, by: str, comment: str) -> None:
        self.write(w.close_gates(self._now, run_id, by=by, comment=comment))

    def audit(self, *, actor: str, action: str, run_id: str, details: dict[str, Any]) -> None:
        self.write(w.audit(self._now, actor=actor, action=action, run_id=run_id, details=details))

    def tell(self, run_id: str, payload: dict[str, Any]) -> None:
        self.write(w.enqueue_delivery(self._now, run_id, admission.RUN_FINISHED, payload))
