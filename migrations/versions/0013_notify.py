"""Notifications: `subscriptions` (conversations told about workflows' events) and the
outbox's `dedupe` key (one notice per place, run and event).

Revision ID: 0013_notify
Revises: 0012_queue
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_notify"
down_revision: str | None = "0012_queue"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "subscriptions",
        sa.Column("platform", sa.String(), primary_key=True),
        sa.Column("conversation", sa.String(), primary_key=True),
        sa.Column("workflow", sa.String(), primary_key=True),
        sa.Column("event", sa.String(32), primary_key=True),
        sa.Column("created_by", sa.String(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_subscriptions_workflow", "subscriptions", ["workflow", "event"])
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("dedupe", sa.String(), nullable=True))
    op.create_index("ux_outbox_dedupe", "outbox", ["dedupe"], unique=True)


def downgrade() -> None:
    op.drop_index("ux_outbox_dedupe", table_name="outbox")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("dedupe")
    op.drop_index("ix_subscriptions_workflow", table_name="subscriptions")
    op.drop_table("subscriptions")
