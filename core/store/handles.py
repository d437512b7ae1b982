"""Args handles (`args:3f9a1c2b`): the short form of a run's args digest.

A handle resolves only among the args of runs (`Store.runs_with_args`), never among other
blobs such as step outputs; which of those runs a user may use is decided by the commands
layer (`core/commands/actions.py`), so an unknown and a forbidden handle get the same answer.
"""

from __future__ import annotations

from core.store.cas import normalize_prefix

HANDLE_PREFIX = "args:"


def handle_prefix(text: str) -> str | None:
    """`args:3F9A1C2B`, `3f9a1c2b` -> `3f9a1c2b`; None when it cannot be a digest prefix."""
    stripped = text.strip()
    if stripped.lower().startswith(HANDLE_PREFIX):
        stripped = stripped[len(HANDLE_PREFIX) :]
    return normalize_prefix(stripped)
