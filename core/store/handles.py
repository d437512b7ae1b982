"""Resolving short args handles (`args:3f9a1c2b`) to full blob digests."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from core.errors import UsageError
from core.store.cas import normalize_prefix, prefix_upper_bound
from core.store.tables import BLOBS

HANDLE_PREFIX = "args:"


def handle_prefix(text: str) -> str | None:
    """`args:3F9A1C2B`, `3f9a1c2b` -> `3f9a1c2b`; None when it cannot be a digest prefix."""
    stripped = text.strip()
    if stripped.lower().startswith(HANDLE_PREFIX):
        stripped = stripped[len(HANDLE_PREFIX) :]
    return normalize_prefix(stripped)


def resolve_digest_prefix(engine: Engine, text: str) -> str:
    """The one blob digest starting with the handle's prefix; UsageError otherwise."""
    prefix = handle_prefix(text)
    if prefix is None:
        raise UsageError(
            f"{text.strip()!r} is not an args handle.",
            hint="A handle looks like args:3f9a1c2b; `/workflow args <run>` shows a run's handle.",
        )
    query = (
        sa.select(BLOBS.c.digest)
        .where(
            BLOBS.c.digest.like(prefix + "%"),
            BLOBS.c.digest >= prefix,
            BLOBS.c.digest < prefix_upper_bound(prefix),
        )
        .limit(2)
    )
    with engine.connect() as conn:
        digests = list(conn.execute(query).scalars())
    if not digests:
        raise UsageError(
            f"No stored args match args:{prefix}.",
            hint="`/workflow args <run>` shows the handle of a run's args.",
        )
    if len(digests) > 1:
        raise UsageError(
            f"args:{prefix} matches several stored args.", hint="Type more characters of the handle."
        )
    return str(digests[0])
