"""Replay safety: which steps may run again, with which key, and what recovery does.

| class        | after a crash while in flight / on resume without a result          |
|--------------|----------------------------------------------------------------------|
| `pure`       | re-run                                                               |
| `idempotent` | re-run with the same idempotency key (stable across resumes)        |
| `unsafe`     | never re-run blindly: `ReplayUnsafe`, the run goes `needs_attention` |

Automatic `retry:` applies only to `pure` and `idempotent` steps. Everything here is pure.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum

from core.errors import ReplayUnsafe
from core.store.records import JournalEntry, ReplayClass
from core.workflows.model import Node, RetryPolicy, Workflow

_STRICTNESS = {ReplayClass.PURE: 0, ReplayClass.IDEMPOTENT: 1, ReplayClass.UNSAFE: 2}


class Recovery(StrEnum):
    RERUN = "rerun"  # pure: run it again
    RERUN_SAME_KEY = "rerun_same_key"  # idempotent: run again with the same idempotency key
    ATTENTION = "attention"  # unsafe: stop, a person resolves it


def stricter(a: ReplayClass, b: ReplayClass) -> ReplayClass:
    return a if _STRICTNESS[a] >= _STRICTNESS[b] else b


def replay_class(workflow: Workflow, node: Node, tool_class: ReplayClass | None = None) -> ReplayClass:
    """The class the engine applies to `node`.

    For a tool, the class its registration declares is a floor: a node (or the workflow
    default) may make it stricter, never looser; with no class in the YAML the tool's own
    applies. Other kinds: the node's, else the workflow default, else the kind's default.
    """
    if tool_class is None:
        return workflow.replay_class(node)
    declared = node.replay if node.replay is not None else workflow.defaults.replay
    return tool_class if declared is None else stricter(declared, tool_class)


def idempotency_key(lineage_root: str, node_id: str, key: str) -> str:
    """Stable across resumes of the same run and across its lineage (`--resume-from`)."""
    material = f"{lineage_root}\x00{node_id}\x00{key}".encode()
    return hashlib.sha256(material).hexdigest()[:32]


def recovery_for(cls: ReplayClass) -> Recovery:
    if cls is ReplayClass.PURE:
        return Recovery.RERUN
    if cls is ReplayClass.IDEMPOTENT:
        return Recovery.RERUN_SAME_KEY
    return Recovery.ATTENTION


def attempts_allowed(cls: ReplayClass, policy: RetryPolicy | None) -> int:
    """How many attempts a step gets in one go: `retry:` counts only for pure/idempotent."""
    if policy is None or cls is ReplayClass.UNSAFE:
        return 1
    return policy.attempts


def backoff_seconds(policy: RetryPolicy | None, attempt: int) -> float:
    """Delay before attempt `attempt + 1` (attempt counts from 1): backoff doubled each time."""
    if policy is None:
        return 0.0
    return float(policy.backoff * (2 ** (attempt - 1)))


def replay_unsafe(run_id: str, entry: JournalEntry) -> ReplayUnsafe:
    """The error recorded when an unsafe step was in flight and left no result."""
    return ReplayUnsafe(
        f"step `{entry.node_id}` may have run (started, attempt {entry.attempt}, no result recorded);"
        " Baton will not run it again blindly",
        node_id=entry.node_id,
        run_id=run_id,
        status="needs_attention",
    )
