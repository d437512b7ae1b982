"""`ix_runs_origin_event` covers only runs started by a chat command (`origin_event IS NOT
NULL`). Most runs have none (runs from before revision 0004, runs started by the engine or
an API), so a full index on the column looks unselective to SQLite's planner once ANALYZE
has run: with 100,000 such runs it scanned the whole table (≈ 30 ms) for every `run`
command's redelivery check instead of one index lookup (≈ 0.02 ms). The partial index holds
only the rows that query can match, and both databases use it for `origin_event = :value`.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_HAS_EVENT = "origin_event IS NOT NULL"


def upgrade() -> None:
    op.drop_index("ix_runs_origin_event", table_name="runs")
    op.create_index(
        "ix_runs_origin_event",
        "runs",
        ["origin_event"],
        postgresql_where=sa.text(_HAS_EVENT),
        sqlite_where=sa.text(_HAS_EVENT),
    )


def downgrade() -> None:
    op.drop_index("ix_runs_origin_event", table_name="runs")
    op.create_index("ix_runs_origin_event", "runs", ["origin_event"])
