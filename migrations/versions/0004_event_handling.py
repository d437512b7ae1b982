"""An incoming event is done only once it was handled: `processed_events.done` (existing
rows count as done), so a claim whose replica died can be re-claimed after a while; and a
run remembers the chat event that started it (`runs.origin_event`), so a redelivered
`run` command answers with that run instead of starting a second one.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("processed_events") as batch:
        batch.add_column(sa.Column("done", sa.Boolean(), nullable=False, server_default=sa.true()))
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("origin_event", sa.String(), nullable=True))
    op.create_index("ix_runs_origin_event", "runs", ["origin_event"])


def downgrade() -> None:
    op.drop_index("ix_runs_origin_event", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("origin_event")
    with op.batch_alter_table("processed_events") as batch:
        batch.drop_column("done")
