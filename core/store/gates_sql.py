"""Approval gates, the audit trail and incoming-event dedupe: methods of `SqlStore`.

`decide_gate` is a compare-and-swap `waiting -> approved|rejected`; `claim_event` is an
INSERT … ON CONFLICT DO NOTHING on (platform, event_id), so exactly one caller gets True,
then, for a claim never finished (`finish_event`) and older than `stale_after`, a CAS
UPDATE that exactly one re-claimer wins.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from core.errors import GateAlreadyDecided, RunNotFound
from core.store import cas
from core.store.database import store_operation
from core.store.records import AuditEvent, Gate, GateStatus, Run, RunStatus
from core.store.rows import audit_from_row, gate_from_row, run_from_row
from core.store.sql_base import SqlBase
from core.store.tables import AUDIT, GATES, PROCESSED_EVENTS, RUNS

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
        query = (
            sa.select(RUNS, *_GATE_COLUMNS)
            .join_from(RUNS, GATES, GATES.c.run_id == RUNS.c.id)
            .where(
                GATES.c.platform == platform,
                GATES.c.conversation == conversation,
                GATES.c.status == GateStatus.WAITING.value,
            )
            .order_by(GATES.c.created_at.desc())
        )
        if thread is not None:
            query = query.where(GATES.c.thread == thread)
        with self._single.connect() as conn:
            rows = [row._mapping for row in conn.execute(query)]
        return [(run_from_row(m), gate_from_row({c.name: m[f"g_{c.name}"] for c in GATES.c})) for m in rows]

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
        (on PostgreSQL by a second CAS on this very decision) and the run's CAS error raised."""
        now = self._now()
        allowed = cas.allowed_sources(RunStatus.RUNNING, [RunStatus.PAUSED])
        decided = {
            "status": GateStatus.APPROVED.value,
            "decided_by": by,
            "comment": comment,
            "decided_at": now,
        }
        gate_cas = (
            sa.update(GATES)
            .where(
                GATES.c.run_id == run.id,
                GATES.c.node_id == node_id,
                GATES.c.status == GateStatus.WAITING.value,
            )
            .values(decided)
        )
        run_cas = sa.update(RUNS).values(
            status=RunStatus.RUNNING.value, version=RUNS.c.version + 1, status_by=by, reason=None,
            updated_at=now, lease_owner=lease_owner, lease_expires_at=now + lease_seconds,
        )  # fmt: skip
        run_matches = [
            RUNS.c.id == run.id,
            RUNS.c.status.in_(sorted(s.value for s in allowed)),
            RUNS.c.version == run.version,
        ]
        audit = {
            "at": now,
            "actor": by,
            "action": "approve",
            "details": {"node": node_id, "comment": comment},
        }
        if self.dialect != "postgresql":
            with self._engine.begin() as conn:
                gate_row = conn.execute(gate_cas.returning(*GATES.c)).first()
                if gate_row is None:
                    raise _already_decided(self._read_gate(conn, run.id, node_id))
                run_row = conn.execute(run_cas.where(*run_matches).returning(*RUNS.c)).first()
                if run_row is None:  # leaving the block rolls the gate's decision back
                    raise cas.lost_race(self._read_run(conn, run.id), RunStatus.RUNNING, allowed, run.version)
                conn.execute(sa.insert(AUDIT).values(run_id=run.id, **audit))
            return gate_from_row(gate_row), run_from_row(run_row)
        gate_cte = gate_cas.returning(*GATES.c).cte("decided_gate")
        run_cte = (
            run_cas.where(*run_matches, sa.exists(sa.select(gate_cte.c.run_id)))
            .returning(*RUNS.c)
            .cte("resumed_run")
        )
        audit_cte = (
            sa.insert(AUDIT)
            .from_select(
                ["at", "actor", "action", "run_id", "details"],
                sa.select(
                    sa.literal(now),
                    sa.literal(by),
                    sa.literal("approve"),
                    run_cte.c.id,
                    sa.literal(audit["details"], sa.JSON),
                ),
            )
            .cte("approve_audit")
        )
        statement = (
            sa.select(*[gate_cte.c[c.name].label(f"g_{c.name}") for c in GATES.c], *run_cte.c)
            .select_from(gate_cte.outerjoin(run_cte, sa.true()))
            .add_cte(audit_cte)
        )
        with self._single.connect() as conn:
            row = conn.execute(statement).first()
            if row is None:
                raise _already_decided(self._read_gate(conn, run.id, node_id))
            m = row._mapping
            gate = gate_from_row({c.name: m[f"g_{c.name}"] for c in GATES.c})
            if m["id"] is not None:
                return gate, run_from_row(m)
            undo = (
                sa.update(GATES)
                .where(*[GATES.c[k] == v for k, v in decided.items() if v is not None])
                .where(GATES.c.run_id == run.id, GATES.c.node_id == node_id)
                .values(status=GateStatus.WAITING.value, decided_by=None, comment=None, decided_at=None)
            )
            conn.execute(undo)
            raise cas.lost_race(self._read_run(conn, run.id), RunStatus.RUNNING, allowed, run.version)

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
        insert = self._insert_ignore(PROCESSED_EVENTS, ["platform", "event_id"]).returning(
            PROCESSED_EVENTS.c.event_id
        )
        with self._single.begin() as conn:
            row = conn.execute(
                insert, {"platform": platform, "event_id": event_id, "at": now, "done": False}
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
        statement = (
            sa.update(PROCESSED_EVENTS)
            .where(PROCESSED_EVENTS.c.platform == platform, PROCESSED_EVENTS.c.event_id == event_id)
            .values(done=True)
        )
        with self._single.begin() as conn:
            conn.execute(statement)

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
        entry = sa.insert(AUDIT).values(
            at=self._now(), actor=actor, action=action, run_id=run_id, details=details
        )
        done = (
            sa.update(PROCESSED_EVENTS)
            .where(PROCESSED_EVENTS.c.platform == platform, PROCESSED_EVENTS.c.event_id == event_id)
            .values(done=True)
        )
        if self.dialect == "postgresql":
            with self._single.begin() as conn:
                conn.execute(done.add_cte(entry.cte("command_audit")))
            return
        with self._engine.begin() as conn:
            conn.execute(entry)
            conn.execute(done)

    @store_operation("forget old incoming events")
    def forget_events(self, before: float) -> int:
        """Drop processed-event ids older than `before` (platforms stop retrying after minutes)."""
        with self._engine.begin() as conn:
            return int(
                conn.execute(sa.delete(PROCESSED_EVENTS).where(PROCESSED_EVENTS.c.at < before)).rowcount
            )


def _already_decided(gate: Gate) -> GateAlreadyDecided:
    return GateAlreadyDecided(
        f"the approval {gate.node_id} of run {gate.run_id} was already {gate.status.value}"
        f" by {gate.decided_by}",
        run_id=gate.run_id,
        status=gate.status.value,
        by=gate.decided_by,
        hint=f"Nothing to do; `/workflow status {gate.run_id}` shows where the run is.",
    )
