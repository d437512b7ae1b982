"""Delete the run pages' signing key from `platform_state`: it now lives in a 0600 key file of
the data directory, or is derived from `BATON_WEB_SECRET` (core/signing_key.py). A key
that sat in the database could be read by anything that reads the database (a step running
`sqlite3`), so it is dropped, not moved: links made before the upgrade stop working.

Revision ID: 0011_signing_key_row
Revises: 0010_retention
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_signing_key_row"
down_revision: str | None = "0010_retention"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        sa.text("DELETE FROM platform_state WHERE platform = 'baton' AND key = 'web_signing_key'")
    )


def downgrade() -> None:
    pass  # the key is not put back: the old version makes a new one when it needs one
