"""Initial schema: runs, journal, gates, audit events, blobs, processed events.

Revision ID: 0001
Revises:
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _is_postgres() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=12), nullable=False),
        sa.Column("workflow", sa.String(), nullable=False),
        sa.Column("platform", sa.String(), nullable=False),
        sa.Column("conversation", sa.String(), nullable=False),
        sa.Column("thread", sa.String(), nullable=True),
        sa.Column("requester", sa.String(), nullable=False),
        sa.Column("args_digest", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("resumed_from", sa.String(length=12), nullable=True),
        sa.Column("lease_owner", sa.String(), nullable=True),
        sa.Column("lease_expires_at", sa.Float(), nullable=True),
        sa.Column("status_by", sa.String(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_runs_unfinished", "runs", ["platform", "conversation", "workflow", "status", "created_at"]
    )
    op.create_index("ix_runs_thread", "runs", ["platform", "conversation", "thread"])
    op.create_index("ix_runs_created", "runs", ["created_at"])
    op.create_index("ix_runs_lease", "runs", ["status", "lease_expires_at"])

    op.create_table(
        "journal",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=12), nullable=False),
        sa.Column("node_id", sa.String(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("cache_key", sa.String(), nullable=False),
        sa.Column("components", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.Column("output_digest", sa.String(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("idempotency_key", sa.String(), nullable=True),
        sa.Column("tokens_in", sa.Integer(), nullable=False),
        sa.Column("tokens_out", sa.Integer(), nullable=False),
        sa.Column("artifacts", sa.JSON(), nullable=False),
        sa.Column("cached_from", sa.String(length=12), nullable=True),
        sa.Column("invalidated_by", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_journal_run", "journal", ["run_id", "id"])

    op.create_table(
        "gates",
        sa.Column("run_id", sa.String(length=12), nullable=False),
        sa.Column("node_id", sa.String(), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("platform", sa.String(), nullable=False),
        sa.Column("conversation", sa.String(), nullable=False),
        sa.Column("thread", sa.String(), nullable=True),
        sa.Column("decided_by", sa.String(), nullable=True),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("decided_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "node_id"),
    )
    op.create_index("ix_gates_where", "gates", ["platform", "conversation", "thread", "status"])

    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(length=12), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_audit_run", "audit_events", ["run_id", "id"])

    op.create_table(
        "blobs",
        sa.Column("digest", sa.String(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("digest"),
    )

    op.create_table(
        "processed_events",
        sa.Column("platform", sa.String(), nullable=False),
        sa.Column("event_id", sa.String(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("platform", "event_id"),
    )

    if _is_postgres():
        # `LIKE 'abc%'` prefix lookups under any database collation (SQLite uses the
        # primary key with a range condition instead)
        op.create_index("ix_runs_id_prefix", "runs", ["id"], postgresql_ops={"id": "text_pattern_ops"})
        op.create_index(
            "ix_blobs_digest_prefix", "blobs", ["digest"], postgresql_ops={"digest": "text_pattern_ops"}
        )


def downgrade() -> None:
    for table in ("processed_events", "blobs", "audit_events", "gates", "journal", "runs"):
        op.drop_table(table)
