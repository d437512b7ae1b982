"""`schedules` and `schedule_fires`; runs record `started_by` and `scheduled_for`.

A fire is keyed (schedule, due time): the row is written with the run it starts, so two
replicas, a restart or a repeated tick start one run per fire.

Revision ID: 0014_schedules
Revises: 0013_notify
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_schedules"
down_revision: str | None = "0013_notify"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("started_by", sa.String(), nullable=True))
        batch.add_column(sa.Column("scheduled_for", sa.Float(), nullable=True))
    op.create_index("ix_runs_started_by", "runs", ["started_by", "status"])
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("workflow", sa.String(), nullable=False),
        sa.Column("source", sa.String(8), nullable=False),
        sa.Column("cron", sa.String(), nullable=True),
        sa.Column("every", sa.Float(), nullable=True),
        sa.Column("timezone", sa.String(), nullable=False),
        sa.Column("args", sa.JSON(), nullable=False),
        sa.Column("overlap", sa.String(16), nullable=False),
        sa.Column("catchup", sa.String(8), nullable=False),
        sa.Column("catchup_window", sa.Float(), nullable=False),
        sa.Column("platform", sa.String(), nullable=False),
        sa.Column("conversation", sa.String(), nullable=False),
        sa.Column("principal", sa.String(), nullable=False),
        sa.Column("owner", sa.String(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("evaluated_until", sa.Float(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("paused_by", sa.String(), nullable=True),
    )
    op.create_table(
        "schedule_fires",
        sa.Column("schedule_id", sa.String(), primary_key=True),
        sa.Column("due_at", sa.Float(), primary_key=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("by", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(12), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
    )
    op.create_index("ix_schedule_fires_recent", "schedule_fires", ["schedule_id", "at"])


def downgrade() -> None:
    op.drop_index("ix_schedule_fires_recent", table_name="schedule_fires")
    op.drop_table("schedule_fires")
    op.drop_table("schedules")
    op.drop_index("ix_runs_started_by", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("scheduled_for")
        batch.drop_column("started_by")
