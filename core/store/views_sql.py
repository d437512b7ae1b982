"""The `Views` role of `SqlStore`: reads a page or a command always makes together, one query each.

* `run_pulse`: an open run page asks it at a modest interval; one indexed query whose answer
  changes whenever anything the page shows changes (the run's status and version, a journal
  entry started, finished or invalidated, an audit row), on whichever replica it happened.
* `command_runs`: a `run` command's redelivery check and fresh-run prompt, one SELECT whose
  two halves each keep their index (`origin_event`; platform, conversation, workflow, status).
* `gate_and_args`: what an approval reads before its compare-and-swap, the args blob
  outer-joined with the run's waiting gates (by the gates' primary key).
"""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa

from core.store.database import store_operation
from core.store.port import Pulse
from core.store.records import Gate, GateStatus, NodeStatus, Run, RunStatus
from core.store.rows import gate_from_row, run_from_row
from core.store.sql_base import SqlDatabase
from core.store.tables import AUDIT, BLOBS, GATES, JOURNAL, RUNS

_UNFINISHED = sorted(s.value for s in RunStatus if s.unfinished)


_IN_KEY = sorted(s.value for s in (RunStatus.RUNNING, RunStatus.NEEDS_ATTENTION, RunStatus.PAUSED,
                                   RunStatus.QUEUED))


class ViewsSql:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    @store_operation("read a concurrency queue")
    def key_runs(self, *, key: str | None = None, workflow: str | None = None, limit: int = 500) -> list[Run]:
        """Runs holding or waiting for a slot of a key (`Views.key_runs`), by the key's index."""
        query = sa.select(RUNS).where(RUNS.c.concurrency_key.is_not(None), RUNS.c.status.in_(_IN_KEY))
        if key is not None:
            query = query.where(RUNS.c.concurrency_key == key)
        if workflow is not None:
            query = query.where(RUNS.c.workflow == workflow)
        queued = RUNS.c.status == RunStatus.QUEUED.value
        waiting = sa.case((queued, 1), else_=0)
        since = sa.case((queued, RUNS.c.queued_at), else_=RUNS.c.updated_at)
        query = query.order_by(RUNS.c.concurrency_key, waiting, since, RUNS.c.id).limit(limit)
        return self._db.read_runs(query)

    @store_operation("read the runs queued long")
    def queued_runs(self, *, after: tuple[float, str] | None, up_to: float, limit: int = 500) -> list[Run]:
        """Queued runs in (`after`, `up_to`] by (`queued_at`, id) (`Views.queued_runs`)."""
        query = sa.select(RUNS).where(RUNS.c.status == RunStatus.QUEUED.value, RUNS.c.queued_at <= up_to)
        if after is not None:
            at, run_id = after
            later = sa.or_(RUNS.c.queued_at > at, sa.and_(RUNS.c.queued_at == at, RUNS.c.id > run_id))
            query = query.where(later)
        return self._db.read_runs(query.order_by(RUNS.c.queued_at, RUNS.c.id).limit(limit))

    @store_operation("check a run for changes")
    def run_pulse(self, run_id: str) -> Pulse | None:
        """A value that changes whenever the run's page would (None: no such run)."""
        with self._db.single.connect() as conn:
            row = conn.execute(_pulse(), {"run_id": run_id}).first()
        return None if row is None else tuple(row)

    @store_operation("find the runs of a run command")
    def command_runs(
        self, origin_event: str, workflow: str, platform: str, conversation: str
    ) -> tuple[Run | None, list[Run]]:
        params = {
            "p_event": origin_event,
            "p_workflow": workflow,
            "p_platform": platform,
            "p_conversation": conversation,
        }
        with self._db.single.connect() as conn:
            rows = [(row.b_origin_event, run_from_row(row)) for row in conn.execute(_command_runs(), params)]
        started = [run for event, run in rows if event == origin_event]  # newest first: the first is last
        waiting = [
            run
            for _, run in rows
            if (run.platform, run.conversation, run.workflow) == (platform, conversation, workflow)
            and run.status.unfinished
        ]
        return (started[-1] if started else None), waiting

    @store_operation("read an approval")
    def gate_and_args(self, run: Run) -> tuple[Gate | None, bytes]:
        with self._db.single.connect() as conn:
            row = conn.execute(_gate_and_args(), {"p_digest": run.args_digest, "p_run": run.id}).first()
        if row is None:
            raise KeyError(run.args_digest)
        m = row._mapping
        gate = gate_from_row({c.name: m[f"g_{c.name}"] for c in GATES.c}) if m["g_run_id"] else None
        return gate, bytes(m["b_data"])


@functools.cache
def _pulse() -> sa.Select[Any]:
    journal = (
        sa.select(
            sa.func.count(),
            sa.func.count(JOURNAL.c.finished_at),
            sa.func.coalesce(sa.func.max(JOURNAL.c.id), 0),
            sa.func.coalesce(
                sa.func.sum(sa.case((JOURNAL.c.status == NodeStatus.INVALIDATED.value, 1), else_=0)), 0
            ),
        )
        .where(JOURNAL.c.run_id == sa.bindparam("run_id"))
        .subquery()
    )
    audit = (
        sa.select(sa.func.coalesce(sa.func.max(AUDIT.c.id), 0))
        .where(AUDIT.c.run_id == sa.bindparam("run_id"))
        .scalar_subquery()
    )
    return (
        sa.select(RUNS.c.status, RUNS.c.version, RUNS.c.thread, *journal.c, audit)
        .select_from(RUNS.join(journal, sa.true()))
        .where(RUNS.c.id == sa.bindparam("run_id"))
    )


@functools.cache
def _command_runs() -> sa.Select[Any]:
    """`command_runs`' query (p_event, p_workflow, p_platform, p_conversation), newest first."""
    unfinished = sa.and_(
        RUNS.c.platform == sa.bindparam("p_platform"),
        RUNS.c.conversation == sa.bindparam("p_conversation"),
        RUNS.c.workflow == sa.bindparam("p_workflow"),
        RUNS.c.status.in_(_UNFINISHED),
    )
    return (
        sa.select(RUNS.c.origin_event.label("b_origin_event"), RUNS)
        .where(sa.or_(RUNS.c.origin_event == sa.bindparam("p_event"), unfinished))
        .order_by(RUNS.c.created_at.desc())
    )


@functools.cache
def _gate_and_args() -> sa.Select[Any]:
    """The blob p_digest's data (b_data) with the gate of run p_run that has waited longest
    (the rule of `Gates.waiting_gate`), its columns as g_<name>, NULL when none waits."""
    waiting = sa.and_(GATES.c.run_id == sa.bindparam("p_run"), GATES.c.status == GateStatus.WAITING.value)
    return (
        sa.select(BLOBS.c.data.label("b_data"), *[c.label(f"g_{c.name}") for c in GATES.c])
        .select_from(BLOBS.outerjoin(GATES, waiting))
        .where(BLOBS.c.digest == sa.bindparam("p_digest"))
        .order_by(GATES.c.created_at, GATES.c.node_id)
        .limit(1)
    )
