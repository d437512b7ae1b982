"""Gates remember the cache key of the question they answer.

A decision is valid for one version of an approval step: when the step's definition or
its upstream outputs change, the run must ask again. Existing gates get "" (unknown); the
engine then compares their stored prompt with the current one instead.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("gates", sa.Column("cache_key", sa.String(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("gates") as batch:
        batch.drop_column("cache_key")
