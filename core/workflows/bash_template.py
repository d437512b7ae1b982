"""`bash:` commands: every `{{ }}` becomes an environment variable reference, never text.

    plan = bash_plan(source)                 # per source, cached: forms or refusals, with lines
    command = render_bash(source, context)   # BashCommand(text, variables)

The command `echo "dq: {{ inputs.message }}"` runs as `echo "dq: ${BATON_ARG_1}"` with
`BATON_ARG_1` set to the message in the step's environment. Bash does not parse the result of
an expansion again, so whatever was typed reaches the program as text. Where the author put a
placeholder decides its form (`core/workflows/shell_context.py`); places where the value would
not arrive exactly, or would be run as code, are load errors naming the line and the fix.

The template is read as jinja2 sees it: literal text and `{{ }}` in order, `{% if %}` branches
and `{% for %}` bodies followed along every path. A placeholder must get the same form on
every path, so a block may not leave quotes open that change what follows it. `{% set %}`
blocks and macros build *values* (their `{{ }}` are part of the value); `{% filter %}`,
`{% call %}` and template inheritance are not available in `bash:`.

Each evaluation of a placeholder (a loop evaluates it once per iteration) gets its own
variable, numbered in order. The cache key is unaffected: it is made from the resolved inputs
and upstream outputs, never from the rendered command.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from core.errors import TemplateRenderError
from core.workflows import render_budget
from core.workflows.render_budget import RenderLimits
from core.workflows.shell_context import NUMERIC_FILTERS, Form, Placement, Reason, ShellLexer

if TYPE_CHECKING:
    from jinja2 import Template, nodes

ARG_PREFIX = "BATON_ARG_"
ARG_GLOBAL = "_baton_arg"
#: the integers bash's arithmetic holds (64-bit, signed): past them it wraps without a word
BASH_INT_MIN, BASH_INT_MAX = -(2**63), 2**63 - 1
#: paths through `{% if %}`/`{% for %}` followed at once, and passes over a loop body
_MAX_PATHS = 64
_MAX_LOOP_PASSES = 40
_UNSUPPORTED = {
    "FilterBlock": "{% filter %}",
    "CallBlock": "{% call %}",
    "Block": "{% block %}",
    "Extends": "{% extends %}",
    "Include": "{% include %}",
    "Import": "{% import %}",
    "FromImport": "{% from … import %}",
}


@dataclass(frozen=True)
class Refused:
    """A placeholder (or block) of a `bash:` template that cannot be used: where and why."""

    line: int  # 1-based, inside the template
    what: str  # e.g. "`{{ inputs.message }}`"
    reason: str
    fix: str

    @property
    def message(self) -> str:
        return f"{self.what} {self.reason}"


@dataclass(frozen=True)
class BashPlan:
    """The decision for every placeholder of one template, in source order."""

    forms: tuple[Form, ...]
    refused: tuple[Refused, ...]


_NOTHING = BashPlan((), ())


@dataclass(frozen=True)
class BashCommand:
    """A rendered `bash:` command and the values its references point at."""

    text: str
    variables: Mapping[str, str]


def reference(index: int, form: Form) -> str:
    name = f"{ARG_PREFIX}{index}"
    return f'"${name}"' if form is Form.BARE else f"${{{name}}}"


def bash_plan(source: str) -> BashPlan:
    """Forms and refusals of `source` (raises `TemplateSyntaxError` if it does not parse)."""
    from core.workflows.templating import is_plain

    if is_plain(source):
        return _NOTHING  # literal text: no placeholder, no block, nothing to decide
    return _analysed(source)[0]


def render_bash(
    source: str, context: Mapping[str, Any], *, limits: RenderLimits | None = None
) -> BashCommand:
    """Render a `bash:` command; `TemplateRenderError` when a placeholder is refused."""
    from core.workflows.templating import literal, run_template

    if literal(source, limits):
        return BashCommand(source, {})  # no placeholder: the command is its own text

    plan, template = _analysed(source)
    if plan.refused:
        first = plan.refused[0]
        raise TemplateRenderError(f"line {first.line}: {first.message}", hint=first.fix)
    assert template is not None
    values: list[str] = []
    text = run_template(template, source, {**context, ARG_GLOBAL: _Collector(values)}, limits=limits)
    return BashCommand(text, {f"{ARG_PREFIX}{i}": v for i, v in enumerate(values, 1)})


class _Collector:
    """Called for each placeholder evaluation: keeps the value, returns the reference."""

    def __init__(self, values: list[str]) -> None:
        self._values = values

    def __call__(self, value: Any, form: str, number: str = "") -> str:
        from jinja2.runtime import Undefined

        from core.workflows.templating import to_text

        if isinstance(value, Undefined):
            str(value)  # StrictUndefined raises UndefinedError
        if number and isinstance(value, int) and not BASH_INT_MIN <= value <= BASH_INT_MAX:
            # a number made for arithmetic that bash would silently read as another one
            raise TemplateRenderError(
                f"{number} gives {value}, a number bash cannot hold (its arithmetic counts from"
                f" {BASH_INT_MIN} to {BASH_INT_MAX} and wraps past them)",
                hint="Check the input; pass a number this large as text (without `| int`).",
            )
        text = to_text(value)
        if "\x00" in text:
            raise TemplateRenderError(
                "a value contains a NUL byte, which a program's environment cannot hold",
                hint="Remove the NUL byte from the input or the upstream output.",
            )
        render_budget.current().output(len(text))
        self._values.append(text)
        return reference(len(self._values), Form(form))


# -- analysis --------------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def _analysed(source: str) -> tuple[BashPlan, Template | None]:
    """The plan, and the compiled template with every emitted `{{ x }}` made `{{ _baton_arg(x, form) }}`."""
    from core.workflows.templating import environment

    env = environment()
    tree = env.parse(source)
    walker = _Walker()
    placeholders = walker.run(tree)
    forms: list[Form] = []
    refused = list(walker.refused)
    for tag, expr in enumerate(placeholders):
        decision = _decide(walker.outcomes.get(tag, set()))
        if isinstance(decision, Reason):
            refused.append(Refused(expr.lineno, _describe(expr), decision.what, decision.fix))
        else:
            forms.append(decision)
    for use, placements in walker.outcomes.items():  # uses of typed text: `$v`, `${!v}`, `$( )`
        reasons = sorted((p.reason for p in placements if p.reason is not None), key=lambda r: r.name)
        if isinstance(use, tuple) and use[0] == "use" and reasons:
            _, line, what = use
            refused.append(Refused(line, f"{what} (it holds text from a {{{{ }}}})", reasons[0].what,
                                   reasons[0].fix))
    refused.sort(key=lambda r: r.line)
    plan = BashPlan(tuple(forms), tuple(refused))
    if refused:
        return plan, None
    for expr, form in zip(placeholders, forms, strict=True):
        walker.wrap(expr, form, _describe(expr) if _numeric(expr) else "")
    return plan, env.from_string(render_budget.bound(tree))


def _decide(placements: set[Placement]) -> Form | Reason:
    reasons = sorted((p.reason for p in placements if p.reason is not None), key=lambda r: r.name)
    if reasons:
        return reasons[0]
    forms = {p.form for p in placements if p.form is not None}
    if len(forms) != 1:
        return Reason.BLOCK
    return forms.pop()


class _Walker:
    """Follows the template's paths through a set of lexers (one per distinct shell state)."""

    def __init__(self) -> None:
        self.outcomes: dict[Hashable, set[Placement]] = {}
        self.placeholders: list[nodes.Expr] = []
        self.refused: list[Refused] = []
        self._parents: dict[int, tuple[nodes.Output, int]] = {}
        self._tags: dict[int, int] = {}  # id of a placeholder's expression -> its tag

    def run(self, tree: nodes.Template) -> list[nodes.Expr]:
        states = self._body(tree.body, {(): ShellLexer(self.outcomes)})
        for lexer in states.values():
            lexer.finish()
        return self.placeholders

    def wrap(self, expr: nodes.Expr, form: Form, number: str) -> None:
        """`number`: how to name a numeric placeholder (`{{ x | int }}`) whose value bash cannot hold."""
        from jinja2 import nodes

        output, index = self._parents[id(expr)]
        output.nodes[index] = nodes.Call(
            nodes.Name(ARG_GLOBAL, "load", lineno=expr.lineno),
            [expr, nodes.Const(form.value, lineno=expr.lineno), nodes.Const(number, lineno=expr.lineno)],
            [],
            None,
            None,
            lineno=expr.lineno,
        )

    def _body(
        self, body: Iterable[nodes.Node], states: dict[Hashable, ShellLexer]
    ) -> dict[Hashable, ShellLexer]:
        for node in body:
            states = self._node(node, states)
        return states

    def _node(self, node: nodes.Node, states: dict[Hashable, ShellLexer]) -> dict[Hashable, ShellLexer]:
        from jinja2 import nodes

        if isinstance(node, nodes.Output):
            for index, child in enumerate(node.nodes):
                if isinstance(child, nodes.TemplateData):
                    for lexer in states.values():
                        lexer.feed(child.data, child.lineno)
                else:
                    tag = self._placeholder(node, index, child)
                    numeric = _numeric(child)
                    for lexer in states.values():
                        lexer.placeholder(tag, numeric=numeric)
                states = _merge(states.values())
            return states
        if isinstance(node, nodes.If):
            return self._branches(node, states)
        if isinstance(node, nodes.For):
            return self._loop(node, states)
        if isinstance(node, nodes.With | nodes.Scope | nodes.ScopedEvalContextModifier):
            return self._body(node.body, states)
        name = type(node).__name__
        if name in _UNSUPPORTED:
            self.refused.append(
                Refused(
                    node.lineno,
                    f"`{_UNSUPPORTED[name]}`",
                    "is not available in `bash:` commands",
                    "Compute the text with filters inside {{ }} instead.",
                )
            )
        return states  # {% set %}, macros: no output of their own

    def _placeholder(self, output: nodes.Output, index: int, expr: nodes.Expr) -> int:
        """The placeholder's tag: one per `{{ }}` of the source, however many paths reach it."""
        if id(expr) in self._tags:
            return self._tags[id(expr)]
        self._parents[id(expr)] = (output, index)
        self.placeholders.append(expr)
        self._tags[id(expr)] = len(self.placeholders) - 1
        return self._tags[id(expr)]

    def _branches(self, node: nodes.If, states: dict[Hashable, ShellLexer]) -> dict[Hashable, ShellLexer]:
        results: list[ShellLexer] = []
        for body in (node.body, *(elif_.body for elif_ in node.elif_)):
            results += self._body(body, _clone(states)).values()
        results += self._body(node.else_, _clone(states)).values() if node.else_ else states.values()
        return self._bounded(_merge(results), node)

    def _loop(self, node: nodes.For, states: dict[Hashable, ShellLexer]) -> dict[Hashable, ShellLexer]:
        if node.recursive:
            self.refused.append(
                Refused(
                    node.lineno,
                    "`{% for … recursive %}`",
                    "is not available in `bash:` commands",
                    "Flatten the data with filters before the loop.",
                )
            )
            return states
        zero = self._body(node.else_, _clone(states)) if node.else_ else states
        seen: dict[Hashable, ShellLexer] = {}
        current = _clone(states)
        for _ in range(_MAX_LOOP_PASSES):
            current = {k: v for k, v in self._body(node.body, current).items() if k not in seen}
            if not current:
                break
            seen.update({k: v.clone() for k, v in current.items()})
        else:
            self.refused.append(
                Refused(
                    node.lineno,
                    "the `{% for %}` loop",
                    Reason.BLOCK.what.replace("sits", "changes the quoting"),
                    Reason.BLOCK.fix,
                )
            )
        return self._bounded(_merge([*zero.values(), *seen.values()]), node)

    def _bounded(self, states: dict[Hashable, ShellLexer], node: nodes.Node) -> dict[Hashable, ShellLexer]:
        if len(states) <= _MAX_PATHS:
            return states
        self.refused.append(
            Refused(
                node.lineno,
                "this block",
                "leaves too many different shell contexts behind",
                "Keep quotes balanced inside each {% if %}/{% for %} block.",
            )
        )
        first = next(iter(states))
        return {first: states[first]}


def _clone(states: dict[Hashable, ShellLexer]) -> dict[Hashable, ShellLexer]:
    return {k: v.clone() for k, v in states.items()}


def _merge(lexers: Iterable[ShellLexer]) -> dict[Hashable, ShellLexer]:
    merged: dict[Hashable, ShellLexer] = {}
    for lexer in lexers:
        merged.setdefault(lexer.key(), lexer)
    return merged


def _numeric(expr: nodes.Expr) -> bool:
    """The placeholder's value is always an integer (`{{ x | int }}`): it may stand in arithmetic."""
    from jinja2 import nodes

    return isinstance(expr, nodes.Filter) and expr.name in NUMERIC_FILTERS


def _describe(expr: nodes.Expr) -> str:
    """`{{ inputs.message }}` for a plain path (`{{ inputs.n | int }}` with a numeric filter);
    `{{ … }}` otherwise."""
    from jinja2 import nodes

    if _numeric(expr):
        assert isinstance(expr, nodes.Filter) and expr.node is not None
        inner = _describe(expr.node)
        return inner if inner == "`{{ … }}`" else inner[:-4] + f" | {expr.name} }}}}`"
    parts: list[str] = []
    node: nodes.Node = expr
    while isinstance(node, nodes.Getattr | nodes.Getitem):
        if isinstance(node, nodes.Getattr):
            parts.append(f".{node.attr}")
        elif isinstance(node.arg, nodes.Const):
            parts.append(f"[{node.arg.value!r}]")
        else:
            return "`{{ … }}`"
        node = node.node
    if isinstance(node, nodes.Name):
        return "`{{ " + node.name + "".join(reversed(parts)) + " }}`"
    return "`{{ … }}`"
