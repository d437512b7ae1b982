"""Row -> frozen record conversion (pure). Rows are SQLAlchemy Core result rows of
the tables in `tables.py`; nothing outside `core/store/` ever sees one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import Row, RowMapping

from core.store.records import AuditEvent, Gate, GateStatus, JournalEntry, NodeStatus, Run, RunStatus

RowLike = Row[Any] | RowMapping | Mapping[str, Any]


def _m(row: RowLike) -> Mapping[str, Any]:
    return row._mapping if isinstance(row, Row) else row  # type: ignore[return-value]


def run_from_row(row: RowLike) -> Run:
    m = _m(row)
    return Run(
        id=m["id"],
        workflow=m["workflow"],
        platform=m["platform"],
        conversation=m["conversation"],
        thread=m["thread"],
        requester=m["requester"],
        args_digest=m["args_digest"],
        status=RunStatus(m["status"]),
        version=m["version"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        resumed_from=m["resumed_from"],
        lease_owner=m["lease_owner"],
        lease_expires_at=m["lease_expires_at"],
        status_by=m["status_by"],
        reason=m["reason"],
    )


def journal_from_row(row: RowLike) -> JournalEntry:
    m = _m(row)
    return JournalEntry(
        id=m["id"],
        run_id=m["run_id"],
        node_id=m["node_id"],
        attempt=m["attempt"],
        cache_key=m["cache_key"],
        components=dict(m["components"] or {}),
        status=NodeStatus(m["status"]),
        started_at=m["started_at"],
        finished_at=m["finished_at"],
        output_digest=m["output_digest"],
        error=m["error"],
        idempotency_key=m["idempotency_key"],
        tokens_in=m["tokens_in"],
        tokens_out=m["tokens_out"],
        artifacts=dict(m["artifacts"] or {}),
        cached_from=m["cached_from"],
        invalidated_by=m["invalidated_by"],
    )


def gate_from_row(row: RowLike) -> Gate:
    m = _m(row)
    return Gate(
        run_id=m["run_id"],
        node_id=m["node_id"],
        prompt=m["prompt"],
        status=GateStatus(m["status"]),
        created_at=m["created_at"],
        decided_by=m["decided_by"],
        comment=m["comment"],
        decided_at=m["decided_at"],
        cache_key=m["cache_key"],
    )


def audit_from_row(row: RowLike) -> AuditEvent:
    m = _m(row)
    return AuditEvent(
        id=m["id"],
        at=m["at"],
        actor=m["actor"],
        action=m["action"],
        run_id=m["run_id"],
        details=dict(m["details"] or {}),
    )
