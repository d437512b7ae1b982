"""Sub-runs: a run records the run and `workflow:` step that started it.

A `workflow:` step starts a child run (`started_by: parent:<run>`); the child row names its
parent run and step (`parent_run`, `parent_node`, an item `notes[3]` under `map:`, and the step's cache key
when it started the child, `parent_key`), so a
resumed parent finds its child again and a cancelled parent cancels it.

Revision ID: 0015_subruns
Revises: 0014_schedules
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_subruns"
down_revision: str | None = "0014_schedules"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("parent_run", sa.String(12), nullable=True))
        batch.add_column(sa.Column("parent_node", sa.String(), nullable=True))
        batch.add_column(sa.Column("parent_key", sa.String(), nullable=True))
    op.create_index("ix_runs_parent", "runs", ["parent_run", "parent_node"])


def downgrade() -> None:
    op.drop_index("ix_runs_parent", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("parent_key")
        batch.drop_column("parent_node")
        batch.drop_column("parent_run")
