"""How safe a step is to run again (DESIGN.md, Replay classes): `pure`, `idempotent` or `unsafe`.

Its own module, importing nothing, so that the sandboxed tool runner (`core/engine/tool_runner.py`)
can read a tool's `replay=` without creating the store's records (`core/store/records.py`
re-exports it).
"""

from __future__ import annotations

from enum import StrEnum


class ReplayClass(StrEnum):
    PURE = "pure"
    IDEMPOTENT = "idempotent"
    UNSAFE = "unsafe"
