"""Row -> frozen record conversion (pure). Rows are SQLAlchemy Core result rows of
the tables in `tables.py`; nothing outside `core/store/` ever sees one."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Row, RowMapping

from core.store.records import (
    AuditEvent,
    Concurrency,
    Delivery,
    Fire,
    FireOutcome,
    Gate,
    GateDeadline,
    GateStatus,
    GateVote,
    JournalEntry,
    KeyNotes,
    NodeStatus,
    Run,
    RunStatus,
    Schedule,
    Subscription,
    notes_of,
    split_stored,
)

RowLike = Row[Any] | RowMapping | Mapping[str, Any]


def _m(row: RowLike) -> Mapping[str, Any]:
    return row._mapping if isinstance(row, Row) else row  # type: ignore[return-value]


_decode = json.JSONDecoder().decode


def json_object(value: Any) -> dict[str, Any]:
    """A JSON column's value as a dict: already decoded (SQLAlchemy's JSON type, psycopg's
    json loader) or raw text (columns read with `type_coerce(..., Text)`, which skips
    SQLAlchemy's per-value processing on the journal's big reads)."""
    if value is None or value == "{}":
        return {}
    if isinstance(value, str | bytes):
        decoded: dict[str, Any] = _decode(value if isinstance(value, str) else value.decode())
        return decoded
    return dict(value)


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
        started_by=m.get("started_by"),
        scheduled_for=m.get("scheduled_for"),
        concurrency=_concurrency(m),
        queued_at=m.get("queued_at"),
        parent_run=m.get("parent_run"),
        parent_node=m.get("parent_node"),
        parent_key=m.get("parent_key"),
    )


def _concurrency(m: Mapping[str, Any]) -> Concurrency | None:
    key = m.get("concurrency_key")
    return None if key is None else Concurrency.from_json(key, json_object(m.get("concurrency")))


def run_values(run: Run) -> dict[str, Any]:
    """`run` as the columns of its row (without `origin_event`)."""
    values = {f.name: getattr(run, f.name) for f in dataclasses.fields(run)}
    values["status"] = run.status.value
    c = run.concurrency
    values["concurrency_key"] = None if c is None else c.key
    values["concurrency"] = None if c is None else c.to_json()
    return values


_NODE_STATUSES = {status.value: status for status in NodeStatus}
#: the journal's columns in table order, which is also `JournalEntry`'s field order (its
#: `notes` are stored in the `components` column)
JOURNAL_FIELDS = tuple(f.name for f in dataclasses.fields(JournalEntry) if f.name != "notes")
_COMPONENTS = JOURNAL_FIELDS.index("components")


def journal_from_row(row: RowLike) -> JournalEntry:
    m = _m(row)
    return journal_from_values(tuple(m[name] for name in JOURNAL_FIELDS))


def journal_from_values(values: Sequence[Any]) -> JournalEntry:
    """An entry from its column values in `JOURNAL_FIELDS` order: positional and without
    per-column lookups, because a resume converts every entry of a run's lineage."""
    key_components, notes = split_stored(json_object(values[_COMPONENTS]))
    return _entry(values, key_components, notes)


def outline_from_values(values: Sequence[Any]) -> JournalEntry:
    """An entry of `Journal.journal_outline` from its column values: `JOURNAL_FIELDS` (the
    components a marker's only, else NULL), then its notes in `NOTE_NAMES` order."""
    marker = values[_COMPONENTS]
    components = split_stored(json_object(marker))[0] if marker is not None else {}
    return _entry(values, components, notes_of(values[len(JOURNAL_FIELDS) :]))


def _entry(values: Sequence[Any], components: dict[str, Any], notes: KeyNotes) -> JournalEntry:
    (id_, run_id, node_id, attempt, cache_key, _, status, started_at, finished_at, output_digest,
     error, idempotency_key, tokens_in, tokens_out, artifacts, cached_from,
     invalidated_by, *_) = values  # fmt: skip
    return JournalEntry(
        id_,
        run_id,
        node_id,
        attempt,
        cache_key,
        components,
        _NODE_STATUSES[status],
        started_at,
        finished_at,
        output_digest,
        error,
        idempotency_key,
        tokens_in,
        tokens_out,
        json_object(artifacts),
        cached_from,
        invalidated_by,
        notes,
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
        decision=m.get("decision"),
        outcome=json_object(m.get("outcome")),
    )


def vote_from_row(row: RowLike) -> GateVote:
    m = _m(row)
    return GateVote(
        run_id=m["run_id"],
        node_id=m["node_id"],
        opened_at=m["opened_at"],
        user=m["user"],
        choice=m["choice"],
        at=m["at"],
        comment=m["comment"],
        values=json_object(m["vals"]),
    )


def deadline_from_row(row: RowLike) -> GateDeadline:
    m = _m(row)
    return GateDeadline(
        run_id=m["run_id"],
        node_id=m["node_id"],
        opened_at=m["opened_at"],
        name=m["name"],
        due_at=m["due_at"],
        fired_at=m["fired_at"],
        fired_by=m["fired_by"],
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


def delivery_from_row(row: RowLike) -> Delivery:
    m = _m(row)
    return Delivery(
        id=int(m["id"]),
        run_id=m["run_id"],
        kind=m["kind"],
        platform=m["platform"],
        conversation=m["conversation"],
        thread=m["thread"],
        payload=json_object(m["payload"]),
        created_at=float(m["created_at"]),
        due_at=float(m["due_at"]),
        attempts=int(m["attempts"]),
        claimed_by=m["claimed_by"],
        lease_expires_at=None if m["lease_expires_at"] is None else float(m["lease_expires_at"]),
        delivered_at=None if m["delivered_at"] is None else float(m["delivered_at"]),
        last_error=m["last_error"],
        dedupe=m.get("dedupe"),
    )


_SCHEDULE_FIELDS = tuple(f.name for f in dataclasses.fields(Schedule))


def schedule_from_row(row: RowLike) -> Schedule:
    """(A tick reads every schedule: the fields are listed once, the record built once.)"""
    m = _m(row)
    values = {name: m[name] for name in _SCHEDULE_FIELDS}
    values.update(args=json_object(m["args"]), paused=bool(m["paused"]), version=int(m["version"]))
    return Schedule(**values)


def fire_from_row(row: RowLike) -> Fire:
    m = _m(row)
    return Fire(schedule_id=m["schedule_id"], due_at=float(m["due_at"]), outcome=FireOutcome(m["outcome"]),
                at=float(m["at"]), by=m["by"], run_id=m["run_id"], detail=json_object(m["detail"]))
def subscription_from_row(row: RowLike) -> Subscription:
    m = _m(row)
    return Subscription(platform=m["platform"], conversation=m["conversation"], workflow=m["workflow"],
                        event=m["event"], created_by=m["created_by"], created_at=float(m["created_at"]))
