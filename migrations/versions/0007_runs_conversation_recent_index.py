"""`ix_runs_recent`: `runs` lists the 20 newest runs of a conversation. With only
`ix_runs_thread` (platform, conversation, thread), SQLite found every run of the conversation
and sorted them (about 2,000 with a million runs of history); this index gives them newest
first and stops after 20.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_runs_recent", "runs", ["platform", "conversation", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_runs_recent", table_name="runs")
