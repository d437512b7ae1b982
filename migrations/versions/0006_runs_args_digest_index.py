"""`ix_runs_args_digest`: an args handle (`--args @3f9a`) resolves among the args of runs
the user may view, so the handle is looked up in `runs.args_digest` (a range scan of this
index) rather than among all blobs, which also hold step outputs.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_runs_args_digest", "runs", ["args_digest"])


def downgrade() -> None:
    op.drop_index("ix_runs_args_digest", table_name="runs")
