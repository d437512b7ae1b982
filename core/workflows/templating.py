"""Sandboxed, budgeted jinja2 templating for workflow fields, and what a template refers to.

One `SandboxedEnvironment` with `StrictUndefined` and autoescape off renders every templated
field (`bash`, `prompt`, `approval`, the strings inside `with:`). Compiled templates are
cached by source. Each `{{ … }}` value goes through the environment's `finalize`: dict/list
values render as canonical JSON, `None` as the empty string, booleans as `true`/`false`.

Every render runs under a `RenderLimits` budget (time, output size, loop iterations, work),
charged by the environment itself (`core/workflows/render_budget.py`); nothing is folded at
compile time. `bash:` commands never receive values as text: see
`core/workflows/bash_template.py`.

`references(node)` reads the jinja2 AST to find `inputs.<name>` and `nodes.<id>` uses; the
engine builds cache keys from exactly those, and validation rejects references to nodes that
are not dependencies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

from core.errors import TemplateRenderError
from core.workflows import render_budget
from core.workflows.model import Node
from core.workflows.render_budget import RenderLimits

if TYPE_CHECKING:  # jinja2 is imported at the first template, not with the engine
    from jinja2 import Template, nodes
    from jinja2.exceptions import UndefinedError
    from jinja2.sandbox import SandboxedEnvironment

#: Names a template may use at the top level (plus jinja2's globals such as `range`).
CONTEXT_NAMES: frozenset[str] = frozenset({"inputs", "nodes", "run"})
_SINGLE_EXPRESSION = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\{\{|\}\}|\{%|\{#).)*)\}\}\s*$", re.DOTALL)


def to_text(value: Any) -> str:
    """How one `{{ … }}` value becomes text: canonical JSON for containers."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return str(value)


@cache
def environment() -> SandboxedEnvironment:
    """The one sandboxed environment, built (and jinja2 imported) at the first template: a
    workflow without templated fields, or a restarted bot before its first template, does
    not pay for jinja2."""
    from jinja2 import StrictUndefined, pass_context
    from jinja2.runtime import Context, Undefined
    from jinja2.sandbox import SandboxedEnvironment

    class BoundedEnvironment(SandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**", "%"})

        def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
            budget = render_budget.current()
            render_budget.check_binop(budget, operator, left, right)
            return render_budget.check_result(budget, super().call_binop(context, operator, left, right))

        def getattr(self, obj: Any, attribute: str) -> Any:
            # data before methods: `nodes.review.values` is the gate's `values` field, not dict.values
            if isinstance(obj, dict) and attribute in obj:
                return obj[attribute]
            return super().getattr(obj, attribute)

        def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
            budget = render_budget.current()
            render_budget.check_call(budget, __obj, args, kwargs)
            return render_budget.check_result(budget, super().call(__context, __obj, *args, **kwargs))

    @pass_context  # a context-taking finalize is never applied at compile time
    def finalize(context: Context, value: Any) -> str:
        if isinstance(value, Undefined):
            str(value)  # StrictUndefined raises UndefinedError here
        text = to_text(value)
        render_budget.current().output(len(text))
        return text

    env = BoundedEnvironment(
        undefined=StrictUndefined,
        autoescape=False,
        finalize=finalize,
        keep_trailing_newline=True,
        optimized=False,
    )
    env.filters = {name: render_budget.wrap_filter(name, f) for name, f in env.filters.items()}
    env.globals[render_budget.LOOP_GLOBAL] = render_budget.bounded_loop
    env.globals[render_budget.LITERAL_GLOBAL] = render_budget.literal
    env.globals["namespace"] = render_budget.make_namespace()
    return env


#: names the engine adds to every template's globals; not for authors
INTERNAL_GLOBALS = frozenset({render_budget.LOOP_GLOBAL, render_budget.LITERAL_GLOBAL, "_baton_arg"})


@lru_cache(maxsize=1024)
def compile_template(source: str) -> Template:
    """Compile (cached), rewritten to charge its budget; raises jinja2's `TemplateSyntaxError`."""
    env = environment()
    return env.from_string(render_budget.bound(env.parse(source)))


@lru_cache(maxsize=1024)
def parse_template(source: str) -> nodes.Template:
    """The jinja2 AST of a template (cached); raises `TemplateSyntaxError`."""
    return environment().parse(source)


def literal(source: str, limits: RenderLimits | None = None) -> bool:
    """True when rendering `source` gives `source` itself: literal text (`is_plain`), no `\r`
    (jinja2 would rewrite line ends), within the budget's size. Such a template is not
    compiled nor rendered."""
    return is_plain(source) and "\r" not in source and len(source) <= (limits or _DEFAULT_LIMITS).max_chars


_DEFAULT_LIMITS = RenderLimits()


def render_template(source: str, context: Mapping[str, Any], *, limits: RenderLimits | None = None) -> str:
    """Render `source` within `limits` (the defaults when None)."""
    if literal(source, limits):
        return source
    return run_template(compile_template(source), source, context, limits=limits)


def run_template(
    template: Template, source: str, context: Mapping[str, Any], *, limits: RenderLimits | None = None
) -> str:
    """Render a compiled template under a fresh budget; jinja2 errors become `TemplateRenderError`."""
    from jinja2.exceptions import SecurityError, TemplateSyntaxError, UndefinedError

    try:
        with render_budget.budgeted(limits or RenderLimits()):
            return template.render(context)
    except UndefinedError as exc:
        raise _undefined(source, context, exc) from exc
    except SecurityError as exc:
        raise TemplateRenderError(
            f"template is not allowed: {exc}",
            hint="Templates may only read inputs, nodes.<id>.output and run.id.",
        ) from exc
    except TemplateSyntaxError as exc:
        raise TemplateRenderError(
            f"template does not compile: {exc.message} (line {exc.lineno})",
            hint="Fix the template; `baton list` shows load errors before a run.",
        ) from exc
    except (OverflowError, MemoryError, RecursionError) as exc:
        raise TemplateRenderError(
            f"template rendering failed: {type(exc).__name__}: {exc}",
            hint="Simplify the template.",
        ) from exc


def render_value(value: Any, context: Mapping[str, Any], *, limits: RenderLimits | None = None) -> Any:
    """Render every string inside `value` (for `with:`). A string that is exactly one
    `{{ expression }}` keeps the expression's type (a dict stays a dict)."""
    if isinstance(value, str):
        match = _SINGLE_EXPRESSION.match(value)
        if match is None:
            return render_template(value, context, limits=limits)
        from jinja2.exceptions import SecurityError, UndefinedError
        from jinja2.runtime import Undefined

        try:
            with render_budget.budgeted(limits or RenderLimits()):
                result = _expression(match["expr"])(**context)
        except UndefinedError as exc:
            raise _undefined(value, context, exc) from exc
        except SecurityError as exc:
            raise TemplateRenderError(f"template is not allowed: {exc}") from exc
        if isinstance(result, Undefined):
            raise _undefined(value, context, None)
        return result
    if isinstance(value, Mapping):
        return {k: render_value(v, context, limits=limits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [render_value(v, context, limits=limits) for v in value]
    return value


@lru_cache(maxsize=1024)
def _expression(source: str) -> Any:
    return environment().compile_expression(source, undefined_to_none=False)


# -- conditions (`when:`) -----------------------------------------------------------------


def condition_expression(source: str) -> str | None:
    """The expression of a `when:`: inside its one `{{ … }}`, or the whole text when it has
    no template markup; None when it is anything else (text around it, several parts)."""
    match = _SINGLE_EXPRESSION.match(source)
    if match is not None:
        return match["expr"]
    if "{{" in source or "{%" in source or "{#" in source or "}}" in source or not source.strip():
        return None
    return source


def compile_condition(expression: str) -> Any:
    """The compiled expression (cached); raises jinja2's `TemplateSyntaxError`."""
    return _expression(expression)


def evaluate_condition(
    source: str, context: Mapping[str, Any], *, limits: RenderLimits | None = None
) -> bool:
    """A `when:` over `context` (inputs, dependencies' outputs), in the sandbox under a budget.
    Only a boolean decides: any other value is a `TemplateRenderError` (a string "false" is
    true to Python, so it is refused rather than guessed)."""
    expression = condition_expression(source)
    if expression is None:
        raise TemplateRenderError("`when:` is not one expression", hint="Write one condition in `{{ … }}`.")
    value = render_value("{{" + expression + "}}", context, limits=limits)
    if not isinstance(value, bool):
        shown = json.dumps(value, ensure_ascii=False, default=str)[:60]
        raise TemplateRenderError(
            f"`when:` gave {shown} ({type(value).__name__}), not true or false",
            hint="Compare the value, e.g. `{{ inputs.mode == 'fast' }}`.",
        )
    return value


# -- reference analysis -------------------------------------------------------------------


@dataclass(frozen=True)
class References:
    """What a node's templates read: `inputs.<name>`s, `nodes.<id>`s, and whether the
    whole `inputs` mapping is used (then every input is part of the node's identity)."""

    inputs: frozenset[str] = frozenset()
    nodes: frozenset[str] = frozenset()
    whole_inputs: bool = False
    whole_nodes: bool = False  # `nodes` used without a literal id (a load error)
    names: frozenset[str] = frozenset()  # every context name used (loop variables excluded)

    def __or__(self, other: References) -> References:
        return References(
            self.inputs | other.inputs,
            self.nodes | other.nodes,
            self.whole_inputs or other.whole_inputs,
            self.whole_nodes or other.whole_nodes,
            self.names | other.names,
        )


def templated_fields(node: Node) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """(path inside the node, template source) of every templated string of a node."""
    if node.tool is not None and not node.with_ and node.when is None and node.map is None:
        return  # a tool without arguments, condition or map: nothing templated
    for key in ("bash", "prompt"):
        text = getattr(node, key)
        if text is not None:
            yield (key,), text
    if node.approval is not None:
        yield ("approval", "question"), node.approval.question
    if node.when is not None:
        expression = condition_expression(node.when)
        if expression is not None:  # else a load error (`approval_checks.when_problems`)
            yield ("when",), "{{" + expression + "}}"
    yield from _strings(node.with_, ("with",))
    if node.map is not None and isinstance(node.map.items, str):
        yield ("map", "items"), node.map.items


def _strings(value: Any, path: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(v, (*path, k))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _strings(v, (*path, i))


_NO_REFERENCES = References()
#: `{{ inputs.x }}`, `{{ nodes.a.output }}`, `{{ run.id }}`: a context name and literal attributes
_PLACEHOLDER = re.compile(
    r"\{\{\s*(inputs|nodes|run)((?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*\}\}"
)
_NAME_OF = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)")


def is_plain(source: str) -> bool:
    """True when jinja2 would read `source` as literal text only (no `{{`, `{%` or `{#`)."""
    return "{" not in source or ("{{" not in source and "{%" not in source and "{#" not in source)


def simple_references(source: str) -> References | None:
    """The references of a template whose only jinja2 syntax is `{{ name.attr… }}` placeholders
    rooted at a context name, read without building its AST; None for any other template (the
    AST decides). Literal text (`is_plain`) has none."""
    if is_plain(source):
        return _NO_REFERENCES
    found: dict[str, set[str]] = {"inputs": set(), "nodes": set()}
    names: set[str] = set()
    whole = {"inputs": False, "nodes": False}
    pieces: list[str] = []
    end = 0
    for match in _PLACEHOLDER.finditer(source):
        if match.start() > 0 and source[match.start() - 1] == "{":
            return None  # `{{{ … }}`: jinja2's placeholder starts a brace earlier
        pieces.append(source[end : match.start()])
        end = match.end()
        name, attrs = match.group(1), match.group(2)
        names.add(name)
        if name in found:
            first = _NAME_OF.match(attrs)
            if first is None:
                whole[name] = True
            else:
                found[name].add(first.group(1))
    pieces.append(source[end:])
    if not is_plain("\0".join(pieces)):
        return None  # other jinja2 syntax: filters, blocks, comments, other names
    return References(
        frozenset(found["inputs"]),
        frozenset(found["nodes"]),
        whole["inputs"],
        whole["nodes"],
        frozenset(names),
    )


def references(node: Node) -> References:
    """Union of `template_references` over the node's templated fields."""
    result = _NO_REFERENCES
    for _, source in templated_fields(node):
        if not is_plain(source):
            result = result | template_references(source)
    return result


@lru_cache(maxsize=1024)
def template_references(source: str) -> References:
    """References of one template source (raises `TemplateSyntaxError` if it does not parse)."""
    simple = simple_references(source)
    if simple is not None:
        return simple
    found_inputs: set[str] = set()
    found_nodes: set[str] = set()
    flags = {"inputs": False, "nodes": False}
    from jinja2 import meta

    tree = parse_template(source)
    for name, key, called in _name_uses(tree):
        if name not in flags:
            continue
        if key is None or called:
            flags[name] = True
        else:
            (found_inputs if name == "inputs" else found_nodes).add(key)
    return References(
        frozenset(found_inputs),
        frozenset(found_nodes),
        flags["inputs"],
        flags["nodes"],
        frozenset(meta.find_undeclared_variables(tree)),
    )


def unknown_filters(source: str) -> list[str]:
    """Filter and test names used in `source` that the environment does not have."""
    if simple_references(source) is not None:
        return []  # literal text and `{{ name.attr }}` placeholders use no filter
    from jinja2 import nodes

    tree = parse_template(source)
    env = environment()
    missing = [f.name for f in tree.find_all(nodes.Filter) if f.name not in env.filters]
    missing += [t.name for t in tree.find_all(nodes.Test) if t.name not in env.tests]
    return missing


def dotted_paths(source: str) -> list[tuple[str | int, ...]]:
    """Every `a.b[c]…` chain with literal keys rooted at a context name (longest form)."""
    from jinja2 import nodes

    paths: list[tuple[str | int, ...]] = []

    def chain(node: nodes.Node) -> tuple[str | int, ...] | None:
        if isinstance(node, nodes.Name):
            return (node.name,)
        if isinstance(node, nodes.Getattr):
            base = chain(node.node)
            return None if base is None else (*base, node.attr)
        if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
            base = chain(node.node)
            return None if base is None else (*base, node.arg.value)
        return None

    def visit(node: nodes.Node, inside_chain: bool) -> None:
        is_link = isinstance(node, nodes.Getattr | nodes.Getitem)
        if is_link and not inside_chain:
            path = chain(node)
            if path is not None:
                paths.append(path)
        for child in node.iter_child_nodes():
            visit(child, is_link and child is getattr(node, "node", None))

    visit(parse_template(source), False)
    return paths


def _name_uses(tree: nodes.Node) -> Iterator[tuple[str, str | None, bool]]:
    """(name, literal key or None, called) for each load of a name; `called` is True for
    `inputs.items()`-style uses, which read the whole mapping."""
    from jinja2 import nodes

    def visit(
        node: nodes.Node, parent: nodes.Node | None, grand: nodes.Node | None
    ) -> Iterator[tuple[str, str | None, bool]]:
        if isinstance(node, nodes.Name) and node.ctx == "load":
            key: str | None = None
            if isinstance(parent, nodes.Getattr) and parent.node is node:
                key = parent.attr
            elif (
                isinstance(parent, nodes.Getitem)
                and parent.node is node
                and isinstance(parent.arg, nodes.Const)
                and isinstance(parent.arg.value, str)
            ):
                key = parent.arg.value
            called = key is not None and isinstance(grand, nodes.Call) and grand.node is parent
            yield node.name, key, called
            return
        for child in node.iter_child_nodes():
            yield from visit(child, node, parent)

    yield from visit(tree, None, None)


def _undefined(source: str, context: Mapping[str, Any], exc: UndefinedError | None) -> TemplateRenderError:
    """Name the first variable path of `source` that does not resolve in `context`."""
    for path in dotted_paths(source) + [(name,) for name in template_references(source).names]:
        value: Any = context
        for depth, key in enumerate(path):
            if isinstance(value, Mapping) and key in value:
                value = value[key]
                continue
            if isinstance(value, list) and isinstance(key, int) and -len(value) <= key < len(value):
                value = value[key]
                continue
            shown = _show(path)
            if depth == 0:
                cause = f"template uses `{shown}`, which is undefined"
            else:
                cause = f"template uses `{shown}`, but `{_show(path[:depth])}` has no `{key}`"
            return TemplateRenderError(cause, hint=_undefined_hint(path))
    detail = exc.message if exc is not None and exc.message else "an undefined value"
    return TemplateRenderError(f"template uses {detail}", hint=_undefined_hint(()))


def _show(path: tuple[str | int, ...]) -> str:
    text = str(path[0])
    for key in path[1:]:
        text += f"[{key}]" if isinstance(key, int) else f".{key}"
    return text


def _undefined_hint(path: tuple[str | int, ...]) -> str:
    if path[:1] == ("inputs",) and len(path) > 1:
        return f"Pass it with `--set {path[1]}=…`, or declare it under `inputs:` with a default."
    if path[:1] == ("nodes",):
        return "Check the step's output (json outputs need the field) and the template."
    return "Templates can use inputs.<name>, nodes.<id>.output and run.id."
