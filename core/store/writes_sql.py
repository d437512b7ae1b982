"""The writes a unit of work may hold, as SQL: each a statement shape and its bound values.

A `Write` names its statement by `kind` (`"transition:paused"`: a kind and the variant its
statement is built for); `statement(kind, dialect, prefix)` builds it once per dialect and
bind-name prefix (`functools.cache`), so SQLAlchemy's compiled cache serves every later
call. A transition's legal sources are such a variant, written into the SQL as constants
(they are `RunStatus` values): an expanding `IN` parameter would be re-rendered on every
execution. The prefix lets several writes of one kind travel in one
statement (PostgreSQL, `unit_sql.py`): `w0_b_run_id`, `w1_b_run_id`, … (`bound`).

A compare-and-swap write (`Kind.cas`) must change a row, or its whole unit is undone;
its `check` then reads the row as it is now and returns the typed error (or None when the
condition holds again, and the unit is tried again).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from core.errors import BatonError, DeadlineAlreadyFired, FireAlreadyRecorded, RunNotFound, VotesChanged
from core.store import cas
from core.store.database import dialect_insert
from core.store.records import (
    Fire,
    Gate,
    GateDeadline,
    GateStatus,
    GateVote,
    NodeStatus,
    Run,
    RunStatus,
    Transition,
)
from core.store.rows import gate_from_row, run_from_row, run_values
from core.store.tables import (
    AUDIT,
    BLOBS,
    GATE_DEADLINES,
    GATE_VOTES,
    GATES,
    JOURNAL,
    OUTBOX,
    PROCESSED_EVENTS,
    RUNS,
    SCHEDULE_FIRES,
)
from core.store.unit_of_work import Pending

Rows = Sequence[Mapping[Any, Any]]
Check = Callable[[sa.Connection], BatonError | None]


@dataclass(frozen=True, slots=True)
class Kind:
    build: Callable[[str, str, str], Any]  # (dialect, prefix, variant) -> statement
    cas: bool = False  # must change a row, or the unit is undone
    returns: bool = False  # its rows are the write's result
    updates: bool = False  # changes rows that exist (takes their locks), rather than adding rows
    serial: bool = False  # its unit goes in order in one transaction (its reads must see the others')


@dataclass(slots=True)
class Write:
    kind: str
    params: Mapping[str, Any]
    operation: str  # "change a run's status": what a StoreError says could not be done
    check: Check | None = None  # cas writes: why it matched nothing, from the state now
    result: Callable[[Rows], Any] | None = None  # the returned rows -> the value
    into: Pending[Any] | None = None


def _b(prefix: str, name: str, column: sa.Column[Any] | None = None, **kw: Any) -> Any:
    return sa.bindparam(f"{prefix}b_{name}", type_=None if column is None else column.type, **kw)


def bound(write: Write, prefix: str = "") -> dict[str, Any]:
    """The write's values under the bind names of `statement(write.kind, …, prefix)`."""
    return {f"{prefix}b_{name}": value for name, value in write.params.items()}


def _put_blob(dialect: str, p: str, _variant: str) -> Any:
    insert = dialect_insert(dialect)
    return (
        insert(BLOBS)
        .values({c: _b(p, c, BLOBS.c[c]) for c in ("digest", "data", "size")})
        .on_conflict_do_nothing(index_elements=["digest"])
    )


def _create_run(_dialect: str, p: str, _variant: str) -> Any:
    return sa.insert(RUNS).values({c.name: _b(p, c.name, c) for c in RUNS.c})


def _transition(with_version: bool) -> Callable[[str, str, str], Any]:
    def build(_dialect: str, p: str, allowed: str) -> Any:
        sources: list[Any] = [sa.literal_column(f"'{RunStatus(s).value}'") for s in allowed.split(",")]
        matches = [RUNS.c.id == _b(p, "id", RUNS.c.id), RUNS.c.status.in_(sources)]
        if with_version:
            matches.append(RUNS.c.version == _b(p, "version", RUNS.c.version))
        changed = ("status", "status_by", "reason", "updated_at", "lease_owner", "lease_expires_at",
                   "queued_at")
        return (
            sa.update(RUNS)
            .where(*matches)
            .values({**{c: _b(p, c, RUNS.c[c]) for c in changed}, "version": RUNS.c.version + 1})
            .returning(*RUNS.c)
        )

    return build


def _decide(one: bool) -> Callable[[str, str, str], Any]:
    def build(_dialect: str, p: str, _variant: str) -> Any:
        matches = [
            GATES.c.run_id == _b(p, "run_id", GATES.c.run_id),
            GATES.c.status == GateStatus.WAITING.value,
        ]
        if one:
            matches.append(GATES.c.node_id == _b(p, "node_id", GATES.c.node_id))
        decided: tuple[str, ...] = ("status", "decided_by", "comment", "decided_at")
        if one:  # a gate's own decision carries its choice and outcome; closing a run's gates does not
            decided += ("decision", "outcome")
        return (
            sa.update(GATES)
            .where(*matches)
            .values({c: _b(p, c, GATES.c[c]) for c in decided})
            .returning(*GATES.c)
        )

    return build


def _audit(_dialect: str, p: str, _variant: str) -> Any:
    return sa.insert(AUDIT).values(
        {c: _b(p, c, AUDIT.c[c]) for c in ("at", "actor", "action", "run_id", "details")}
    )


def _finish_event(_dialect: str, p: str, _variant: str) -> Any:
    return (
        sa.update(PROCESSED_EVENTS)
        .where(
            PROCESSED_EVENTS.c.platform == _b(p, "platform", PROCESSED_EVENTS.c.platform),
            PROCESSED_EVENTS.c.event_id == _b(p, "event_id", PROCESSED_EVENTS.c.event_id),
        )
        .values(done=True)
    )


_NOTE_COLUMNS = ("run_id", "node_id", "cache_key", "components", "started_at", "finished_at", "error")


def _journal_note(_dialect: str, p: str, _variant: str) -> Any:
    fixed = {
        "attempt": 0, "status": NodeStatus.FAILED.value, "tokens_in": 0, "tokens_out": 0,
        "artifacts": sa.literal({}, JOURNAL.c.artifacts.type),
    }  # fmt: skip
    return sa.insert(JOURNAL).values({**{c: _b(p, c, JOURNAL.c[c]) for c in _NOTE_COLUMNS}, **fixed})


def _invalidate(_dialect: str, p: str, _variant: str) -> Any:
    return (
        sa.update(JOURNAL)
        .where(
            JOURNAL.c.run_id == _b(p, "run_id", JOURNAL.c.run_id),
            JOURNAL.c.node_id.in_(_b(p, "nodes", expanding=True)),
            JOURNAL.c.status == NodeStatus.COMPLETED.value,
        )
        .values(status=NodeStatus.INVALIDATED.value, invalidated_by=_b(p, "actor", JOURNAL.c.invalidated_by))
        .returning(JOURNAL.c.id)
    )


def _enqueue_delivery(dialect: str, p: str, _variant: str) -> Any:
    """INSERT … SELECT: where the reply goes is the run's place, read in the same statement.
    PostgreSQL needs the selected parameters' types spelled out; SQLite must not get a CAST
    (`CAST(… AS JSON)` has numeric affinity there)."""
    given = ("run_id", "kind", "payload", "created_at", "due_at")
    typed = sa.cast if dialect == "postgresql" else sa.type_coerce
    values = [typed(_b(p, c, OUTBOX.c[c]), OUTBOX.c[c].type) for c in given]
    source = sa.select(*values, RUNS.c.platform, RUNS.c.conversation, RUNS.c.thread).where(
        RUNS.c.id == _b(p, "run_id", RUNS.c.id)
    )
    return sa.insert(OUTBOX).from_select([*given, "platform", "conversation", "thread"], source)


_NOTICE_COLUMNS = ("run_id", "kind", "platform", "conversation", "payload", "created_at", "due_at", "dedupe")


def _enqueue_notice(dialect: str, p: str, _variant: str) -> Any:
    """A notice to a place of its own, once per `dedupe` key (a repeat is no error)."""
    insert = dialect_insert(dialect)
    return (
        insert(OUTBOX)
        .values({c: _b(p, c, OUTBOX.c[c]) for c in _NOTICE_COLUMNS})
        .on_conflict_do_nothing(index_elements=["dedupe"])
    )


def _fire_deadline(_dialect: str, p: str, _variant: str) -> Any:
    c = GATE_DEADLINES.c
    return (
        sa.update(GATE_DEADLINES)
        .where(
            c.run_id == _b(p, "run_id", c.run_id),
            c.node_id == _b(p, "node_id", c.node_id),
            c.opened_at == _b(p, "opened_at", c.opened_at),
            c.name == _b(p, "name", c.name),
            c.fired_at.is_(None),
        )
        .values(fired_at=_b(p, "fired_at", c.fired_at), fired_by=_b(p, "fired_by", c.fired_by))
        .returning(c.name)
    )


def _lock_run(_dialect: str, p: str, _variant: str) -> Any:
    """The run's row locked (a no-op write): units that vote on its gates take turns."""
    return sa.update(RUNS).where(RUNS.c.id == _b(p, "id", RUNS.c.id)).values(id=RUNS.c.id)


_VOTE_COLUMNS = ("run_id", "node_id", "opened_at", "user", "ballot", "choice", "at", "comment", "vals")


def _cast_vote(_dialect: str, p: str, _variant: str) -> Any:
    """The vote, inserted only while the opening holds exactly the `seen` votes it was read with."""
    c = GATE_VOTES.c
    count = (
        sa.select(sa.func.count())
        .select_from(GATE_VOTES)
        .where(c.run_id == _b(p, "run_id", c.run_id), c.node_id == _b(p, "node_id", c.node_id),
               c.opened_at == _b(p, "opened_at", c.opened_at))
        .scalar_subquery()
    )
    values = sa.select(*(_b(p, name, c[name]) for name in _VOTE_COLUMNS)).where(count == _b(p, "seen"))
    return sa.insert(GATE_VOTES).from_select(list(_VOTE_COLUMNS), values).returning(c.ballot)


def _record_fire(dialect: str, p: str, _variant: str) -> Any:
    c = SCHEDULE_FIRES.c
    return (
        dialect_insert(dialect)(SCHEDULE_FIRES)
        .values({col.name: _b(p, col.name, col) for col in SCHEDULE_FIRES.c})
        .on_conflict_do_nothing(index_elements=["schedule_id", "due_at"])
        .returning(c.schedule_id, c.due_at)
    )


KINDS: dict[str, Kind] = {
    "lock_run": Kind(_lock_run, updates=True, serial=True),
    "cast_vote": Kind(_cast_vote, cas=True, returns=True, serial=True),
    "put_blob": Kind(_put_blob),
    "create_run": Kind(_create_run),
    "transition": Kind(_transition(False), cas=True, returns=True, updates=True),
    "transition_at_version": Kind(_transition(True), cas=True, returns=True, updates=True),
    "decide_gate": Kind(_decide(True), cas=True, returns=True, updates=True),
    "close_gates": Kind(_decide(False), returns=True, updates=True),
    "audit": Kind(_audit),
    "finish_event": Kind(_finish_event, updates=True),
    "journal_note": Kind(_journal_note),
    "invalidate": Kind(_invalidate, returns=True, updates=True),
    "enqueue_delivery": Kind(_enqueue_delivery),
    "enqueue_notice": Kind(_enqueue_notice),
    "fire_deadline": Kind(_fire_deadline, cas=True, returns=True, updates=True),
    "record_fire": Kind(_record_fire, cas=True, returns=True),
}


def kind_of(kind: str) -> Kind:
    """What `kind` (`"transition:paused"`) is: the entry of its kind without the variant."""
    return KINDS[kind.partition(":")[0]]


@functools.cache
def statement(kind: str, dialect: str, prefix: str = "") -> Any:
    """The statement of `kind` with bind names `prefix + "b_" + name`, built once."""
    return kind_of(kind).build(dialect, prefix, kind.partition(":")[2])


# -- the writes ----------------------------------------------------------------------------


def put_blob(data: bytes) -> tuple[Write, str]:
    digest = hashlib.sha256(data).hexdigest()
    return Write("put_blob", {"digest": digest, "data": data, "size": len(data)}, "store a blob"), digest


def create_run(run: Run, origin_event: str | None) -> Write:
    """The run's row; its result: the run as the unit left it (admission may have queued it:
    `unit_sql._keyed` gives its row), else as created."""
    values = run_values(run)
    values.update(origin_event=origin_event)
    return Write("create_run", values, "create a run",
                 result=lambda rows: run_from_row(rows[0]) if rows else run)  # fmt: skip


def transition(now: float, change: Transition) -> Write:
    run_id, to, actor, reason = change.run_id, RunStatus(change.to), change.actor, change.reason
    expected_version = change.expected_version
    allowed = cas.allowed_sources(to, change.allowed_from)  # an illegal change fails before any SQL
    owner, expires = cas.lease(
        to, now, holder=actor, lease_owner=change.lease_owner, lease_seconds=change.lease_seconds
    )
    params: dict[str, Any] = {
        "id": run_id, "status": to.value, "status_by": actor, "reason": reason, "updated_at": now,
        "lease_owner": owner, "lease_expires_at": expires,
        "queued_at": now if to is RunStatus.QUEUED else None,
    }  # fmt: skip
    kind = "transition"
    if expected_version is not None:
        kind, params["version"] = "transition_at_version", expected_version
    kind += ":" + ",".join(sorted(s.value for s in allowed))

    def check(conn: sa.Connection) -> BatonError | None:
        current = read_run(conn, run_id)
        if current.status in allowed and expected_version in (None, current.version):
            return None
        return cas.lost_race(current, to, allowed, expected_version)

    return Write(kind, params, "change a run's status", check, lambda rows: run_from_row(rows[0]))


def decide_gate(
    now: float, run_id: str, node_id: str, *, approved: bool, by: str, comment: str | None,
    decision: str | None = None, outcome: Mapping[str, Any] | None = None,
) -> Write:
    status = GateStatus.APPROVED if approved else GateStatus.REJECTED
    choice = decision or ("approve" if approved else "reject")
    params = {"run_id": run_id, "node_id": node_id, "status": status.value, "decided_by": by,
              "comment": comment, "decided_at": now, "decision": choice,
              "outcome": dict(outcome or {})}  # fmt: skip

    def check(conn: sa.Connection) -> BatonError | None:
        gate = read_gate(conn, run_id, node_id)
        return None if gate.status is GateStatus.WAITING else cas.already_decided(gate)

    return Write("decide_gate", params, "decide an approval gate", check, lambda rows: gate_from_row(rows[0]))


def close_gates(now: float, run_id: str, *, by: str, comment: str | None) -> Write:
    params = {"run_id": run_id, "status": GateStatus.REJECTED.value, "decided_by": by, "comment": comment,
              "decided_at": now}  # fmt: skip
    return Write("close_gates", params, "close approval gates", result=_gates_oldest_first)


def audit(
    now: float, *, actor: str, action: str, run_id: str | None = None, details: dict[str, Any] | None = None
) -> Write:
    params = {"at": now, "actor": actor, "action": action, "run_id": run_id, "details": details or {}}
    return Write("audit", params, "write the audit trail")


def finish_event(platform: str, event_id: str) -> Write:
    return Write(
        "finish_event", {"platform": platform, "event_id": event_id}, "mark an incoming event handled"
    )


def journal_note(
    now: float, *, run_id: str, node_id: str, cache_key: str, components: dict[str, Any], error: str
) -> Write:
    params = {"run_id": run_id, "node_id": node_id, "cache_key": cache_key, "components": components,
              "started_at": now, "finished_at": now, "error": error}  # fmt: skip
    return Write("journal_note", params, "record a decision about a step")


def invalidate(run_id: str, node_ids: Iterable[str], *, actor: str) -> Write | None:
    nodes = sorted(set(node_ids))
    if not nodes:
        return None
    params = {"run_id": run_id, "nodes": nodes, "actor": actor}
    return Write("invalidate", params, "invalidate step results", result=len)


def lock_run(run_id: str) -> Write:
    return Write("lock_run", {"id": run_id}, "record a vote")


def cast_vote(vote: GateVote, seen: int) -> Write:
    params = {"run_id": vote.run_id, "node_id": vote.node_id, "opened_at": vote.opened_at, "user": vote.user,
              "ballot": vote.ballot, "choice": vote.choice, "at": vote.at, "comment": vote.comment,
              "vals": dict(vote.values), "seen": seen}  # fmt: skip

    def check(conn: sa.Connection) -> BatonError | None:
        read_run(conn, vote.run_id)  # RunNotFound when it is gone
        where = f"{vote.node_id} of run {vote.run_id}"
        return VotesChanged(f"another vote arrived on {where}", run_id=vote.run_id)

    return Write("cast_vote", params, "record a vote", check, lambda rows: True)


def enqueue_delivery(now: float, run_id: str, kind: str, payload: Mapping[str, Any]) -> Write:
    params = {"run_id": run_id, "kind": kind, "payload": dict(payload), "created_at": now, "due_at": now}
    return Write("enqueue_delivery", params, "queue a reply in the outbox")


def enqueue_notice(
    now: float, run_id: str, kind: str, *, platform: str, conversation: str, payload: Mapping[str, Any],
    dedupe: str, due_at: float | None,
) -> Write:
    params = {"run_id": run_id, "kind": kind, "platform": platform, "conversation": conversation,
              "payload": dict(payload), "created_at": now, "due_at": now if due_at is None else due_at,
              "dedupe": dedupe}  # fmt: skip
    return Write("enqueue_notice", params, "queue a notice in the outbox")


def fire_deadline(now: float, deadline: GateDeadline, by: str) -> Write:
    params = {"run_id": deadline.run_id, "node_id": deadline.node_id, "opened_at": deadline.opened_at,
              "name": deadline.name, "fired_at": now, "fired_by": by}  # fmt: skip

    def check(conn: sa.Connection) -> BatonError | None:
        c = GATE_DEADLINES.c
        fired = conn.execute(
            sa.select(c.fired_by).where(
                c.run_id == deadline.run_id, c.node_id == deadline.node_id,
                c.opened_at == deadline.opened_at, c.name == deadline.name, c.fired_at.is_not(None),
            )
        ).first()
        if fired is None:  # no such deadline, or not fired: it is gone, or the unit goes again
            exists = conn.execute(sa.select(c.name).where(
                c.run_id == deadline.run_id, c.node_id == deadline.node_id,
                c.opened_at == deadline.opened_at, c.name == deadline.name,
            )).first()
            return None if exists is not None else _fired(deadline, None)
        return _fired(deadline, fired[0])

    return Write("fire_deadline", params, "fire a gate's deadline", check, lambda rows: True)


def _fired(deadline: GateDeadline, by: str | None) -> DeadlineAlreadyFired:
    return DeadlineAlreadyFired(
        f"The {deadline.name} deadline of {deadline.run_id}/{deadline.node_id} was fired already.",
        run_id=deadline.run_id, by=by,
    )


# -- reading the loser's state -------------------------------------------------------------


def read_run(conn: sa.Connection, run_id: str) -> Run:
    row = conn.execute(sa.select(RUNS).where(RUNS.c.id == run_id)).first()
    if row is None:
        raise RunNotFound(f"No run has the id {run_id}.", run_id=run_id)
    return run_from_row(row)


def read_gate(conn: sa.Connection, run_id: str, node_id: str) -> Gate:
    row = conn.execute(sa.select(GATES).where(GATES.c.run_id == run_id, GATES.c.node_id == node_id)).first()
    if row is None:
        raise RunNotFound(f"Run {run_id} has no approval gate {node_id}.", run_id=run_id)
    return gate_from_row(row)


def _gates_oldest_first(rows: Rows) -> list[Gate]:
    return sorted((gate_from_row(row) for row in rows), key=lambda g: (g.created_at, g.node_id))


def record_fire(fire: Fire) -> Write:
    params = dataclasses.asdict(fire) | {"outcome": fire.outcome.value}

    def check(conn: sa.Connection) -> BatonError | None:
        c = SCHEDULE_FIRES.c
        row = conn.execute(sa.select(c.outcome, c.by).where(
            c.schedule_id == fire.schedule_id, c.due_at == fire.due_at)).first()
        return None if row is None else fire_recorded(fire.schedule_id, fire.due_at, row[0], row[1])

    return Write("record_fire", params, "record a schedule's fire", check, lambda rows: True)


def fire_recorded(schedule_id: str, due_at: float, outcome: str, by: str) -> FireAlreadyRecorded:
    return FireAlreadyRecorded(
        f"Schedule {schedule_id} fired at {due_at} already ({outcome}, by {by}).", schedule_id=schedule_id
    )
