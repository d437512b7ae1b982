"""Approval gates, the audit trail and incoming-event dedupe: methods of `SqlStore`.

`decide_gate` is a compare-and-swap `waiting -> approved|rejected`; `claim_event` is an
INSERT … ON CONFLICT DO NOTHING on (platform, event_id), so exactly one caller gets True,
then, for a claim never finished (`finish_event`) and older than `stale_after`, a CAS
UPDATE that exactly one re-claimer wins.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from core.errors import GateAlreadyDecided, RunNotFound
from core.store import cas
from core.store.database import store_operation
from core.store.records import AuditEvent, Gate, GateStatus, Run, RunStatus
from core.store.rows import audit_from_row, gate_from_row, run_from_row
from core.store.sql_base import SqlBase
from core.store.tables import AUDIT, BLOBS, GATES, PROCESSED_EVENTS, RUNS

_GATE_COLUMNS = [c.label(f"g_{c.name}") for c in GATES.c]
_GATE_INSERT_COLUMNS = [
    "run_id", "node_id", "prompt", "status", "created_at", "platform", "conversation", "thread",
    "cache_key",
]  # fmt: skip


class GatesSql(SqlBase):
    # -- gates ------------------------------------------------------------------------------
    @store_operation("open an approval gate")
    def open_gate(self, run_id: str, node_id: str, prompt: str, cache_key: str = "") -> Gate:
        """Open the gate of `node_id` for the question `prompt` (the node's `cache_key`).

        An existing gate for the same key (or any existing gate when no key is given) is
        returned as it is, decided or not. An existing gate for another key answered a
        different question: it is re-opened, waiting, with the new prompt and key and no
        decision. A new gate copies the run's platform, conversation and thread
        (one INSERT … SELECT)."""
        now = self._now()
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
        statement = self._insert_ignore(GATES, ["run_id", "node_id"]).from_select(
            _GATE_INSERT_COLUMNS, source
        )
        with self._engine.begin() as conn:
            conn.execute(statement)
            if cache_key:
                conn.execute(
                    sa.update(GATES)
                    .where(
                        GATES.c.run_id == run_id,
                        GATES.c.node_id == node_id,
                        GATES.c.cache_key != cache_key,
                    )
                    .values(
                        prompt=prompt,
                        cache_key=cache_key,
                        status=GateStatus.WAITING.value,
                        created_at=now,
                        decided_by=None,
                        comment=None,
                        decided_at=None,
                    )
                )
            return self._read_gate(conn, run_id, node_id)

    def _read_gate(self, conn: sa.Connection, run_id: str, node_id: str) -> Gate:
        row = conn.execute(
            sa.select(GATES).where(GATES.c.run_id == run_id, GATES.c.node_id == node_id)
        ).first()
        if row is None:
            raise RunNotFound(f"Run {run_id} has no approval gate {node_id}.", run_id=run_id)
        return gate_from_row(row)

    @store_operation("read an approval gate")
    def get_gate(self, run_id: str, node_id: str) -> Gate:
        with self._single.connect() as conn:
            return self._read_gate(conn, run_id, node_id)

    @store_operation("list waiting gates")
    def waiting_gates(
        self, *, platform: str, conversation: str, thread: str | None = None
    ) -> list[tuple[Run, Gate]]:
        params = {"p_platform": platform, "p_conversation": conversation, "p_thread": thread}
        with self._single.connect() as conn:
            rows = [row._mapping for row in conn.execute(_waiting(thread is not None), params)]
        return [(run_from_row(m), gate_from_row({c.name: m[f"g_{c.name}"] for c in GATES.c})) for m in rows]

    @store_operation("read an approval")
    def waiting_gates_and_args(self, run: Run) -> tuple[list[Gate], bytes]:
        """One query: the args blob, outer-joined with the run's waiting gates (by the gates'
        primary key), so an approval reads both in one round trip."""
        with self._single.connect() as conn:
            rows = conn.execute(_gates_and_args(), {"p_digest": run.args_digest, "p_run": run.id}).all()
        if not rows:
            raise KeyError(run.args_digest)
        maps = [row._mapping for row in rows]
        gates = [gate_from_row({c.name: m[f"g_{c.name}"] for c in GATES.c}) for m in maps if m["g_run_id"]]
        return gates, bytes(maps[0]["b_data"])

    @store_operation("decide an approval gate")
    def decide_gate(self, run_id: str, node_id: str, *, approved: bool, by: str, comment: str | None) -> Gate:
        decision = GateStatus.APPROVED if approved else GateStatus.REJECTED
        statement = (
            sa.update(GATES)
            .where(
                GATES.c.run_id == run_id,
                GATES.c.node_id == node_id,
                GATES.c.status == GateStatus.WAITING.value,
            )
            .values(status=decision.value, decided_by=by, comment=comment, decided_at=self._now())
            .returning(*GATES.c)
        )
        with self._single.begin() as conn:
            row = conn.execute(statement).first()
            if row is not None:
                return gate_from_row(row)
            raise _already_decided(self._read_gate(conn, run_id, node_id))

    @store_operation("approve a gate")
    def approve_gate(
        self, run: Run, node_id: str, *, by: str, comment: str | None, lease_owner: str, lease_seconds: float
    ) -> tuple[Gate, Run]:
        """The gate CAS (waiting -> approved), the run CAS (paused at `run.version` ->
        running, with the lease) only if the gate's matched, and the `approve` audit row only
        if the run's matched: on PostgreSQL one statement whose data-modifying CTEs depend
        on each other in that order; on SQLite one transaction. When the gate's CAS matched
        but the run's did not (the run moved meanwhile), the gate is put back to waiting
        (on PostgreSQL by a second CAS on this very decision) and the run's CAS error raised.
        The statements are built once (`_approval`), with bound values, so SQLAlchemy's
        compiled cache serves every call."""
        now = self._now()
        a = _approval()
        params = {
            "p_run": run.id, "p_node": node_id, "p_by": by, "p_comment": comment, "p_now": now,
            "p_owner": lease_owner, "p_expires": now + lease_seconds, "p_version": run.version,
            "p_details": {"node": node_id, "comment": comment},
        }  # fmt: skip
        if self.dialect != "postgresql":
            with self._engine.begin() as conn:
                gate_row = conn.execute(a.gate_cas, params).first()
                if gate_row is None:
                    raise _already_decided(self._read_gate(conn, run.id, node_id))
                run_row = conn.execute(a.run_cas, params).first()
                if run_row is None:  # leaving the block rolls the gate's decision back
                    raise _lost_approval(self._read_run(conn, run.id), run.version)
                conn.execute(a.audit, params)
            return gate_from_row(gate_row), run_from_row(run_row)
        with self._single.connect() as conn:
            row = conn.execute(a.together, params).first()
            if row is None:
                raise _already_decided(self._read_gate(conn, run.id, node_id))
            m = row._mapping
            gate = gate_from_row({c.name: m[f"g_{c.name}"] for c in GATES.c})
            if m["id"] is not None:
                return gate, run_from_row(m)
            conn.execute(a.undo, params)
            raise _lost_approval(self._read_run(conn, run.id), run.version)

    # -- audit and dedupe ---------------------------------------------------------------------
    @store_operation("write the audit trail")
    def audit(
        self, *, actor: str, action: str, run_id: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        values = {
            "at": self._now(),
            "actor": actor,
            "action": action,
            "run_id": run_id,
            "details": details or {},
        }
        with self._single.begin() as conn:
            conn.execute(sa.insert(AUDIT), values)

    @store_operation("read the audit trail")
    def audit_log(self, run_id: str) -> list[AuditEvent]:
        query = sa.select(AUDIT).where(AUDIT.c.run_id == run_id).order_by(AUDIT.c.id)
        with self._single.connect() as conn:
            return [audit_from_row(row) for row in conn.execute(query)]

    @store_operation("record an incoming event")
    def claim_event(self, platform: str, event_id: str, *, stale_after: float = 60.0) -> bool:
        """True when this caller should handle the event: the first claim, or a re-claim of
        a claim left unfinished for more than `stale_after` seconds (its claimer died). Each
        path is one statement; of several concurrent re-claimers exactly one wins the CAS."""
        now = self._now()
        with self._single.begin() as conn:
            row = conn.execute(
                _claim_insert(self.dialect),
                {"platform": platform, "event_id": event_id, "at": now, "done": False},
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
        with self._single.begin() as conn:
            return int(conn.execute(reclaim).rowcount) == 1

    @store_operation("mark an incoming event handled")
    def finish_event(self, platform: str, event_id: str) -> None:
        with self._single.begin() as conn:
            conn.execute(_finish(), {"p_platform": platform, "p_event": event_id})

    @store_operation("mark an incoming event handled")
    def finish_event_audited(
        self,
        platform: str,
        event_id: str,
        *,
        actor: str,
        action: str,
        run_id: str | None,
        details: dict[str, Any],
    ) -> None:
        """The audit row and the event marked done: on PostgreSQL one UPDATE with the INSERT
        as a data-modifying CTE (one round trip, one commit); on SQLite one transaction."""
        params = {
            "a_at": self._now(), "a_actor": actor, "a_action": action, "a_run_id": run_id,
            "a_details": details, "p_platform": platform, "p_event": event_id,
        }  # fmt: skip
        if self.dialect == "postgresql":
            with self._single.begin() as conn:
                conn.execute(_finish_audited(), params)
            return
        with self._engine.begin() as conn:
            conn.execute(_audit_entry(), params)
            conn.execute(_finish(), params)

    @store_operation("forget old incoming events")
    def forget_events(self, before: float) -> int:
        """Drop processed-event ids older than `before` (platforms stop retrying after minutes)."""
        with self._engine.begin() as conn:
            return int(
                conn.execute(sa.delete(PROCESSED_EVENTS).where(PROCESSED_EVENTS.c.at < before)).rowcount
            )


_APPROVE_FROM = cas.allowed_sources(RunStatus.RUNNING, [RunStatus.PAUSED])


def _lost_approval(run: Run, version: int) -> Exception:
    return cas.lost_race(run, RunStatus.RUNNING, _APPROVE_FROM, version)


@dataclass(frozen=True)
class _Approval:
    gate_cas: Any  # UPDATE gates … RETURNING (SQLite)
    run_cas: Any  # UPDATE runs … RETURNING (SQLite)
    audit: Any  # INSERT INTO audit_events (SQLite)
    together: Any  # the three as dependent CTEs of one SELECT (PostgreSQL)
    undo: Any  # the gate back to waiting, a CAS on this very decision (PostgreSQL)


@functools.cache
def _approval() -> _Approval:
    """`approve_gate`'s statements, built once with bound parameters (p_run, p_node, p_by,
    p_comment, p_now, p_owner, p_expires, p_version, p_details): building the CTEs and
    their column proxies costs more client CPU than the server spends on them, and a
    statement object reused keeps its cache key, so the compiled SQL comes from the cache."""
    p = sa.bindparam
    now = p("p_now", type_=sa.Float)
    by = p("p_by", type_=sa.String)
    gate_cas = (
        sa.update(GATES)
        .where(
            GATES.c.run_id == p("p_run"),
            GATES.c.node_id == p("p_node"),
            GATES.c.status == GateStatus.WAITING.value,
        )
        .values(status=GateStatus.APPROVED.value, decided_by=by, comment=p("p_comment"), decided_at=now)
        .returning(*GATES.c)
    )
    run_cas = sa.update(RUNS).values(
        status=RunStatus.RUNNING.value, version=RUNS.c.version + 1, status_by=by, reason=None,
        updated_at=now, lease_owner=p("p_owner"), lease_expires_at=p("p_expires"),
    )  # fmt: skip
    run_matches = [
        RUNS.c.id == p("p_run"),
        RUNS.c.status.in_(sorted(s.value for s in _APPROVE_FROM)),
        RUNS.c.version == p("p_version"),
    ]
    details = p("p_details", type_=AUDIT.c.details.type)
    audit = sa.insert(AUDIT).values(
        at=now, actor=by, action="approve", run_id=p("p_run", type_=sa.String), details=details
    )
    gate_cte = gate_cas.cte("decided_gate")
    run_cte = (
        run_cas.where(*run_matches, sa.exists(sa.select(gate_cte.c.run_id)))
        .returning(*RUNS.c)
        .cte("resumed_run")
    )
    audit_cte = (
        sa.insert(AUDIT)
        .from_select(
            ["at", "actor", "action", "run_id", "details"],
            sa.select(now, by, sa.literal("approve"), run_cte.c.id, details),
        )
        .cte("approve_audit")
    )
    together = (
        sa.select(*[gate_cte.c[c.name].label(f"g_{c.name}") for c in GATES.c], *run_cte.c)
        .select_from(gate_cte.outerjoin(run_cte, sa.true()))
        .add_cte(audit_cte)
    )
    undo = (
        sa.update(GATES)
        .where(
            GATES.c.run_id == p("p_run"),
            GATES.c.node_id == p("p_node"),
            GATES.c.status == GateStatus.APPROVED.value,
            GATES.c.decided_by == by,
            GATES.c.comment.is_not_distinct_from(p("p_comment", type_=sa.Text)),
            GATES.c.decided_at == now,
        )
        .values(status=GateStatus.WAITING.value, decided_by=None, comment=None, decided_at=None)
    )
    return _Approval(gate_cas, run_cas.where(*run_matches).returning(*RUNS.c), audit, together, undo)


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
def _gates_and_args() -> sa.Select[Any]:
    """The blob p_digest's data (b_data) with the waiting gates of run p_run, newest first."""
    waiting = sa.and_(GATES.c.run_id == sa.bindparam("p_run"), GATES.c.status == GateStatus.WAITING.value)
    return (
        sa.select(BLOBS.c.data.label("b_data"), *_GATE_COLUMNS)
        .select_from(BLOBS.outerjoin(GATES, waiting))
        .where(BLOBS.c.digest == sa.bindparam("p_digest"))
        .order_by(GATES.c.created_at.desc())
    )


@functools.cache
def _claim_insert(dialect: str) -> Any:
    """INSERT … ON CONFLICT DO NOTHING RETURNING of a new claim, built once per dialect."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
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
def _audit_entry() -> sa.Insert:
    """An audit row of a_at, a_actor, a_action, a_run_id, a_details."""
    columns = ("at", "actor", "action", "run_id", "details")
    return sa.insert(AUDIT).values({c: sa.bindparam(f"a_{c}", type_=AUDIT.c[c].type) for c in columns})


@functools.cache
def _finish_audited() -> sa.Update:
    """`_finish` with `_audit_entry` as a data-modifying CTE: one round trip and one commit
    on PostgreSQL; built once, so the compiled SQL comes from SQLAlchemy's cache."""
    return _finish().add_cte(_audit_entry().cte("command_audit"))


def _already_decided(gate: Gate) -> GateAlreadyDecided:
    return GateAlreadyDecided(
        f"the approval {gate.node_id} of run {gate.run_id} was already {gate.status.value}"
        f" by {gate.decided_by}",
        run_id=gate.run_id,
        status=gate.status.value,
        by=gate.decided_by,
        hint=f"Nothing to do; `/workflow status {gate.run_id}` shows where the run is.",
    )
