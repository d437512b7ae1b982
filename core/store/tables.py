"""SQLModel tables of the run store. They never leave `core/store/`.

The repository reads and writes them through SQLAlchemy Core (`RUNS`, `JOURNAL`, ... are
the plain `Table` objects) and converts rows to the frozen records of `records.py`.
The alembic revisions (`migrations/versions/`: `0001_initial.py`, `0002_gate_cache_key.py`,
`0003_platform_state.py`, `0004_event_handling.py`, `0005_origin_event_partial_index.py`,
`0006_runs_args_digest_index.py`, `0007_gate_votes_deadlines.py`)
create exactly this schema; `tests/integration/store/test_migrations.py` checks they agree.

Statuses are stored as short strings (the `StrEnum` values), timestamps as float
epoch seconds, JSON documents with the portable `JSON` type.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

#: Every Baton table; alembic compares against it.
metadata = SQLModel.metadata


def _text(length: int | None = None, **kw: Any) -> Any:
    return Field(sa_column=sa.Column(sa.String(length), **kw))


def _json(**kw: Any) -> Any:
    return Field(sa_column=sa.Column(sa.JSON, nullable=False, **kw))


class RunRow(SQLModel, table=True):
    __tablename__ = "runs"
    __table_args__ = (
        # the fresh-run prompt: unfinished runs of a workflow in a conversation, newest first
        sa.Index("ix_runs_unfinished", "platform", "conversation", "workflow", "status", "created_at"),
        sa.Index("ix_runs_thread", "platform", "conversation", "thread"),
        sa.Index("ix_runs_created", "created_at"),
        # `--args @handle`: the runs whose args digest starts with a prefix (revision 0006)
        sa.Index("ix_runs_args_digest", "args_digest"),
        # lease recovery: running runs whose lease lapsed
        sa.Index("ix_runs_lease", "status", "lease_expires_at"),
        # a redelivered `run` command finds the run its first delivery started (revision 0004);
        # only runs chat commands started: most have none, and SQLite's planner, told so by
        # ANALYZE, scanned the table instead of using a full index (revision 0005)
        sa.Index(
            "ix_runs_origin_event",
            "origin_event",
            postgresql_where=sa.text("origin_event IS NOT NULL"),
            sqlite_where=sa.text("origin_event IS NOT NULL"),
        ),
        # `LIKE 'abc%'` prefix lookups; SQLite uses the primary key with a range instead
        sa.Index("ix_runs_id_prefix", "id", postgresql_ops={"id": "text_pattern_ops"}).ddl_if(
            dialect="postgresql"
        ),
    )

    id: str = Field(sa_column=sa.Column(sa.String(12), primary_key=True))
    workflow: str = _text(nullable=False)
    platform: str = _text(nullable=False)
    conversation: str = _text(nullable=False)
    thread: str | None = _text(nullable=True)
    requester: str = _text(nullable=False)
    args_digest: str = _text(nullable=False)
    status: str = _text(nullable=False)
    version: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    created_at: float = Field(sa_column=sa.Column(sa.Float, nullable=False))
    updated_at: float = Field(sa_column=sa.Column(sa.Float, nullable=False))
    resumed_from: str | None = _text(12, nullable=True)
    lease_owner: str | None = _text(nullable=True)
    lease_expires_at: float | None = Field(default=None, sa_column=sa.Column(sa.Float, nullable=True))
    status_by: str | None = _text(nullable=True)
    reason: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    # "<platform>:<event_id>" of the chat command that started the run (revision 0004)
    origin_event: str | None = _text(nullable=True)


class JournalRow(SQLModel, table=True):
    __tablename__ = "journal"
    __table_args__ = (sa.Index("ix_journal_run", "run_id", "id"),)

    id: int | None = Field(
        default=None, sa_column=sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    )
    run_id: str = Field(
        sa_column=sa.Column(sa.String(12), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False)
    )
    node_id: str = _text(nullable=False)
    attempt: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    cache_key: str = _text(nullable=False)
    components: dict[str, Any] = _json()
    status: str = _text(nullable=False)
    started_at: float = Field(sa_column=sa.Column(sa.Float, nullable=False))
    finished_at: float | None = Field(default=None, sa_column=sa.Column(sa.Float, nullable=True))
    output_digest: str | None = _text(nullable=True)
    error: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    idempotency_key: str | None = _text(nullable=True)
    tokens_in: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    tokens_out: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    artifacts: dict[str, str] = _json()
    cached_from: str | None = _text(12, nullable=True)
    invalidated_by: str | None = _text(nullable=True)


class GateRow(SQLModel, table=True):
    """An approval gate. Platform, conversation and thread are copied from the run (and
    kept in step by `set_thread`) so that waiting gates are found with one index."""

    __tablename__ = "gates"
    __table_args__ = (sa.Index("ix_gates_where", "platform", "conversation", "thread", "status"),)

    run_id: str = Field(
        sa_column=sa.Column(sa.String(12), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    )
    node_id: str = Field(sa_column=sa.Column(sa.String(), primary_key=True))
    prompt: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    status: str = _text(nullable=False)
    created_at: float = Field(sa_column=sa.Column(sa.Float, nullable=False))
    platform: str = _text(nullable=False)
    conversation: str = _text(nullable=False)
    thread: str | None = _text(nullable=True)
    decided_by: str | None = _text(nullable=True)
    comment: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    decided_at: float | None = Field(default=None, sa_column=sa.Column(sa.Float, nullable=True))
    # the approval node's cache key the decision answers (revision 0002); "" for older gates
    cache_key: str = Field(default="", sa_column=sa.Column(sa.String(), nullable=False, server_default=""))
    # the choice decided and what it carries (values, approvers): revision 0007
    decision: str | None = _text(nullable=True)
    outcome: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON, nullable=True))


class GateVoteRow(SQLModel, table=True):
    """One person's ballot on one opening of a gate (revision 0007). The primary key is the
    compare-and-swap: a second identical ballot inserts nothing, so it counts once."""

    __tablename__ = "gate_votes"

    run_id: str = Field(
        sa_column=sa.Column(sa.String(12), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    )
    node_id: str = Field(sa_column=sa.Column(sa.String(), primary_key=True))
    opened_at: float = Field(sa_column=sa.Column(sa.Float, primary_key=True))
    user: str = Field(sa_column=sa.Column(sa.String(), primary_key=True))
    ballot: str = Field(sa_column=sa.Column(sa.String(8), primary_key=True))  # vote | reject
    choice: str = _text(nullable=False)
    at: float = Field(sa_column=sa.Column(sa.Float, nullable=False))
    comment: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    vals: dict[str, Any] = _json()


class GateDeadlineRow(SQLModel, table=True):
    """A durable deadline of one opening of a gate (revision 0007): reminders, escalation,
    timeout. Firing is a compare-and-swap on `fired_at IS NULL`, so one replica fires it."""

    __tablename__ = "gate_deadlines"
    __table_args__ = (sa.Index("ix_gate_deadlines_due", "fired_at", "due_at"),)

    run_id: str = Field(
        sa_column=sa.Column(sa.String(12), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    )
    node_id: str = Field(sa_column=sa.Column(sa.String(), primary_key=True))
    opened_at: float = Field(sa_column=sa.Column(sa.Float, primary_key=True))
    name: str = Field(sa_column=sa.Column(sa.String(16), primary_key=True))
    due_at: float = Field(sa_column=sa.Column(sa.Float, nullable=False))
    fired_at: float | None = Field(default=None, sa_column=sa.Column(sa.Float, nullable=True))
    fired_by: str | None = _text(nullable=True)


class AuditRow(SQLModel, table=True):
    __tablename__ = "audit_events"
    __table_args__ = (sa.Index("ix_audit_run", "run_id", "id"),)

    id: int | None = Field(
        default=None, sa_column=sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    )
    at: float = Field(sa_column=sa.Column(sa.Float, nullable=False))
    actor: str = _text(nullable=False)
    action: str = _text(nullable=False)
    run_id: str | None = _text(12, nullable=True)
    details: dict[str, Any] = _json()


class BlobRow(SQLModel, table=True):
    """Content-addressed bytes: args documents, node outputs, artifacts."""

    __tablename__ = "blobs"
    __table_args__ = (
        sa.Index("ix_blobs_digest_prefix", "digest", postgresql_ops={"digest": "text_pattern_ops"}).ddl_if(
            dialect="postgresql"
        ),
    )

    digest: str = Field(sa_column=sa.Column(sa.String(), primary_key=True))
    data: bytes = Field(sa_column=sa.Column(sa.LargeBinary, nullable=False))
    size: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))


class ProcessedEventRow(SQLModel, table=True):
    """Incoming platform event ids claimed (Slack retries, Discord redeliveries). `done` is
    false while the claimer handles it; a claim not done after a while may be re-claimed."""

    __tablename__ = "processed_events"

    platform: str = Field(sa_column=sa.Column(sa.String(), primary_key=True))
    event_id: str = Field(sa_column=sa.Column(sa.String(), primary_key=True))
    at: float = Field(sa_column=sa.Column(sa.Float, nullable=False))
    # revision 0004; rows from before it were handled
    done: bool = Field(
        default=True, sa_column=sa.Column(sa.Boolean, nullable=False, server_default=sa.true())
    )


class PlatformStateRow(SQLModel, table=True):
    """Small values a chat adapter keeps across restarts (a progress message id, …)."""

    __tablename__ = "platform_state"

    platform: str = Field(sa_column=sa.Column(sa.String(), primary_key=True))
    key: str = Field(sa_column=sa.Column(sa.String(), primary_key=True))
    value: str = Field(sa_column=sa.Column(sa.Text(), nullable=False))
    at: float = Field(sa_column=sa.Column(sa.Float, nullable=False))


RUNS: sa.Table = RunRow.__table__  # type: ignore[attr-defined]
JOURNAL: sa.Table = JournalRow.__table__  # type: ignore[attr-defined]
GATES: sa.Table = GateRow.__table__  # type: ignore[attr-defined]
AUDIT: sa.Table = AuditRow.__table__  # type: ignore[attr-defined]
BLOBS: sa.Table = BlobRow.__table__  # type: ignore[attr-defined]
PROCESSED_EVENTS: sa.Table = ProcessedEventRow.__table__  # type: ignore[attr-defined]
PLATFORM_STATE: sa.Table = PlatformStateRow.__table__  # type: ignore[attr-defined]
GATE_VOTES: sa.Table = GateVoteRow.__table__  # type: ignore[attr-defined]
GATE_DEADLINES: sa.Table = GateDeadlineRow.__table__  # type: ignore[attr-defined]
