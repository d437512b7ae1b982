"""`ix_runs_parent` covers only runs a `workflow:` step started (`parent_run IS NOT NULL`).

Most runs have no parent, and SQLite's statistics (ANALYZE) count all of them as one value of
the full index: its planner then took `parent_run IN (…)` for most of the table and scanned it
(`status` of a run with 1,000,000 runs of history: 334 ms instead of 0.9 ms). Revision 0015
worked around it with `INDEXED BY` in a hand-written statement. The partial index holds only
the rows that search can match; both databases use it for `parent_run IN (…)` and
`parent_run = …` (which imply `IS NOT NULL`), so the search is one ordinary select again.

Revision ID: 0016_runs_parent_partial
Revises: 0015_subruns
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_runs_parent_partial"
down_revision: str | None = "0015_subruns"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_HAS_PARENT = "parent_run IS NOT NULL"


def upgrade() -> None:
    op.drop_index("ix_runs_parent", table_name="runs")
    op.create_index(
        "ix_runs_parent",
        "runs",
        ["parent_run", "parent_node"],
        postgresql_where=sa.text(_HAS_PARENT),
        sqlite_where=sa.text(_HAS_PARENT),
    )


def downgrade() -> None:
    op.drop_index("ix_runs_parent", table_name="runs")
    op.create_index("ix_runs_parent", "runs", ["parent_run", "parent_node"])
