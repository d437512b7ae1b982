"""`gate_votes`, `gate_deadlines`, and a gate's `decision` and `outcome`: approval policies
(quorum, deadlines, choices, forms).

A vote is one row per (gate opening, person, ballot); its primary key is the compare-and-
swap that makes a repeated vote count once and two people voting at once both count. A
deadline is one row per (gate opening, name) that one replica fires (`fired_at IS NULL`).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("gates", sa.Column("decision", sa.String(), nullable=True))
    op.add_column("gates", sa.Column("outcome", sa.JSON(), nullable=True))
    op.create_table(
        "gate_votes",
        sa.Column("run_id", sa.String(12), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("node_id", sa.String(), primary_key=True),
        sa.Column("opened_at", sa.Float(), primary_key=True),
        sa.Column("user", sa.String(), primary_key=True),
        sa.Column("ballot", sa.String(8), primary_key=True),
        sa.Column("choice", sa.String(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("vals", sa.JSON(), nullable=False),
    )
    op.create_table(
        "gate_deadlines",
        sa.Column("run_id", sa.String(12), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("node_id", sa.String(), primary_key=True),
        sa.Column("opened_at", sa.Float(), primary_key=True),
        sa.Column("name", sa.String(16), primary_key=True),
        sa.Column("due_at", sa.Float(), nullable=False),
        sa.Column("fired_at", sa.Float(), nullable=True),
        sa.Column("fired_by", sa.String(), nullable=True),
    )
    op.create_index("ix_gate_deadlines_due", "gate_deadlines", ["fired_at", "due_at"])


def downgrade() -> None:
    op.drop_index("ix_gate_deadlines_due", table_name="gate_deadlines")
    op.drop_table("gate_deadlines")
    op.drop_table("gate_votes")
    with op.batch_alter_table("gates") as batch:
        batch.drop_column("outcome")
        batch.drop_column("decision")
