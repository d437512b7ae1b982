"""Rendering a step's templates without holding up the event loop.

`StepRenderer(limits)` renders the `bash`, `prompt`, `approval`, `when:` and `with:` templates
of steps. A template that can only read values (no loops, calls, filters or operators; see
`inline`) renders at once: its cost is bounded by the budget's output size. Anything else
renders in a worker thread under its budget (`core/workflows/render_budget.py`), so other
conversations are answered meanwhile; the budget ends a pathological render with one line.
Should a single operation still hold the thread past the deadline, the step fails anyway
(`RenderBudgetExceeded`) and the thread's own budget check ends it at its next step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, TypeVar

from core.errors import RenderBudgetExceeded
from core.workflows.bash_template import BashCommand, render_bash
from core.workflows.render_budget import RenderLimits
from core.workflows.templating import (
    condition_expression,
    evaluate_condition,
    parse_template,
    render_template,
    render_value,
)

T = TypeVar("T")
#: seconds past the budget's deadline before the engine stops waiting for the thread
GRACE = 1.0
_CHEAP = frozenset(
    {
        "Template",
        "Output",
        "TemplateData",
        "Name",
        "Getattr",
        "Getitem",
        "Const",
        "If",
        "Compare",
        "Operand",
        "And",
        "Or",
        "Not",
        "CondExpr",
    }
)


class StepRenderer:
    """Renders step templates within `limits`, off the event loop when they can compute."""

    def __init__(self, limits: RenderLimits | None = None) -> None:
        self.limits = limits or RenderLimits()

    async def text(self, source: str, context: Mapping[str, Any]) -> str:
        return await self._run(inline(source), lambda: render_template(source, context, limits=self.limits))

    async def command(self, source: str, context: Mapping[str, Any]) -> BashCommand:
        return await self._run(inline(source), lambda: render_bash(source, context, limits=self.limits))

    async def value(self, value: Any, context: Mapping[str, Any]) -> Any:
        return await self._run(False, lambda: render_value(value, context, limits=self.limits))

    async def condition(self, source: str, context: Mapping[str, Any]) -> bool:
        """A `when:` (true or false, else `TemplateRenderError`)."""
        expression = condition_expression(source)
        cheap = expression is not None and inline("{{" + expression + "}}")
        return await self._run(cheap, lambda: evaluate_condition(source, context, limits=self.limits))

    async def _run(self, at_once: bool, render: Callable[[], T]) -> T:
        if at_once:
            return render()
        try:
            return await asyncio.wait_for(asyncio.to_thread(render), self.limits.seconds + GRACE)
        except TimeoutError:
            raise RenderBudgetExceeded(
                f"template rendering took longer than {self.limits.seconds:g} s",
                hint="Simplify the template, or raise BATON_RENDER_TIMEOUT.",
            ) from None


@lru_cache(maxsize=1024)
def inline(source: str) -> bool:
    """True when `source` only reads and compares values: rendering it on the event loop costs
    no more than the size of what it outputs (which the budget bounds)."""
    if "{" not in source:
        return True
    try:
        tree = parse_template(source)
    except Exception:  # a syntax error is reported by the render itself
        return True
    return all(type(node).__name__ in _CHEAP for node in _walk(tree))


def _walk(node: Any) -> Any:
    yield node
    for child in node.iter_child_nodes():
        yield from _walk(child)
