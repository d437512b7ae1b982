"""Concurrency limits with a visible queue: a run's key, policy and queue time, and one lock
row per key (what admission locks first on PostgreSQL).

Revision ID: 0012_queue
Revises: 0011_signing_key_row
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_queue"
down_revision: str | None = "0011_signing_key_row"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("concurrency_key", sa.String(), nullable=True))
    op.add_column("runs", sa.Column("concurrency", sa.JSON(), nullable=True))
    op.add_column("runs", sa.Column("queued_at", sa.Float(), nullable=True))
    op.create_index("ix_runs_concurrency", "runs", ["concurrency_key", "status", "queued_at"])
    op.create_table(
        "concurrency_locks",
        sa.Column("key", sa.String(), primary_key=True),
        sa.Column("touched_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("concurrency_locks")
    op.drop_index("ix_runs_concurrency", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("queued_at")
        batch.drop_column("concurrency")
        batch.drop_column("concurrency_key")
