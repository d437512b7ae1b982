"""Run methods of `SqlStore`: creation, lookups, compare-and-swap transitions, leases.

Every change is one conditional UPDATE; zero rows means another actor won, and the run
is re-read only to build the typed error (`cas.lost_race`, `cas.lost_takeover`).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from core.errors import AmbiguousRunId, RunNotFound
from core.store import cas
from core.store.database import store_operation
from core.store.records import Run, RunStatus
from core.store.rows import run_from_row
from core.store.sql_base import SqlBase
from core.store.tables import AUDIT, BLOBS, GATES, RUNS

#: Lease length when a caller moves a run to `running` without naming one.
DEFAULT_LEASE_SECONDS = 15.0
_ID_ATTEMPTS = 5
_UNFINISHED = sorted(s.value for s in RunStatus if s.unfinished)
_RUNNING = RunStatus.RUNNING.value


class RunsSql(SqlBase):
    def _new_run_values(
        self,
        *,
        workflow: str,
        platform: str,
        conversation: str,
        thread: str | None,
        requester: str,
        args_digest: str,
        resumed_from: str | None,
        status: RunStatus,
        lease_owner: str | None,
        lease_seconds: float | None,
        origin_event: str | None,
    ) -> dict[str, Any]:
        """The columns of a new run, without its id (drawn per attempt)."""
        now = self._now()
        running = RunStatus(status) is RunStatus.RUNNING
        return {
            "workflow": workflow,
            "platform": platform,
            "conversation": conversation,
            "thread": thread,
            "requester": requester,
            "args_digest": args_digest,
            "status": RunStatus(status).value,
            "version": 1,
            "created_at": now,
            "updated_at": now,
            "resumed_from": resumed_from,
            "lease_owner": (lease_owner or requester) if running else None,
            "lease_expires_at": now + (lease_seconds or DEFAULT_LEASE_SECONDS) if running else None,
            "status_by": requester,
            "reason": None,
            "origin_event": origin_event,
        }

    @store_operation("create a run")
    def create_run(
        self,
        *,
        workflow: str,
        platform: str,
        conversation: str,
        thread: str | None,
        requester: str,
        args_digest: str,
        resumed_from: str | None = None,
        status: RunStatus = RunStatus.PENDING,
        lease_owner: str | None = None,
        lease_seconds: float | None = None,
        origin_event: str | None = None,
    ) -> Run:
        values = self._new_run_values(
            workflow=workflow, platform=platform, conversation=conversation, thread=thread,
            requester=requester, args_digest=args_digest, resumed_from=resumed_from, status=status,
            lease_owner=lease_owner, lease_seconds=lease_seconds, origin_event=origin_event,
        )  # fmt: skip
        for attempt in range(_ID_ATTEMPTS):
            values["id"] = cas.new_run_id()
            try:
                with self._single.begin() as conn:
                    conn.execute(sa.insert(RUNS), values)
                break
            except IntegrityError:  # a 48-bit id collision: draw again
                if attempt == _ID_ATTEMPTS - 1:
                    raise
        return run_from_row(values)

    @store_operation("read a run")
    def get_run(self, run_id: str) -> Run:
        with self._single.connect() as conn:
            return self._read_run(conn, run_id)

    @store_operation("find a run")
    def find_run(self, id_or_prefix: str) -> Run:
        prefix = cas.normalize_prefix(id_or_prefix)
        if prefix is None:
            raise RunNotFound(f"No run has the id {id_or_prefix.strip()!r}.", run_id=id_or_prefix)
        params = {"p_like": prefix + "%", "p_low": prefix, "p_high": cas.prefix_upper_bound(prefix)}
        with self._single.connect() as conn:
            runs = [run_from_row(row) for row in conn.execute(_by_prefix(), params)]
        if not runs:
            raise RunNotFound(f"No run id starts with {prefix}.", run_id=prefix)
        exact = [run for run in runs if run.id == prefix]
        if exact:
            return exact[0]
        if len(runs) > 1:
            listed = ", ".join(run.id for run in runs[:5]) + (", …" if len(runs) > 5 else "")
            raise AmbiguousRunId(f"Run id {prefix} matches several runs: {listed}.", run_id=prefix)
        return runs[0]

    @store_operation("look up an args handle")
    def runs_with_args(self, prefix: str, limit: int = 1000) -> list[Run]:
        low = cas.normalize_prefix(prefix)
        if low is None:
            return []
        params = {"p_like": low + "%", "p_low": low, "p_high": cas.prefix_upper_bound(low), "p_limit": limit}
        with self._single.connect() as conn:
            return [run_from_row(row) for row in conn.execute(_with_args(), params)]

    @store_operation("find the run a chat event started")
    def run_for_event(self, origin_event: str) -> Run | None:
        query = (
            sa.select(RUNS).where(RUNS.c.origin_event == origin_event).order_by(RUNS.c.created_at).limit(1)
        )
        runs = self._runs(query)
        return runs[0] if runs else None

    @store_operation("list unfinished runs")
    def unfinished_runs(self, workflow: str, platform: str, conversation: str) -> list[Run]:
        query = (
            sa.select(RUNS)
            .where(
                RUNS.c.platform == platform,
                RUNS.c.conversation == conversation,
                RUNS.c.workflow == workflow,
                RUNS.c.status.in_(_UNFINISHED),
            )
            .order_by(RUNS.c.created_at.desc())
        )
        return self._runs(query)

    @store_operation("list recent runs")
    def recent_runs(
        self, *, platform: str | None = None, conversation: str | None = None, limit: int = 20
    ) -> list[Run]:
        query = sa.select(RUNS).order_by(RUNS.c.created_at.desc()).limit(limit)
        if platform is not None:
            query = query.where(RUNS.c.platform == platform)
        if conversation is not None:
            query = query.where(RUNS.c.conversation == conversation)
        return self._runs(query)

    @store_operation("list the runs of a thread")
    def runs_in_thread(self, platform: str, conversation: str, thread: str) -> list[Run]:
        query = (
            sa.select(RUNS)
            .where(RUNS.c.platform == platform, RUNS.c.conversation == conversation, RUNS.c.thread == thread)
            .order_by(RUNS.c.created_at.desc())
        )
        return self._runs(query)

    @store_operation("attach a thread to a run")
    def set_thread(self, run_id: str, thread: str) -> Run:
        """Also moves the run's gates to the thread, so replies there find them."""
        with self._engine.begin() as conn:
            row = conn.execute(
                sa.update(RUNS).where(RUNS.c.id == run_id).values(thread=thread).returning(*RUNS.c)
            ).first()
            if row is None:
                raise RunNotFound(f"No run has the id {run_id}.", run_id=run_id)
            conn.execute(sa.update(GATES).where(GATES.c.run_id == run_id).values(thread=thread))
        return run_from_row(row)

    @store_operation("change a run's status")
    def transition(
        self,
        run_id: str,
        to: RunStatus,
        *,
        actor: str,
        reason: str | None = None,
        expected_version: int | None = None,
        allowed_from: Iterable[RunStatus] | None = None,
        lease_owner: str | None = None,
        lease_seconds: float | None = None,
    ) -> Run:
        """CAS. Going to `running` takes the lease (`lease_owner`, default `actor`);
        leaving it clears the lease. `reason` replaces the previous one."""
        to = RunStatus(to)
        allowed = cas.allowed_sources(to, allowed_from)  # an illegal change fails before any SQL
        now = self._now()
        running = to is RunStatus.RUNNING
        conditions = [RUNS.c.id == run_id, RUNS.c.status.in_(sorted(s.value for s in allowed))]
        if expected_version is not None:
            conditions.append(RUNS.c.version == expected_version)
        statement = (
            sa.update(RUNS)
            .where(*conditions)
            .values(
                status=to.value,
                version=RUNS.c.version + 1,
                status_by=actor,
                reason=reason,
                updated_at=now,
                lease_owner=(lease_owner or actor) if running else None,
                lease_expires_at=now + (lease_seconds or DEFAULT_LEASE_SECONDS) if running else None,
            )
            .returning(*RUNS.c)
        )
        with self._single.begin() as conn:
            row = conn.execute(statement).first()
            if row is None:
                raise cas.lost_race(self._read_run(conn, run_id), to, allowed, expected_version)
        return run_from_row(row)

    # -- leases ---------------------------------------------------------------------------
    @store_operation("renew leases")
    def renew_leases(self, owner: str, lease_seconds: float) -> int:
        statement = (
            sa.update(RUNS)
            .where(RUNS.c.status == _RUNNING, RUNS.c.lease_owner == owner)
            .values(lease_expires_at=self._now() + lease_seconds)
        )
        with self._engine.begin() as conn:
            return int(conn.execute(statement).rowcount)

    @store_operation("list lapsed runs")
    def lapsed_runs(self, now: float | None = None) -> list[Run]:
        when = self._clock() if now is None else now
        query = (
            sa.select(RUNS)
            .where(RUNS.c.status == _RUNNING, RUNS.c.lease_expires_at < when)
            .order_by(RUNS.c.lease_expires_at)
        )
        return self._runs(query)

    @store_operation("list the runs of a lease owner")
    def runs_leased_by(self, owner_prefix: str) -> list[Run]:
        query = sa.select(RUNS).where(
            RUNS.c.status == _RUNNING, RUNS.c.lease_owner.startswith(owner_prefix, autoescape=True)
        )
        return self._runs(query)

    @store_operation("take over a run")
    def take_over(self, run: Run, new_owner: str, lease_seconds: float) -> Run:
        """CAS on the version *and* the lease as `run` shows them: if the owner renewed in
        between, it is alive and the take-over loses."""
        now = self._now()
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
        with self._single.begin() as conn:
            row = conn.execute(statement).first()
            if row is None:
                raise cas.lost_takeover(self._read_run(conn, run.id))
        return run_from_row(row)

    # -- what a `run` command reads and writes together (issue 8: fewer round trips) --------
    @store_operation("find the runs of a run command")
    def command_runs(
        self, origin_event: str, workflow: str, platform: str, conversation: str
    ) -> tuple[Run | None, list[Run]]:
        """`run_for_event` and `unfinished_runs` in one query (each side keeps its index)."""
        params = {
            "p_event": origin_event,
            "p_workflow": workflow,
            "p_platform": platform,
            "p_conversation": conversation,
        }
        with self._single.connect() as conn:
            rows = [(row.b_origin_event, run_from_row(row)) for row in conn.execute(_command_runs(), params)]
        started = [run for event, run in rows if event == origin_event]
        waiting = [
            run
            for _, run in rows
            if (run.platform, run.conversation, run.workflow) == (platform, conversation, workflow)
            and run.status.unfinished
        ]
        return (started[-1] if started else None), waiting

    @store_operation("create a run")
    def create_run_audited(
        self,
        *,
        args: bytes,
        audit_details: dict[str, Any],
        workflow: str,
        platform: str,
        conversation: str,
        thread: str | None,
        requester: str,
        resumed_from: str | None = None,
        status: RunStatus = RunStatus.PENDING,
        lease_owner: str | None = None,
        lease_seconds: float | None = None,
        origin_event: str | None = None,
    ) -> Run:
        """The args blob, the run and its `start` audit row: one statement with two
        data-modifying CTEs on PostgreSQL (one round trip, one commit), one transaction on
        SQLite. A run id collision fails all three, and the next attempt draws a new id."""
        digest = hashlib.sha256(args).hexdigest()
        values = self._new_run_values(
            workflow=workflow, platform=platform, conversation=conversation, thread=thread,
            requester=requester, args_digest=digest, resumed_from=resumed_from, status=status,
            lease_owner=lease_owner, lease_seconds=lease_seconds, origin_event=origin_event,
        )  # fmt: skip
        params: dict[str, Any] = {
            "b_digest": digest, "b_data": args, "b_size": len(args), "a_at": values["created_at"],
            "a_actor": requester, "a_action": "start", "a_details": audit_details,
        }  # fmt: skip
        values["id"] = ""  # drawn per attempt below
        statements = _create_run_audited(self.dialect, tuple(values))
        for attempt in range(_ID_ATTEMPTS):
            values["id"] = cas.new_run_id()
            params.update({f"r_{k}": v for k, v in values.items()})
            try:
                if self.dialect == "postgresql":
                    with self._single.begin() as conn:
                        conn.execute(statements[0], params)
                else:
                    with self._engine.begin() as conn:
                        for statement in statements:
                            conn.execute(statement, params)
                break
            except IntegrityError:  # a 48-bit id collision: draw again
                if attempt == _ID_ATTEMPTS - 1:
                    raise
        return run_from_row(values)


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


@functools.cache
def _command_runs() -> sa.Select[Any]:
    """`command_runs`' query (p_event, p_workflow, p_platform, p_conversation), built once."""
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
def _create_run_audited(dialect: str, run_columns: tuple[str, ...]) -> tuple[Any, ...]:
    """`create_run_audited`'s statements, built once per dialect with bound values (b_digest,
    b_data, b_size; r_<column> of the run's `run_columns`; a_at, a_actor, a_action,
    a_details): on PostgreSQL
    one INSERT of the audit row with the blob and the run as data-modifying CTEs; on SQLite
    the three INSERTs, in that order."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    blob = (
        insert(BLOBS)
        .on_conflict_do_nothing(index_elements=["digest"])
        .values(digest=sa.bindparam("b_digest"), data=sa.bindparam("b_data"), size=sa.bindparam("b_size"))
    )
    run = sa.insert(RUNS).values({c: sa.bindparam(f"r_{c}", type_=RUNS.c[c].type) for c in run_columns})
    entry = sa.insert(AUDIT).values(
        at=sa.bindparam("a_at"), actor=sa.bindparam("a_actor"), action=sa.bindparam("a_action"),
        run_id=sa.bindparam("r_id", type_=AUDIT.c.run_id.type),
        details=sa.bindparam("a_details", type_=AUDIT.c.details.type),
    )  # fmt: skip
    if dialect == "postgresql":
        return (entry.add_cte(blob.cte("new_blob"), run.cte("new_run")),)
    return blob, run, entry
