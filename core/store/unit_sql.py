"""`SqlStore.transaction()`: a unit of work on SQLite and PostgreSQL.

The unit collects `writes_sql.Write`s while its block runs and sends them when it ends:

* SQLite (and a unit of one write anywhere): one transaction, the writes in order; a
  compare-and-swap write that matches nothing rolls it back.
* PostgreSQL: ONE statement in autocommit, one round trip and one commit, each write a
  data-modifying CTE:

      WITH w0 AS (UPDATE gates … RETURNING *), w1 AS (UPDATE runs … RETURNING *),
           w2 AS (INSERT INTO audit_events …)
      SELECT 1 / (SELECT count(*) FROM w0) AS g0, (SELECT json_agg(row_to_json(w0)) FROM w0) AS r0,
             1 / (SELECT count(*) FROM w1) AS g1, …

  The CTEs see one snapshot and all run to completion in the unit's order (the outer SELECT
  reads each in that order: rows a unit adds get their ids in the order it wrote them). A
  CAS write that matched nothing makes its guard divide by zero (SQLSTATE 22012), which
  aborts the statement and so every write of the unit with it. Rows come back as JSON, one
  column per write.

A batch (`SqlStore.batch()`, `unit_of_work.Batch`) sends many units in one transaction
(SQLite: `BEGIN IMMEDIATE`, its one write lock taken first), each unit in a savepoint of its
own, the same way (in order; keyed; on PostgreSQL its one statement): a unit whose CAS lost
rolls back to its savepoint alone; the batch commits once. Keep batches under 64 units:
PostgreSQL caches that many subtransactions per transaction before its snapshots of it get
slower for every session.

`SqlBatch.units` (a tick's fires) sends the units that only add rows and whose one CAS is a
schedule's fire (no concurrency key: `_GROUPED`) together, no savepoint:

    SELECT id FROM schedules WHERE id IN (…) ORDER BY id FOR UPDATE SKIP LOCKED   (`share`)
    INSERT INTO schedule_fires VALUES (…), (…) ON CONFLICT DO NOTHING RETURNING …  the claim
    INSERT INTO blobs …; INSERT INTO runs …; INSERT INTO audit_events …           the winners'

each INSERT one statement for all the units (executemany). The fire's key decides which
unit wins, as in a unit of its own: a unit whose fire a peer recorded first writes nothing
(`FireAlreadyRecorded`). With `share` (PostgreSQL), a fire whose schedule row another
replica's batch has locked is not tried (`FireBusy`): replicas ticking together split the
due schedules instead of each waiting for the other's commit to lose the same fires. On
SQLite the batch holds the one write lock, so no peer's batch holds anything (no `FireBusy`):
the same statements, without the SELECT, keep the lock a few statements long rather than
five statements and a savepoint per unit. The other units go one by one, in savepoints, as
`unit()`.

After a lost CAS the store asks each CAS write's `check`, in order, for the typed error
from the state as it is now; when none has one (the row changed back), the unit is sent
again (`_ATTEMPTS` times at most).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from core.errors import BatonError, FireBusy, StoreError
from core.store import admission, admission_sql, cas
from core.store import writes_sql as w
from core.store.database import describe
from core.store.records import (
    Fire,
    Gate,
    GateDeadline,
    GateVote,
    NewRun,
    Run,
    Transition,
)
from core.store.tables import GATES, JOURNAL, RUNS, SCHEDULE_FIRES, SCHEDULES
from core.store.unit_of_work import Pending, T, UnitOfWork

if TYPE_CHECKING:
    from core.store.sql_base import SqlDatabase

_ATTEMPTS = 3
_DIVISION_BY_ZERO = "22012"
#: what a unit may hold to travel with the others of its batch (`SqlBatch.units`): its fires
#: (claimed first, for all the units at once) and rows added in this order, one statement each
_GROUPED = ("put_blob", "create_run", "audit")
_FLOATS = frozenset(c.name for t in (RUNS, GATES, JOURNAL) for c in t.c if isinstance(c.type, sa.Float))


class SqlUnitOfWork:
    """The writes of one `with store.transaction() as tx:` block (`UnitOfWork`)."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self.writes: list[w.Write] = []
        self._created: dict[str, Pending[Run]] = {}

    def _pending(self, write: w.Write) -> Pending[Any]:
        pending: Pending[Any] = Pending()
        write.into = pending
        self.writes.append(write)
        return pending

    def put_blob(self, data: bytes) -> str:
        write, digest = w.put_blob(data)
        self.writes.append(write)
        return digest

    def create_run(self, new: NewRun) -> Run:
        run, origin = cas.new_run(self._now(), new)
        self._created[run.id] = self._pending(w.create_run(run, origin))
        return run

    def created(self, run_id: str) -> Pending[Run]:
        return self._created[run_id]

    def transition(self, change: Transition) -> Pending[Run]:
        return self._pending(w.transition(self._now(), change))

    def decide_gate(
        self, run_id: str, node_id: str, *, approved: bool, by: str, comment: str | None,
        decision: str | None = None, outcome: Mapping[str, Any] | None = None,
    ) -> Pending[Gate]:
        return self._pending(w.decide_gate(
            self._now(), run_id, node_id, approved=approved, by=by, comment=comment,
            decision=decision, outcome=outcome,
        ))  # fmt: skip

    def close_gates(self, run_id: str, *, by: str, comment: str | None) -> Pending[list[Gate]]:
        return self._pending(w.close_gates(self._now(), run_id, by=by, comment=comment))

    def audit(
        self, *, actor: str, action: str, run_id: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        self.writes.append(w.audit(self._now(), actor=actor, action=action, run_id=run_id, details=details))

    def finish_event(self, platform: str, event_id: str) -> None:
        self.writes.append(w.finish_event(platform, event_id))

    def journal_note(
        self, *, run_id: str, node_id: str, cache_key: str, components: dict[str, Any], error: str
    ) -> None:
        note = w.journal_note(
            self._now(),
            run_id=run_id,
            node_id=node_id,
            cache_key=cache_key,
            components=components,
            error=error,
        )
        self.writes.append(note)

    def enqueue_delivery(self, run_id: str, kind: str, payload: Mapping[str, Any]) -> None:
        self.writes.append(w.enqueue_delivery(self._now(), run_id, kind, payload))

    def enqueue_notice(
        self, run_id: str, kind: str, *, platform: str, conversation: str, payload: Mapping[str, Any],
        dedupe: str, due_at: float | None = None,
    ) -> None:
        self.writes.append(w.enqueue_notice(self._now(), run_id, kind, platform=platform,
                                            conversation=conversation, payload=payload, dedupe=dedupe,
                                            due_at=due_at))  # fmt: skip

    def fire_deadline(self, deadline: GateDeadline, by: str) -> Pending[bool]:
        return self._pending(w.fire_deadline(self._now(), deadline, by))

    def record_fire(self, fire: Fire) -> Pending[bool]:
        return self._pending(w.record_fire(fire))

    def cast_vote(self, vote: GateVote, *, seen: int) -> Pending[bool]:
        if not any(write.kind == "lock_run" for write in self.writes):
            self.writes.insert(0, w.lock_run(vote.run_id))  # first: the unit's reads see the others'
        return self._pending(w.cast_vote(vote, seen))

    def invalidate(self, run_id: str, node_ids: Iterable[str], *, actor: str) -> Pending[int]:
        write = w.invalidate(run_id, node_ids, actor=actor)
        if write is not None:
            return self._pending(write)
        none: Pending[int] = Pending()
        none.set(0)
        return none


class _Lost(Exception):
    """A CAS write of the unit matched nothing (which ones may have: `writes`)."""

    def __init__(self, writes: Sequence[w.Write]) -> None:
        super().__init__()
        self.writes = writes


class SqlBatch:
    """Units of work in one transaction (`SqlUnits.batch`), each in a savepoint of its own."""

    def __init__(self, units: SqlUnits, conn: sa.Connection) -> None:
        self._store, self._conn = units, conn

    @contextlib.contextmanager
    def unit(self) -> Iterator[SqlUnitOfWork]:
        unit = SqlUnitOfWork(self._store.db.now)
        yield unit
        self._store.apply(unit.writes, self._conn)

    def units(
        self, builds: Sequence[Callable[[UnitOfWork], T]], *, share: bool = False
    ) -> list[T | BatonError]:
        """`Batch.units` (module docstring): the units that only add rows go together; the
        others one by one."""
        out: list[T | BatonError | None] = [None] * len(builds)
        built: dict[int, tuple[SqlUnitOfWork, T]] = {}
        for i, build in enumerate(builds):
            unit = SqlUnitOfWork(self._store.db.now)
            try:
                built[i] = (unit, build(unit))
            except StoreError:
                raise
            except BatonError as exc:
                out[i] = exc
        together = [i for i, (unit, _) in built.items() if self._store.groupable(unit.writes)]
        try:
            errors = self._store.grouped([built[i][0].writes for i in together], self._conn, share=share)
        except SQLAlchemyError as exc:
            raise StoreError(f"The run store could not start the runs of a batch ({describe(exc)}).") from exc
        for i, error in zip(together, errors, strict=True):
            out[i] = built[i][1] if error is None else error
        for i, (unit, value) in built.items():
            if i in together:
                continue
            try:
                self._store.apply(unit.writes, self._conn)
                out[i] = value
            except StoreError:
                raise
            except BatonError as exc:
                out[i] = exc
        return [r for r in out if r is not None]


class SqlUnits:
    """How a unit's writes are sent (module docstring), on the database `db`
    (`SqlDatabase.transaction`, `.batch` and `.apply_one` use it)."""

    def __init__(self, db: SqlDatabase) -> None:
        self.db = db

    @contextlib.contextmanager
    def batch(self) -> Iterator[SqlBatch]:
        """Units of work committed together (module docstring)."""
        try:
            with self.db.engine.begin() as conn:
                if self.db.dialect == "sqlite":  # the one write lock first, as a keyed unit takes it
                    conn.exec_driver_sql("BEGIN IMMEDIATE")
                yield SqlBatch(self, conn)
        except SQLAlchemyError as exc:
            raise StoreError(f"The run store could not commit a batch of changes ({describe(exc)}).") from exc

    def apply(self, writes: Sequence[w.Write], conn: sa.Connection | None = None) -> None:
        """Send `writes` as one change (with `conn`: in a savepoint of that batch's
        transaction); their results land in their `Pending`s."""
        if not writes:
            return
        operation = ", ".join(dict.fromkeys(write.operation for write in writes))
        try:
            for _ in range(_ATTEMPTS):
                try:
                    keys = admission_sql.keys_of(self.db.single, writes)
                    serial = any(w.kind_of(write.kind).serial for write in writes)
                    if keys:
                        self._keyed(writes, keys, conn)
                    elif self.db.dialect == "postgresql" and len(writes) > 1 and _one_insert(writes):
                        self._many(writes, conn)
                    elif self.db.dialect == "postgresql" and len(writes) > 1 and not serial:
                        self._together(writes, conn)
                    else:
                        self._in_order(writes, conn)
                    return
                except _Lost as lost:
                    error = self._explain(lost.writes, conn)
                    if error is not None:
                        raise error from None
        except SQLAlchemyError as exc:
            raise StoreError(f"The run store could not {operation} ({describe(exc)}).") from exc
        raise StoreError(f"The run store could not {operation} (the rows kept changing meanwhile).")

    @contextlib.contextmanager
    def _begun(self, conn: sa.Connection | None, engine: sa.Engine) -> Iterator[sa.Connection]:
        """A transaction of its own on `engine`, or a savepoint in the batch's `conn`."""
        if conn is None:
            with engine.begin() as own:
                yield own
            return
        # not RELEASEd: the batch's commit releases them all (a round trip less per unit on
        # PostgreSQL); ROLLBACK TO goes back to the newest savepoint of the name, this unit's
        conn.exec_driver_sql("SAVEPOINT baton_unit")
        try:
            yield conn
        except BaseException:
            conn.exec_driver_sql("ROLLBACK TO SAVEPOINT baton_unit")
            raise

    def groupable(self, writes: Sequence[w.Write]) -> bool:
        """A unit `SqlBatch.units` may send with others: its rows added (`_GROUPED`), its one
        CAS a fire, no concurrency key."""
        return (
            all(write.kind in _GROUPED or write.kind == "record_fire" for write in writes)
            and sum(write.kind == "record_fire" for write in writes) <= 1
            and not admission_sql.keys_of(self.db.single, writes)
        )

    def grouped(
        self, units: Sequence[Sequence[w.Write]], conn: sa.Connection, *, share: bool
    ) -> list[BatonError | None]:
        """Send `_groupable` units together in the batch's transaction `conn` (module
        docstring); per unit, None when it was written, else the error that undid it."""
        errors: list[BatonError | None] = [None] * len(units)
        fires = sorted(
            ((i, write) for i, writes in enumerate(units) for write in writes if write.kind == "record_fire"),
            key=lambda f: (f[1].params["schedule_id"], f[1].params["due_at"]),
        )  # in key order: two batches wait for each other's fire rows in one order, never crosswise
        if share and fires and self.db.dialect == "postgresql":  # SQLite: the batch holds the lock
            ids = sorted({write.params["schedule_id"] for _, write in fires})
            held = set(conn.execute(
                sa.select(SCHEDULES.c.id).where(SCHEDULES.c.id.in_(ids)).order_by(SCHEDULES.c.id)
                .with_for_update(skip_locked=True)
            ).scalars())  # fmt: skip
            for i, write in fires:
                sid = write.params["schedule_id"]
                if sid not in held:
                    errors[i] = FireBusy(f"Schedule {sid} is being fired by another replica right now.",
                                         schedule_id=sid)  # fmt: skip
        claims: dict[tuple[str, float], int] = {}
        for i, write in fires:
            key = (write.params["schedule_id"], write.params["due_at"])
            if errors[i] is None and key in claims:  # the same fire twice in one batch: the first
                errors[i] = w.fire_recorded(key[0], key[1], "started", "this batch")
            elif errors[i] is None:
                claims[key] = i
        if claims:
            won = self._claim(conn, [units[i] for i in claims.values()])
            lost = {key: i for key, i in claims.items() if key not in won}
            if lost:
                c = SCHEDULE_FIRES.c
                found = {(sid, due): (outcome, by) for sid, due, outcome, by in conn.execute(
                    sa.select(c.schedule_id, c.due_at, c.outcome, c.by)
                    .where(c.schedule_id.in_(sorted({sid for sid, _ in lost})))
                )}  # fmt: skip
                for key, i in lost.items():
                    errors[i] = w.fire_recorded(key[0], key[1], *found.get(key, ("fired", "another replica")))
        winners = [writes for writes, error in zip(units, errors, strict=True) if error is None]
        for kind in _GROUPED:
            rows = [w.bound(write) for writes in winners for write in writes if write.kind == kind]
            if kind == "put_blob":  # each once, in digest order: batches lock shared ones in one order
                rows = sorted({r["b_digest"]: r for r in rows}.values(), key=lambda r: str(r["b_digest"]))
            if rows:
                conn.execute(w.statement(kind, self.db.dialect), rows)
        for writes in winners:
            _deliver(writes, [[write.params] if write.kind == "record_fire" else [] for write in writes])
        return errors

    def _claim(self, conn: sa.Connection, units: Sequence[Sequence[w.Write]]) -> set[tuple[str, float]]:
        """The units' fires inserted in one statement, in key order; those that were new."""
        rows = [w.bound(write) for writes in units for write in writes if write.kind == "record_fire"]
        returned = conn.execute(w.statement("record_fire", self.db.dialect), rows)
        return {(row.schedule_id, float(row.due_at)) for row in returned}

    def apply_one(self, write: w.Write) -> Any:
        """A single call: a unit of this one write; its result."""
        pending: Pending[Any] = Pending()
        write.into = pending
        self.apply([write])
        return pending.value

    def _in_order(self, writes: Sequence[w.Write], batch: sa.Connection | None = None) -> None:
        results: list[w.Rows] = []
        with self._begun(batch, self.db.single if len(writes) == 1 else self.db.engine) as conn:
            for write in writes:
                kind = w.kind_of(write.kind)
                cursor = conn.execute(w.statement(write.kind, self.db.dialect), w.bound(write))
                rows: w.Rows = [row._mapping for row in cursor] if kind.returns else []
                if kind.cas and not rows:
                    raise _Lost([write])  # leaving the block rolls the unit back
                results.append(rows)
        _deliver(writes, results)

    def _keyed(self, writes: Sequence[w.Write], keys: set[str], batch: sa.Connection | None = None) -> None:
        """A unit touching runs with a concurrency key: one transaction that locks the keys
        first, asks a slot for each run it makes `running` from a status holding none (such a
        run is written `queued`), then admits the keys' oldest queued runs (`admission.py`).
        On PostgreSQL (a unit of its own) its statements are pipelined (`admission_pg.py`)."""
        if batch is None and self.db.dialect == "postgresql":
            from core.store import admission_pg  # PostgreSQL's dialect: never imported on SQLite

            with admission_pg.pipelined(self.db.engine) as pipe:
                results = self._admit(writes, keys, pipe)
        else:
            with self._begun(batch, self.db.engine) as conn:
                sender = admission_sql.Immediate(conn, self.db.dialect)
                results = self._admit(writes, keys, sender, lock=batch is None or self.db.dialect != "sqlite")
        _deliver(writes, results)

    def _admit(
        self, writes: Sequence[w.Write], keys: set[str], sender: admission_sql.Sender, *, lock: bool = True
    ) -> list[w.Rows]:
        """`_keyed`'s statements through `sender`; each write's rows (before the commit)."""
        if lock:  # a batch on SQLite holds the one write lock already
            sender.lock(keys, self.db.now())
        now = self.db.now()  # after the lock: the queue's order is the order units got the key
        ledger = admission_sql.SqlLedger(sender, self.db.dialect, now)
        own: dict[str, tuple[str | None, float | None]] = {}
        settle: set[str] = set()
        sent: list[admission_sql.Rows] = []
        for write in writes:
            try:
                asked = admission_sql.asking(write, ledger, now, own, settle)
            except BatonError:
                _check_cas(writes, sent)  # a CAS that lost before it explains the unit first
                raise
            rows = ledger.write(asked)
            sent.append(admission_sql.Read([asked.params]) if asked.kind == "create_run" else rows)
            if sender.eager:
                _check_cas(writes, sent)
        for key in sorted(settle):
            admission.settle(ledger, key, now, own=own, asked=own.keys())
        _check_cas(writes, sent)
        results: list[w.Rows] = [s.rows() for s in sent]
        for i, write in enumerate(writes):  # a run's row as the unit left it (admission wrote over it)
            changed = write.kind.startswith("transition") or write.kind == "create_run"
            if changed and results[i] and write.params["id"] in ledger.put_ids:
                results[i] = [ledger.row(write.params["id"])]
        return results

    def _many(self, writes: Sequence[w.Write], batch: sa.Connection | None = None) -> None:
        """Writes of one kind that only add rows (a batch's args blobs): one statement for all
        of them (executemany), rather than a CTE each to compile and send."""
        with self._begun(batch, self.db.single) as conn:
            conn.execute(w.statement(writes[0].kind, self.db.dialect), [w.bound(write) for write in writes])
        _deliver(writes, [[] for _ in writes])

    def _together(self, writes: Sequence[w.Write], batch: sa.Connection | None = None) -> None:
        kinds = tuple(write.kind for write in writes)
        params = {k: v for i, write in enumerate(writes) for k, v in w.bound(write, f"w{i}_").items()}
        try:
            with self._begun(batch, self.db.single) as conn:
                row = conn.execute(_composed(kinds), params).one()._mapping
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) == _DIVISION_BY_ZERO:
                raise _Lost([write for write in writes if w.kind_of(write.kind).cas]) from exc
            raise
        _deliver(writes, [[_typed(r) for r in row.get(f"r{i}") or []] for i in range(len(writes))])

    def _explain(self, writes: Sequence[w.Write], batch: sa.Connection | None = None) -> BatonError | None:
        """The error of the first write that lost, from the state now (None: none did now);
        in a batch, as its transaction sees it."""
        with contextlib.nullcontext(batch) if batch is not None else self.db.single.connect() as conn:
            for write in writes:
                if write.check is None:
                    continue
                try:
                    error = write.check(conn)
                except BatonError as exc:  # the row is gone (RunNotFound)
                    error = exc
                if error is not None:
                    return error
        return None


def _check_cas(writes: Sequence[w.Write], sent: Sequence[admission_sql.Rows]) -> None:
    """`_Lost` when a CAS write among those sent matched nothing (its rows read: a flush, in
    a pipeline, unless a later read brought them back)."""
    for write, rows in zip(writes, sent, strict=False):
        if w.kind_of(write.kind).cas and not rows.rows():
            raise _Lost([write])


def _one_insert(writes: Sequence[w.Write]) -> bool:
    """All of one kind that adds rows and returns none (`SqlUnits._many`)."""
    kind = writes[0].kind
    known = w.kind_of(kind)
    same = all(write.kind == kind for write in writes)
    return same and kind in _GROUPED and not (known.cas or known.returns)


def _deliver(writes: Sequence[w.Write], results: Sequence[w.Rows]) -> None:
    for write, rows in zip(writes, results, strict=True):
        if write.into is not None and write.result is not None:
            write.into.set(write.result(rows))


def _typed(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row read back as JSON, with its float columns as floats (JSON writes 2.0 as 2)."""
    return {k: float(v) if k in _FLOATS and v is not None else v for k, v in row.items()}


@functools.cache
def _composed(kinds: tuple[str, ...]) -> sa.Select[Any]:
    """The PostgreSQL statement of a unit of these kinds of writes (module docstring). The
    outer SELECT reads every write that changes existing rows, in the unit's order:
    PostgreSQL runs a data-modifying CTE when it is first read, so those writes take their
    row locks in that order (two units that change the same rows queue behind each other
    instead of deadlocking). Writes that only add rows are read too: unread, they would run
    when the statement ends, in reverse order (a unit's two outbox rows, a timeout's line and
    the run's final reply, would be delivered the wrong way round)."""
    columns: list[Any] = []
    ctes = []
    for i, kind in enumerate(kinds):
        statement = w.statement(kind, "postgresql", f"w{i}_")
        known = w.kind_of(kind)
        if not known.returns:
            statement = statement.returning(sa.literal_column("1"))
        cte = statement.cte(f"w{i}")
        ctes.append(cte)
        count = sa.select(sa.func.count()).select_from(cte).scalar_subquery()
        if known.cas:
            columns.append((sa.literal_column("1") / count).label(f"g{i}"))
        elif not known.returns:
            columns.append(count.label(f"n{i}"))
        if known.returns:
            rows = sa.select(sa.func.json_agg(sa.func.row_to_json(cte.table_valued()))).select_from(cte)
            columns.append(rows.scalar_subquery().label(f"r{i}"))
    return sa.select(*(columns or [sa.literal_column("1")])).add_cte(*ctes)
