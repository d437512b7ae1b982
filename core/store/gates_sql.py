"""The `Gates` and `Events` roles of `SqlStore`: approval gates, the audit trail and
incoming-event dedupe.

A gate is decided by a unit of work (`tx.decide_gate`: a compare-and-swap `waiting ->
approved|rejected`, `writes_sql.py`), with whatever goes with the decision. `waiting_gate`
and `decided_gate` are the one rule of which gate of a run is meant: the one that has waited
longest, and the one decided last. `claim_event` is an INSERT … ON CONFLICT DO NOTHING on
(platform, event_id), so exactly one caller gets True, then, for a claim never finished
(`finish_event`) and older than `stale_after`, a CAS UPDATE that exactly one re-claimer wins.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import sqlalchemy as sa

from core.store.database import dialect_insert, store_operation
from core.store.records import AuditEvent, Gate, GateStatus, OpenEvent, Run
from core.store.rows import audit_from_row, gate_from_row, run_from_row
from core.store.sql_base import SqlDatabase
from core.store.tables import AUDIT, GATES, PROCESSED_EVENTS, RUNS
from core.store.writes_sql import read_gate

_GATE_COLUMNS = [c.label(f"g_{c.name}") for c in GATES.c]
_GATE_INSERT_COLUMNS = [
    "run_id", "node_id", "prompt", "status", "created_at", "platform", "conversation", "thread",
    "cache_key",
]  # fmt: skip


class GatesSql:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    # -- gates ------------------------------------------------------------------------------
    @store_operation("open an approval gate")
    def open_gate(self, run_id: str, node_id: str, prompt: str, cache_key: str = "",
                  decided_before: float | None = None) -> Gate:
        """Open the gate of `node_id` for the question `prompt` (the node's `cache_key`).

        An existing gate for the same key (or any existing gate when no key is given) is
        returned as it is, decided or not. An existing gate for another key answered a
        different question, and one decided before `decided_before` decided a result since
        invalidated: it is re-opened, waiting, with the new prompt and key and no
        decision. A new gate copies the run's platform, conversation and thread
        (one INSERT … SELECT)."""
        now = self._db.now()
        source = sa.select(
            RUNS.c.id,
            sa.literal(node_id),
            sa.literal(prompt),
            sa.literal(GateStatus.WAITING.value),
            sa.literal(now),
            RUNS.c.platform,
            RUNS.c.conversation,
            RUNS.c.thread,
            sa.literal(cache_key),
        ).where(RUNS.c.id == run_id)
        statement = self._db.insert_ignore(GATES, ["run_id", "node_id"]).from_select(
            _GATE_INSERT_COLUMNS, source
        )
        with self._db.engine.begin() as conn:
            conn.execute(statement)
            if cache_key:
                stale = GATES.c.cache_key != cache_key
                if decided_before is not None:
                    stale = sa.or_(stale, GATES.c.decided_at < decided_before)  # NULL (waiting): no
                conn.execute(
                    sa.update(GATES)
                    .where(GATES.c.run_id == run_id, GATES.c.node_id == node_id, stale)
                    .values(
                        prompt=prompt,
                        cache_key=cache_key,
                        status=GateStatus.WAITING.value,
                        created_at=now,
                        decided_by=None,
                        comment=None,
                        decided_at=None,
                        decision=None,
                        outcome=None,
                    )
                )
            return read_gate(conn, run_id, node_id)

    @store_operation("read an approval gate")
    def get_gate(self, run_id: str, node_id: str) -> Gate:
        with self._db.single.connect() as conn:
            return read_gate(conn, run_id, node_id)

    @store_operation("list waiting gates")
    def waiting_gates(
        self, *, platform: str, conversation: str, thread: str | None = None
    ) -> list[tuple[Run, Gate]]:
        params = {"p_platform": platform, "p_conversation": conversation, "p_thread": thread}
        with self._db.single.connect() as conn:
            rows = [row._mapping for row in conn.execute(_waiting(thread is not None), params)]
        return [(run_from_row(m), gate_from_row({c.name: m[f"g_{c.name}"] for c in GATES.c})) for m in rows]

    @store_operation("find the waiting gate of a run")
    def waiting_gate(self, run_id: str) -> Gate | None:
        with self._db.single.connect() as conn:
            row = conn.execute(_oldest_waiting(), {"p_run": run_id}).first()
        return None if row is None else gate_from_row(row)

    @store_operation("find the decided gate of a run")
    def decided_gate(self, run_id: str) -> Gate | None:
        with self._db.single.connect() as conn:
            row = conn.execute(_last_decided(), {"p_run": run_id}).first()
        return None if row is None else gate_from_row(row)

    @store_operation("list the gates waiting on a platform")
    def waiting_gates_on(self, platform: str, limit: int = 100) -> list[tuple[Run, Gate]]:
        """The newest `limit` gates waiting in any conversation of `platform`, with their runs."""
        query = (
            sa.select(RUNS, *(c.label(f"g_{c.name}") for c in GATES.c))
            .join_from(RUNS, GATES, GATES.c.run_id == RUNS.c.id)
            .where(GATES.c.platform == platform, GATES.c.status == GateStatus.WAITING.value)
            .order_by(GATES.c.created_at.desc())
            .limit(limit)
        )
        with self._db.single.connect() as conn:
            maps = [row._mapping for row in conn.execute(query)]
        return [(run_from_row(m), gate_from_row({c.name: m[f"g_{c.name}"] for c in GATES.c})) for m in maps]

    @store_operation("read a run's gates")
    def run_gates(self, run_id: str) -> list[Gate]:
        """Every approval gate of `run_id` (waiting or decided), oldest first, in one query."""
        query = sa.select(GATES).where(GATES.c.run_id == run_id).order_by(GATES.c.created_at, GATES.c.node_id)
        with self._db.single.connect() as conn:
            return [gate_from_row(row) for row in conn.execute(query)]



class EventsSql:
    """The `Events` role: the audit trail and incoming chat events' dedupe."""

    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    @store_operation("write the audit trail")
    def audit(
        self, *, actor: str, action: str, run_id: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        values = {
            "at": self._db.now(),
            "actor": actor,
            "action": action,
            "run_id": run_id,
            "details": details or {},
        }
        with self._db.single.begin() as conn:
            conn.execute(sa.insert(AUDIT), values)

    @store_operation("read the audit trail")
    def audit_log(self, run_id: str) -> list[AuditEvent]:
        query = sa.select(AUDIT).where(AUDIT.c.run_id == run_id).order_by(AUDIT.c.id)
        with self._db.single.connect() as conn:
            return [audit_from_row(row) for row in conn.execute(query)]

    @store_operation("read the audit trail")
    def audit_since(self, since: float) -> list[AuditEvent]:
        query = sa.select(AUDIT).where(AUDIT.c.at >= since).order_by(AUDIT.c.id)
        with self._db.single.connect() as conn:
            return [audit_from_row(row) for row in conn.execute(query)]

    @store_operation("record an incoming event")
    def claim_event(
        self,
        platform: str,
        event_id: str,
        *,
        stale_after: float = 60.0,
        payload: dict[str, Any] | None = None,
    ) -> bool:
        """True when this caller should handle the event: the first claim, or a re-claim of
        a claim left unfinished for more than `stale_after` seconds (its claimer died). Each
        path is one statement; of several concurrent re-claimers exactly one wins the CAS."""
        now = self._db.now()
        with self._db.single.begin() as conn:
            row = conn.execute(
                _claim_insert(self._db.dialect),
                {"platform": platform, "event_id": event_id, "at": now, "done": False, "payload": payload},
            ).first()
        if row is not None:
            return True
        reclaim = (
            sa.update(PROCESSED_EVENTS)
            .where(
                PROCESSED_EVENTS.c.platform == platform,
                PROCESSED_EVENTS.c.event_id == event_id,
                PROCESSED_EVENTS.c.done == sa.false(),
                PROCESSED_EVENTS.c.at < now - stale_after,
            )
            .values(at=now)
        )
        with self._db.single.begin() as conn:
            return int(conn.execute(reclaim).rowcount) == 1

    @store_operation("find events whose handling never finished")
    def open_events(self, before: float, limit: int = 100) -> list[OpenEvent]:
        query = (
            sa.select(PROCESSED_EVENTS)
            .where(
                PROCESSED_EVENTS.c.done == sa.false(),
                PROCESSED_EVENTS.c.at < before,
                PROCESSED_EVENTS.c.payload.is_not(None),
            )
            .order_by(PROCESSED_EVENTS.c.at)
            .limit(limit)
        )
        with self._db.single.connect() as conn:
            rows = conn.execute(query).all()
        return [OpenEvent(r.platform, r.event_id, r.at, _document(r.payload)) for r in rows]

    @store_operation("mark an incoming event handled")
    def finish_event(self, platform: str, event_id: str) -> None:
        with self._db.single.begin() as conn:
            conn.execute(_finish(), {"p_platform": platform, "p_event": event_id})

    @store_operation("forget old incoming events")
    def forget_events(self, before: float) -> int:
        """Drop processed-event ids older than `before` (platforms stop retrying after minutes)."""
        with self._db.engine.begin() as conn:
            return int(
                conn.execute(sa.delete(PROCESSED_EVENTS).where(PROCESSED_EVENTS.c.at < before)).rowcount
            )


def _document(value: Any) -> dict[str, Any]:
    document = json.loads(value) if isinstance(value, str) else value
    return dict(document) if isinstance(document, dict) else {}


@functools.cache
def _waiting(in_thread: bool) -> sa.Select[Any]:
    """The waiting gates of (p_platform, p_conversation[, p_thread]) with their runs, newest first."""
    query = (
        sa.select(RUNS, *_GATE_COLUMNS)
        .join_from(RUNS, GATES, GATES.c.run_id == RUNS.c.id)
        .where(
            GATES.c.platform == sa.bindparam("p_platform"),
            GATES.c.conversation == sa.bindparam("p_conversation"),
            GATES.c.status == GateStatus.WAITING.value,
        )
        .order_by(GATES.c.created_at.desc())
    )
    return query.where(GATES.c.thread == sa.bindparam("p_thread")) if in_thread else query


@functools.cache
def _claim_insert(dialect: str) -> Any:
    """INSERT … ON CONFLICT DO NOTHING RETURNING of a new claim, built once per dialect."""
    insert = dialect_insert(dialect)
    statement = insert(PROCESSED_EVENTS).on_conflict_do_nothing(index_elements=["platform", "event_id"])
    return statement.returning(PROCESSED_EVENTS.c.event_id)


@functools.cache
def _finish() -> sa.Update:
    """The event (p_platform, p_event) marked done."""
    return (
        sa.update(PROCESSED_EVENTS)
        .where(
            PROCESSED_EVENTS.c.platform == sa.bindparam("p_platform"),
            PROCESSED_EVENTS.c.event_id == sa.bindparam("p_event"),
        )
        .values(done=True)
    )


@functools.cache
def _oldest_waiting() -> sa.Select[Any]:
    """The gate of run p_run that has waited longest (`Gates.waiting_gate`)."""
    return (
        sa.select(GATES)
        .where(GATES.c.run_id == sa.bindparam("p_run"), GATES.c.status == GateStatus.WAITING.value)
        .order_by(GATES.c.created_at, GATES.c.node_id)
        .limit(1)
    )


@functools.cache
def _last_decided() -> sa.Select[Any]:
    """The gate of run p_run decided last (`Gates.decided_gate`)."""
    return (
        sa.select(GATES)
        .where(GATES.c.run_id == sa.bindparam("p_run"), GATES.c.status != GateStatus.WAITING.value)
        .order_by(GATES.c.decided_at.desc(), GATES.c.node_id)
        .limit(1)
    )
