"""A run's concurrency key and policy, from its workflow's `concurrency:` and its inputs
(DESIGN.md, "Concurrency and the queue"); the store admits or queues it (`core/store/admission.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.errors import TemplateRenderError
from core.store.records import Concurrency
from core.workflows.model import Workflow
from core.workflows.render_budget import RenderLimits
from core.workflows.templating import render_template


def concurrency_of(
    workflow: Workflow, args: Mapping[str, Any], *, limits: RenderLimits | None = None
) -> Concurrency | None:
    """The run's `Concurrency` (None: the workflow has no limit): `key` rendered from the
    inputs (default: the workflow's name)."""
    spec = workflow.concurrency
    if spec is None:
        return None
    key = workflow.name
    if spec.key is not None:
        key = render_template(spec.key, {"inputs": dict(args)}, limits=limits).strip()
        if not key:
            raise TemplateRenderError(
                f"workflow `{workflow.name}`: `concurrency.key` rendered empty for these inputs",
                hint="Give the inputs the key reads a value, or a default under `inputs:`.",
            )
    return Concurrency(key=key, limit=spec.limit, on_limit=spec.on_limit, max_queued=spec.max_queued,
                       hold_while_paused=spec.hold_while_paused)  # fmt: skip
