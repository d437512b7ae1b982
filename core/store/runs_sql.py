"""The `Runs` and `Leases` roles of `SqlStore`: lookups, compare-and-swap transitions, leases.

Every change is one conditional UPDATE; zero rows means another actor won, and the run
is re-read only to build the typed error (`cas.lost_race`, `cas.lost_takeover`). A new run
is written by a unit of work (`tx.create_run`), with whatever goes with it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from core.errors import AmbiguousRunId, RunNotFound
from core.store import cas, writes_sql
from core.store.database import store_operation
from core.store.records import Run, RunStatus, Transition
from core.store.rows import run_from_row
from core.store.sql_base import SqlDatabase
from core.store.tables import GATES, RUNS

_RUNNING = RunStatus.RUNNING.value


class RunsSql:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    @store_operation("read a run")
    def get_run(self, run_id: str) -> Run:
        with self._db.single.connect() as conn:
            return self._db.read_run(conn, run_id)

    @store_operation("find a run")
    def find_run(self, id_or_prefix: str) -> Run:
        prefix = cas.normalize_prefix(id_or_prefix)
        if prefix is None:
            raise RunNotFound(f"No run has the id {id_or_prefix.strip()!r}.", run_id=id_or_prefix)
        params = {"p_like": prefix + "%", "p_low": prefix, "p_high": cas.prefix_upper_bound(prefix)}
        with self._db.single.connect() as conn:
            runs = [run_from_row(row) for row in conn.execute(_by_prefix(), params)]
        if not runs:
            with self._db.single.connect() as conn:
                self._db.raise_if_pruned(conn, prefix, exact=False)
            raise RunNotFound(f"No run id starts with {prefix}.", run_id=prefix)
        exact = [run for run in runs if run.id == prefix]
        if exact:
            return exact[0]
        if len(runs) > 1:
            listed = ", ".join(run.id for run in runs[:5]) + (", …" if len(runs) > 5 else "")
            raise AmbiguousRunId(f"Run id {prefix} matches several runs: {listed}.", run_id=prefix,
                                 candidates=runs)
        return runs[0]

    @store_operation("look up an args handle")
    def runs_with_args(self, prefix: str, limit: int = 1000) -> list[Run]:
        low = cas.normalize_prefix(prefix)
        if low is None:
            return []
        params = {"p_like": low + "%", "p_low": low, "p_high": cas.prefix_upper_bound(low), "p_limit": limit}
        with self._db.single.connect() as conn:
            return [run_from_row(row) for row in conn.execute(_with_args(), params)]

    @store_operation("list recent runs")
    def recent_runs(
        self, *, platform: str | None = None, conversation: str | None = None, limit: int = 20,
        requester: str | None = None, workflow: str | None = None, status: str | None = None,
    ) -> list[Run]:
        query = sa.select(RUNS).order_by(RUNS.c.created_at.desc()).limit(limit)
        if platform is not None:
            query = query.where(RUNS.c.platform == platform)
        if conversation is not None:
            query = query.where(RUNS.c.conversation == conversation)
        if requester is not None:
            query = query.where(RUNS.c.requester == requester)
        if workflow is not None:
            query = query.where(RUNS.c.workflow == workflow)
        if status is not None:
            query = query.where(RUNS.c.status == status)
        return self._db.read_runs(query)

    @store_operation("list a run's sub-runs")
    def child_runs(self, parent_runs: Sequence[str]) -> list[Run]:
        if not parent_runs:
            return []
        query = (  # ix_runs_parent holds only runs with a parent (revision 0016_runs_parent_partial)
            sa.select(RUNS)
            .where(RUNS.c.parent_run.in_(list(parent_runs)))
            .order_by(RUNS.c.created_at.desc())
        )
        with self._db.single.connect() as conn:
            return [run_from_row(row) for row in conn.execute(query)]

    @store_operation("list paused parents of sub-runs")
    def paused_parents(self, limit: int = 500) -> list[Run]:
        child = RUNS.alias("child")
        has_child = sa.exists().where(child.c.parent_run == RUNS.c.id)
        query = (
            sa.select(RUNS)
            .where(RUNS.c.status == RunStatus.PAUSED.value, has_child)
            .order_by(RUNS.c.updated_at)
            .limit(limit)
        )
        return self._db.read_runs(query)

    @store_operation("hand a sub-run to its parent's resumer")
    def adopt_child(self, run_id: str, parent_run: str) -> Run:
        with self._db.engine.begin() as conn:
            row = conn.execute(
                sa.update(RUNS).where(RUNS.c.id == run_id).values(parent_run=parent_run).returning(*RUNS.c)
            ).first()
        if row is None:
            raise RunNotFound(f"no run {run_id}", run_id=run_id)
        return run_from_row(row)

    @store_operation("list the runs of a thread")
    def runs_in_thread(self, platform: str, conversation: str, thread: str) -> list[Run]:
        query = (
            sa.select(RUNS)
            .where(RUNS.c.platform == platform, RUNS.c.conversation == conversation, RUNS.c.thread == thread)
            .order_by(RUNS.c.created_at.desc())
        )
        return self._db.read_runs(query)

    @store_operation("attach a thread to a run")
    def set_thread(self, run_id: str, thread: str) -> Run:
        """Also moves the run's gates to the thread, so replies there find them."""
        with self._db.engine.begin() as conn:
            row = conn.execute(
                sa.update(RUNS).where(RUNS.c.id == run_id).values(thread=thread).returning(*RUNS.c)
            ).first()
            if row is None:
                raise RunNotFound(f"No run has the id {run_id}.", run_id=run_id)
            conn.execute(sa.update(GATES).where(GATES.c.run_id == run_id).values(thread=thread))
        return run_from_row(row)

    def transition(self, change: Transition) -> Run:
        """CAS (`Runs.transition`): a unit of work of this one write."""
        run: Run = self._db.apply_one(writes_sql.transition(self._db.now(), change))
        return run

    # -- leases ---------------------------------------------------------------------------
    @store_operation("renew leases")
    def renew_leases(self, owner: str, lease_seconds: float) -> int:
        statement = (
            sa.update(RUNS)
            .where(RUNS.c.status == _RUNNING, RUNS.c.lease_owner == owner)
            .values(lease_expires_at=self._db.now() + lease_seconds)
        )
        with self._db.engine.begin() as conn:
            return int(conn.execute(statement).rowcount)

    @store_operation("list lapsed runs")
    def lapsed_runs(self, now: float | None = None) -> list[Run]:
        when = self._db.clock() if now is None else now
        query = (
            sa.select(RUNS)
            .where(RUNS.c.status == _RUNNING, RUNS.c.lease_expires_at < when)
            .order_by(RUNS.c.lease_expires_at)
        )
        return self._db.read_runs(query)

    @store_operation("list the runs of a lease owner")
    def runs_leased_by(self, owner_prefix: str) -> list[Run]:
        query = sa.select(RUNS).where(
            RUNS.c.status == _RUNNING, RUNS.c.lease_owner.startswith(owner_prefix, autoescape=True)
        )
        return self._db.read_runs(query)

    @store_operation("take over a run")
    def take_over(self, run: Run, new_owner: str, lease_seconds: float) -> Run:
        """CAS on the version *and* the lease as `run` shows them: if the owner renewed in
        between, it is alive and the take-over loses."""
        now = self._db.now()
        statement = (
            sa.update(RUNS)
            .where(
                RUNS.c.id == run.id,
                RUNS.c.version == run.version,
                RUNS.c.status == _RUNNING,
                RUNS.c.lease_owner.is_not_distinct_from(run.lease_owner),
                RUNS.c.lease_expires_at.is_not_distinct_from(run.lease_expires_at),
            )
            .values(
                version=RUNS.c.version + 1,
                lease_owner=new_owner,
                lease_expires_at=now + lease_seconds,
                updated_at=now,
            )
            .returning(*RUNS.c)
        )
        with self._db.single.begin() as conn:
            row = conn.execute(statement).first()
            if row is None:
                raise cas.lost_takeover(self._db.read_run(conn, run.id))
        return run_from_row(row)

    @store_operation("release leases")
    def release_leases(self, owner: str) -> int:
        """Let every running run this owner holds lapse now, so a peer recovers it at once
        (graceful shutdown). Returns how many."""
        statement = (
            sa.update(RUNS)
            .where(RUNS.c.status == _RUNNING, RUNS.c.lease_owner == owner)
            .values(lease_expires_at=self._db.now() - 0.001)
        )
        with self._db.engine.begin() as conn:
            return int(conn.execute(statement).rowcount)


@functools.cache
def _by_prefix() -> sa.Select[Any]:
    """Up to 6 runs whose id starts with a prefix (p_like = prefix%, p_low = prefix, p_high =
    its upper bound), newest first. Built once: the compiled SQL comes from SQLAlchemy's cache."""
    return (
        sa.select(RUNS)
        .where(
            RUNS.c.id.like(sa.bindparam("p_like")),  # PostgreSQL: the text_pattern_ops index
            RUNS.c.id >= sa.bindparam("p_low"),  # SQLite: a range scan of the primary key
            RUNS.c.id < sa.bindparam("p_high"),
        )
        .order_by(RUNS.c.created_at.desc())
        .limit(6)
    )


@functools.cache
def _with_args() -> sa.Select[Any]:
    """`runs_with_args`' query: the first run of each (args digest, workflow, requester) whose
    digest is in the prefix's range (`ix_runs_args_digest`), built once."""
    in_range = sa.and_(
        RUNS.c.args_digest.like(sa.bindparam("p_like")),
        RUNS.c.args_digest >= sa.bindparam("p_low"),
        RUNS.c.args_digest < sa.bindparam("p_high"),
    )
    first = (
        sa.select(sa.func.min(RUNS.c.id))
        .where(in_range)
        .group_by(RUNS.c.args_digest, RUNS.c.workflow, RUNS.c.requester)
        .limit(sa.bindparam("p_limit"))
    )
    return sa.select(RUNS).where(RUNS.c.id.in_(first.scalar_subquery())).order_by(RUNS.c.id)
