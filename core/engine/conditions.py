"""`when:`: whether a step runs or is skipped, and how a skip is recorded.

A node whose `when:` is false is *skipped*: the executor journals it as completed with the
output `SKIP_BYTES` (whose digest `SKIP_DIGEST` is its output digest) and the reason noted
beside its key (`KeyNotes.skipped`). So a skip is part of the key of what follows: a dependent's
upstream component is the skip's digest, never a real output's, and a resume whose
condition now holds runs the dependents again. A dependent of a skipped node is skipped too,
unless it has a `when:` of its own, which then decides (it can read `nodes.<id>.skipped`).
Templates see a skipped node as `{"output": None, "skipped": True}`.

The condition is part of the node's definition (`cache_key.definition_of`), and the inputs it
reads are among the node's inputs, so an unchanged condition over unchanged values is cached
like any result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.engine.cache_key import digest_bytes
from core.engine.prepared import PreparedNode
from core.engine.rendering import StepRenderer

#: the recorded output of a skipped node (a NUL-framed marker no step prints by accident)
SKIP_BYTES = b"\x00baton:skipped\x00"
SKIP_DIGEST = digest_bytes(SKIP_BYTES)


def skipped_value() -> dict[str, Any]:
    """A skipped node as templates see it."""
    return {"output": None, "skipped": True}


def skipped_dependency(pn: PreparedNode, digests: Mapping[str, str]) -> str | None:
    """The first dependency of `pn` that was skipped, or None."""
    return next((dep for dep in pn.deps if digests.get(dep) == SKIP_DIGEST), None)


async def why_skipped(
    pn: PreparedNode, digests: Mapping[str, str], renderer: StepRenderer, context: Mapping[str, Any]
) -> str | None:
    """Why `pn` is skipped (its `when:` is false, or a dependency was skipped and it has no
    `when:` of its own), or None when it runs. Raises `TemplateRenderError` for a condition
    that cannot be evaluated (the step fails: a condition is never guessed)."""
    when = pn.node.when
    if when is None:
        dep = skipped_dependency(pn, digests)
        return f"`{dep}` was skipped" if dep is not None else None
    if await renderer.condition(when, context):
        return None
    return f"`when: {when.strip()}` is false"
