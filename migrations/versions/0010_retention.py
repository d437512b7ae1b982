"""Retention and recorded events: `run_pins` (runs `pin` exempts from pruning), `pruned_runs` (tombstones, so an
old button or link answers "pruned on …"), `blob_sweep` (blobs a pruned run referenced, deleted
once still unreferenced after a grace period) and an index on the journal's output digests (the
sweep's "is it still referenced?" without scanning the journal); `processed_events.payload`: a
chat message recorded before the platform is acknowledged, handled after a restart when its
claim was never finished.

Revision ID: 0010_retention
Revises: 0009
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_retention"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_pins",
        sa.Column("run_id", sa.String(12), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("pinned_by", sa.String(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
    )
    op.create_table(
        "pruned_runs",
        sa.Column("id", sa.String(12), primary_key=True),
        sa.Column("workflow", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("pruned_at", sa.Float(), nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.create_index(
            "ix_pruned_runs_id_prefix", "pruned_runs", ["id"], postgresql_ops={"id": "text_pattern_ops"}
        )
    op.create_table(
        "blob_sweep",
        sa.Column("digest", sa.String(), primary_key=True),
        sa.Column("marked_at", sa.Float(), nullable=False),
        sa.Column("artifact", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.create_index("ix_blob_sweep_marked", "blob_sweep", ["marked_at"])
    op.create_index("ix_journal_output", "journal", ["output_digest"])
    with op.batch_alter_table("processed_events") as batch:
        batch.add_column(sa.Column("payload", sa.JSON(), nullable=True))
    op.create_index("ix_processed_events_open", "processed_events", ["done", "at"])
    op.create_index(
        "ix_runs_resumed_from",
        "runs",
        ["resumed_from"],
        sqlite_where=sa.text("resumed_from IS NOT NULL"),
        postgresql_where=sa.text("resumed_from IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_runs_resumed_from", table_name="runs")
    op.drop_index("ix_processed_events_open", table_name="processed_events")
    with op.batch_alter_table("processed_events") as batch:
        batch.drop_column("payload")
    op.drop_index("ix_journal_output", table_name="journal")
    op.drop_index("ix_blob_sweep_marked", table_name="blob_sweep")
    op.drop_table("blob_sweep")
    op.drop_table("pruned_runs")
    op.drop_table("run_pins")
