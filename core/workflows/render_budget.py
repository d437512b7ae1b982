"""A time, size and work budget for rendering one template, and the jinja2 environment that
charges it.

Workflow templates are written by authors and fed values typed in chat, so a render must
never hang or exhaust memory (`{% for i in range(100000) %}{% for j in range(100000) %}…`,
`{{ 'x' * 10**9 }}`, `{{ s.ljust(10**9) }}`). `BoundedEnvironment` is the sandboxed environment
of `core/workflows/templating.py` with these checks:

* `*`, `**` and `%` are intercepted (`call_binop`): a result that would exceed the output
  size is refused before it is computed. Interception also stops jinja2 from folding such
  constants when a template is compiled or analysed at load.
* every filter is wrapped to take the render context, so none is folded at compile time
  either; filters and method calls whose width or count arguments would make a huge string
  are refused first, and the text they process is charged to the work budget.
* the AST is rewritten at compile time (`bound`): every `{% for %}` iterates through
  `bounded_loop`, where each iteration counts, and literal text becomes a call that charges it.
* every `{{ }}` value and piece of literal text is charged to the output (also inside macros
  and loops, where jinja2 would otherwise buffer it unseen).
* the clock is read at each of those points; past `RenderLimits.seconds` the render stops.

Exceeding any limit raises `RenderBudgetExceeded` (one line, naming the setting). The engine
renders off the event loop (`core/engine/rendering.py`), so other conversations are answered
meanwhile; the budget is what ends the render.
"""

from __future__ import annotations

import contextvars
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.errors import RenderBudgetExceeded

if TYPE_CHECKING:
    from jinja2 import nodes
    from jinja2.runtime import Context

#: loop iterations and calls one render may make; far beyond any template that is not a mistake
MAX_STEPS = 1_000_000
#: text that filters and calls may process, as a multiple of the output size
WORK_FACTOR = 64
_HUGE_WIDTH_METHODS = frozenset({"ljust", "rjust", "center", "zfill", "expandtabs"})
_HUGE_WIDTH_FILTERS = frozenset({"center", "indent", "wordwrap", "slice", "batch", "truncate"})
_FORMAT_WIDTH = re.compile(r"%[-#0 +]*(\d+)?(?:\.(\d+))?")
_BRACE_WIDTH = re.compile(r"\{[^{}]*?:[^{}]*?(\d+)[^{}]*\}")


@dataclass(frozen=True)
class RenderLimits:
    """The budget of one render (settings `BATON_RENDER_TIMEOUT`, `BATON_RENDER_MAX_BYTES`)."""

    seconds: float = 2.0
    max_chars: int = 1_000_000
    max_steps: int = MAX_STEPS

    @property
    def max_work(self) -> int:
        return self.max_chars * WORK_FACTOR


@dataclass
class Budget:
    """What one render has used so far."""

    limits: RenderLimits
    deadline: float = field(init=False)
    chars: int = 0
    work: int = 0
    steps: int = 0

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.limits.seconds

    def step(self, count: int = 1) -> None:
        self.steps += count
        if self.steps > self.limits.max_steps:
            raise RenderBudgetExceeded(
                f"template rendering stopped after {self.limits.max_steps:,} loop iterations and calls"
            )
        self._clock()

    def output(self, chars: int) -> None:
        self.chars += chars
        if self.chars > self.limits.max_chars:
            raise _too_big(self.limits)
        self._clock()

    def process(self, chars: int) -> None:
        self.work += chars
        if self.work > self.limits.max_work:
            raise RenderBudgetExceeded(
                f"template rendering stopped: filters and calls processed more than "
                f"{self.limits.max_work:,} characters",
                hint="Simplify the template (BATON_RENDER_MAX_BYTES scales this limit).",
            )
        self._clock()

    def size(self, chars: int | float) -> None:
        """Refuse an operation whose result would hold `chars` characters (or items)."""
        if chars > self.limits.max_chars:
            raise _too_big(self.limits)

    def _clock(self) -> None:
        if time.monotonic() > self.deadline:
            raise RenderBudgetExceeded(
                f"template rendering took longer than {self.limits.seconds:g} s",
                hint="Simplify the template, or raise BATON_RENDER_TIMEOUT.",
            )


def _too_big(limits: RenderLimits) -> RenderBudgetExceeded:
    return RenderBudgetExceeded(
        f"template rendering stopped: the text would exceed {limits.max_chars:,} characters",
        hint="Render less (e.g. `| truncate(…)`), or raise BATON_RENDER_MAX_BYTES.",
    )


_current: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("baton_render_budget", default=None)


def current() -> Budget:
    """The budget of the render in progress (a default one outside `budgeted`)."""
    budget = _current.get()
    if budget is None:
        budget = Budget(RenderLimits())
        _current.set(budget)
    return budget


class budgeted:
    """`with budgeted(limits): …` renders under a fresh budget."""

    def __init__(self, limits: RenderLimits) -> None:
        self._budget = Budget(limits)
        self._token: contextvars.Token[Budget | None] | None = None

    def __enter__(self) -> Budget:
        self._token = _current.set(self._budget)
        return self._budget

    def __exit__(self, *exc: object) -> None:
        assert self._token is not None
        _current.reset(self._token)


# -- checks ---------------------------------------------------------------------------------


def _length(value: Any) -> int:
    return len(value) if isinstance(value, str | bytes | list | tuple | dict) else 0


def check_binop(budget: Budget, operator: str, left: Any, right: Any) -> None:
    budget.step()
    if operator == "*":
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, str | bytes | list | tuple) and isinstance(count, int):
                budget.size(len(seq) * max(count, 0))
    elif operator == "**":
        if isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0:
            budget.size(right * math.log2(abs(left)) / 8)  # bytes of the result
    elif operator == "%" and isinstance(left, str):
        _check_format(budget, left)


def _check_format(budget: Budget, fmt: str) -> None:
    for match in _FORMAT_WIDTH.finditer(fmt):
        for number in match.groups():
            if number:
                budget.size(int(number))
    for match in _BRACE_WIDTH.finditer(fmt):
        budget.size(int(match.group(1)))


def check_call(budget: Budget, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    budget.step()
    owner = getattr(func, "__self__", None)
    name = getattr(func, "__name__", "")
    values = (*args, *kwargs.values())
    if isinstance(owner, str):
        budget.process(len(owner))
        if name in _HUGE_WIDTH_METHODS:
            for value in values:
                if isinstance(value, int):
                    budget.size(value)
        elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
            hits = owner.count(args[0]) if args[0] else len(owner) + 1
            budget.size(len(owner) + hits * max(len(args[1]) - len(args[0]), 0))
        elif name in ("format", "format_map"):
            _check_format(budget, owner)
    for value in values:
        budget.process(_length(value))


def check_result(budget: Budget, result: Any) -> Any:
    budget.size(_length(result))
    return result


def wrap_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """`func` taking the render context (never folded at compile time), under the budget."""
    from jinja2 import pass_context
    from jinja2.utils import _PassArg

    passes = _PassArg.from_obj(func)

    @pass_context
    def bounded(context: Context, value: Any, *args: Any, **kwargs: Any) -> Any:
        budget = current()
        budget.step()
        budget.process(_length(value))
        if name in _HUGE_WIDTH_FILTERS:
            for arg in (*args, *kwargs.values()):
                if isinstance(arg, int):
                    budget.size(arg)
                elif isinstance(arg, str):
                    budget.size(len(arg) * max(_length(value), 1))
        if name == "replace" and len(args) >= 2:
            text, old, new = str(value), str(args[0]), str(args[1])
            hits = text.count(old) if old else len(text) + 1
            budget.size(len(text) + hits * max(len(new) - len(old), 0))
        if name == "format" and isinstance(value, str):
            _check_format(budget, value)
        if passes is _PassArg.context:
            result = func(context, value, *args, **kwargs)
        elif passes is _PassArg.eval_context:
            result = func(context.eval_ctx, value, *args, **kwargs)
        elif passes is _PassArg.environment:
            result = func(context.environment, value, *args, **kwargs)
        else:
            result = func(value, *args, **kwargs)
        return check_result(budget, result)

    bounded.__name__ = name
    return bounded


def bounded_loop(iterable: Iterable[Any]) -> Iterator[Any]:
    """What every `{% for %}` iterates over: each iteration counts."""
    budget = current()
    for item in iterable:
        budget.step()
        yield item


def literal(text: str) -> str:
    """What literal template text becomes: a value, so `finalize` charges it like any other."""
    return text


LOOP_GLOBAL = "_baton_loop"
LITERAL_GLOBAL = "_baton_text"


def bound(tree: nodes.Template) -> nodes.Template:
    """Rewrite `tree` so that rendering it charges the budget: every `{% for x in EXPR %}`
    iterates `_baton_loop(EXPR)`, every piece of literal text is `_baton_text('…')`."""
    from jinja2 import nodes

    for loop in tree.find_all(nodes.For):
        loop.iter = _call(LOOP_GLOBAL, loop.iter, lineno=loop.lineno)  # type: ignore[arg-type]
    for output in tree.find_all(nodes.Output):
        output.nodes = [
            _call(LITERAL_GLOBAL, nodes.Const(child.data), lineno=child.lineno)
            if isinstance(child, nodes.TemplateData)
            else child
            for child in output.nodes
        ]
    return tree


def _call(name: str, *args: nodes.Expr, lineno: int) -> nodes.Call:
    from jinja2 import nodes

    return nodes.Call(nodes.Name(name, "load", lineno=lineno), list(args), [], None, None, lineno=lineno)


def make_namespace() -> Callable[..., Any]:
    """jinja2's `namespace`, whose attribute writes are charged (the one way a loop keeps text)."""
    from jinja2.utils import Namespace

    class BoundedNamespace(Namespace):
        def __setitem__(self, name: str, value: Any) -> None:
            budget = current()
            budget.size(_length(value))
            budget.process(_length(value))
            super().__setitem__(name, value)

    return BoundedNamespace
