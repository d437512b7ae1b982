"""Checks a parsed `Workflow` beyond its shape: the DAG, templates, replay rules, schemas.

`problems(workflow)` is pure and returns every `Problem` with the path (`loc`) it is about;
the loader turns the first one into a `WorkflowDefinitionError` naming file and line.
`topological_order` and `downstream` are the DAG queries the engine uses.
"""

from __future__ import annotations

import difflib
import heapq
import operator
import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass

from core.errors import WorkflowDefinitionError
from core.store.records import ReplayClass
from core.workflows import check_memo
from core.workflows.bash_template import bash_plan
from core.workflows.model import Node, Workflow
from core.workflows.templating import (
    CONTEXT_NAMES,
    INTERNAL_GLOBALS,
    environment,
    template_references,
    templated_fields,
    unknown_filters,
)

Loc = tuple[str | int, ...]
_INPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: keys that only make sense on one kind of node
_KIND_ONLY = {"with": "tool", "provider": "prompt", "approvers": "approval"}
_ALSO = {"with": ("workflow",)}  # `with:` is a tool's kwargs or a child run's args
#: what checks a schema against its metaschema (`check_memo`: a schema that passed is not checked again)
SCHEMA_LIBRARIES = ("jsonschema", "jsonschema_specifications", "referencing")
_KIND_ONLY_VALUES = operator.attrgetter(*("with_" if key == "with" else key for key in _KIND_ONLY))


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a workflow, at `loc` (a path into the YAML)."""

    loc: Loc
    message: str
    hint: str
    line_in_text: int | None = None  # for template errors: the line inside the templated text


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def problems(workflow: Workflow, *, checked: Collection[int] = ()) -> list[Problem]:
    """Every problem, in a stable order: inputs, ids, deps, cycles, then node by node.
    `checked`: ids of node objects already found sound under the same `defaults.replay`
    (the loader's re-used nodes); their own checks are skipped, the DAG's are not."""
    found = list(_input_problems(workflow))
    found += _concurrency_problems(workflow)
    found += _id_and_dep_problems(workflow)
    if not found and not in_file_order(workflow):
        cycle = find_cycle(workflow)
        if cycle:
            first = cycle[0]
            index = [n.id for n in workflow.nodes].index(first)
            found.append(
                Problem(
                    ("nodes", index, "depends_on"),
                    "`depends_on` forms a cycle: " + " -> ".join(cycle),
                    f"Remove one of these dependencies (e.g. `{cycle[1]}` from `{first}`).",
                )
            )
    for index, node in enumerate(workflow.nodes):
        if id(node) not in checked:
            found += _node_problems(workflow, index, node)
    if workflow.notify:
        from core.workflows.notify_spec import notify_problems

        found += [Problem(("notify", *loc), message, hint)
                  for loc, message, hint in notify_problems(workflow.notify)]  # fmt: skip
    return found


def in_file_order(workflow: Workflow) -> bool:
    """Every node's dependencies come before it in the file, and ids are unique: then there
    is no cycle, and the file order is the topological order (`topological_order`'s ties go
    by file order). Most files are written this way; the others take the general path."""
    seen: set[str] = set()
    for node in workflow.nodes:
        for dep in node.depends_on:
            if dep not in seen:
                return False
        if node.id in seen:
            return False
        seen.add(node.id)
    return True


def validate(workflow: Workflow) -> Workflow:
    """Raise the first problem (without a line: use the loader for files)."""
    found = problems(workflow)
    if found:
        raise WorkflowDefinitionError(found[0].message, file=workflow.source, hint=found[0].hint)
    return workflow


def _input_problems(workflow: Workflow) -> Iterator[Problem]:
    for name, spec in workflow.inputs.items():
        if not _INPUT_NAME.match(name):
            yield Problem(
                ("inputs", name),
                f"input name `{name}` is not a plain identifier",
                "Use letters, digits and `_` (templates read it as `inputs.<name>`).",
            )
        elif name == "message" and spec.type != "string":
            yield Problem(
                ("inputs", name, "type"),
                "input `message` must be of type string (it is the free text after the workflow name)",
                "Remove `type:` from `message` or rename the input.",
            )


def _concurrency_problems(workflow: Workflow) -> Iterator[Problem]:
    """`concurrency.key` is a template over the run's inputs only (known when it starts)."""
    spec = workflow.concurrency
    if spec is None or spec.key is None:
        return
    from jinja2.exceptions import TemplateSyntaxError  # jinja2 only for templated keys

    at: Loc = ("concurrency", "key")
    if not spec.key.strip():
        yield Problem(at, "`concurrency.key` is empty",
                      "Remove `key:` (the workflow's name) or name the key.")  # fmt: skip
        return
    try:
        refs = template_references(spec.key)
    except TemplateSyntaxError as exc:
        yield Problem(at, f"`concurrency.key` is not a valid template: {exc.message}",
                      'Write it like `deploy-{{ inputs.env }}`.')  # fmt: skip
        return
    other = sorted(refs.names - {"inputs"} - INTERNAL_GLOBALS)
    if other or refs.nodes:
        yield Problem(at, f"`concurrency.key` may read only `inputs`, not `{(other or ['nodes'])[0]}`",
                      "The key is decided before any step runs: use `{{ inputs.<name> }}` only.")  # fmt: skip
        return
    declared = set(workflow.inputs) | {"message"}
    for name in sorted(refs.inputs - declared):
        guess = did_you_mean(name, declared)
        yield Problem(at, f"`concurrency.key` reads `inputs.{name}`, which the workflow does not declare",
                      f"Did you mean `inputs.{guess}`?" if guess else f"Declare `{name}` under `inputs:`.")
        return


def _id_and_dep_problems(workflow: Workflow) -> Iterator[Problem]:
    ids = {n.id for n in workflow.nodes}
    if len(ids) == len(workflow.nodes) and all(d in ids for n in workflow.nodes for d in n.depends_on):
        return  # the usual file, seen in two passes without per-node bookkeeping
    seen: dict[str, int] = {}
    for index, node in enumerate(workflow.nodes):
        if node.id in seen:
            yield Problem(
                ("nodes", index, "id"),
                f"duplicate node id `{node.id}` (also node #{seen[node.id] + 1})",
                "Give every node a unique `id`.",
            )
        seen.setdefault(node.id, index)
    ids = set(seen)
    for index, node in enumerate(workflow.nodes):
        for dep_index, dep in enumerate(node.depends_on):
            if dep not in ids:
                guess = did_you_mean(dep, ids)
                hint = f"Did you mean `{guess}`?" if guess else "Known ids: " + ", ".join(sorted(ids)) + "."
                yield Problem(
                    ("nodes", index, "depends_on", dep_index),
                    f"node `{node.id}` depends on unknown node `{dep}`",
                    hint,
                )


def _node_problems(workflow: Workflow, index: int, node: Node) -> Iterator[Problem]:
    at: Loc = ("nodes", index)
    for key, kind in _KIND_ONLY.items() if any(_KIND_ONLY_VALUES(node)) else ():
        value = node.with_ if key == "with" else getattr(node, key)
        if value and node.kind != kind and node.kind not in _ALSO.get(key, ()):
            kinds = " and ".join((kind, *_ALSO.get(key, ())))
            yield Problem(
                (*at, key),
                f"`{key}:` only applies to {kinds} nodes, and `{node.id}` is a {node.kind} node",
                f"Remove `{key}:` from `{node.id}`.",
            )
    yield from _template_problems(node, at)
    if node.map is not None:
        yield from _map_problems(node, at)
    if node.approval is not None or node.when is not None:
        from core.workflows.approval_checks import gate_problems, when_problems

        for loc, message, hint in (*gate_problems(node), *when_problems(node)):
            yield Problem((*at, *loc), message, hint)
    if node.retry is not None and workflow.replay_class(node) is ReplayClass.UNSAFE:
        yield Problem(
            (*at, "retry"),
            f"node `{node.id}` is `unsafe` and cannot `retry` automatically (it may have half-happened)",
            "Declare `replay: idempotent` or `replay: pure` if re-running is safe, or remove `retry:`.",
        )
    schema = node.output.schema_
    if schema is not None:
        if node.output.format != "json":
            yield Problem(
                (*at, "output", "schema"),
                f"node `{node.id}` declares an output `schema` but its format is `{node.output.format}`",
                "Add `format: json` to `output:` (schemas check JSON output).",
            )
        memo = check_memo.key("schema", SCHEMA_LIBRARIES, check_memo.canonical_json(schema))
        if not check_memo.passed(memo):  # a schema that passed before: jsonschema not imported
            import jsonschema  # only for workflows that declare a schema

            try:
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except jsonschema.SchemaError as exc:
                where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
                yield Problem(
                    (*at, "output", "schema", *exc.absolute_path),
                    f"invalid JSON Schema in `output.schema` of `{node.id}` at {where}: {exc.message}",
                    "Fix the schema (see https://json-schema.org/understanding-json-schema/).",
                )
            else:
                check_memo.remember(memo)


#: fields of a `map:` node evaluated once for the node, where its item variable does not exist
_NODE_WIDE = (("when",), ("map", "items"))


def _map_problems(node: Node, at: Loc) -> Iterator[Problem]:
    spec = node.map
    assert spec is not None
    if node.kind == "approval":
        yield Problem(
            (*at, "map"),
            f"`map:` does not apply to approval nodes, and `{node.id}` is one",
            "Map the step before or after the gate, and ask once about all items.",
        )
    if spec.as_ in CONTEXT_NAMES or spec.as_ in environment().globals:
        yield Problem(
            (*at, "map", "as"),
            f"`map: {{as: {spec.as_}}}` of `{node.id}` hides the template name `{spec.as_}`",
            "Name the item variable something else (e.g. `host`).",
        )


def _template_problems(node: Node, at: Loc) -> Iterator[Problem]:
    item = node.map.as_ if node.map is not None else None
    for path, source in templated_fields(node):
        from jinja2.exceptions import TemplateSyntaxError  # jinja2 only for templated nodes

        loc = (*at, *path)
        try:
            missing_filters = unknown_filters(source)
            refs = template_references(source) if not missing_filters else None
        except TemplateSyntaxError as exc:
            yield Problem(
                loc,
                f"template in `{_show(path)}` of `{node.id}` does not compile: {exc.message}",
                "Fix the jinja2 syntax (balanced `{{ }}` / `{% %}`, a known filter).",
                exc.lineno,
            )
            continue
        if refs is None:
            yield Problem(
                loc,
                f"template in `{_show(path)}` of `{node.id}` uses unknown filter `{missing_filters[0]}`",
                _guess_hint(missing_filters[0], set(environment().filters)),
            )
            continue
        known = CONTEXT_NAMES if item is None or path in _NODE_WIDE else CONTEXT_NAMES | {item}
        unknown = refs.names - known - set(environment().globals) | (refs.names & INTERNAL_GLOBALS)
        for name in sorted(unknown):
            if name == item:
                yield Problem(
                    loc,
                    f"template in `{_show(path)}` of `{node.id}` uses the item `{name}`, "
                    "which exists only in the step each item runs",
                    f"Decide per item inside the step, or use `{name}` only in the step's command.",
                )
                continue
            guess = did_you_mean(name, known)
            if guess is None and item is not None and item in known:
                guess = item  # `{{ item }}` where `map: {as: host}` names it otherwise
            yield Problem(
                loc,
                f"template in `{_show(path)}` of `{node.id}` uses unknown variable `{name}`",
                f"Did you mean `{guess}`?" if guess else "Use inputs.<name>, nodes.<id>.output or run.id.",
            )
        if path == ("bash",):
            for refused in bash_plan(source).refused[:1]:
                yield Problem(
                    loc,
                    f"`bash` of `{node.id}`: {refused.message}",
                    refused.fix,
                    refused.line,
                )
        if refs.whole_nodes:
            yield Problem(
                loc,
                f"template in `{_show(path)}` of `{node.id}` uses `nodes` without a literal node id",
                "Write `nodes.<id>.output` (or `nodes['<id>'].output`) for each dependency.",
            )
        for ref in sorted(refs.nodes.difference(node.depends_on)):
            yield Problem(
                loc,
                f"node `{node.id}` uses `nodes.{ref}` in `{_show(path)}` "
                f"but `{ref}` is not in its `depends_on`",
                f"Add `{ref}` to `depends_on` of `{node.id}`.",
            )


def _guess_hint(word: str, choices: set[str]) -> str:
    guess = did_you_mean(word, choices)
    return f"Did you mean `{guess}`?" if guess else "Use one of jinja2's built-in filters."


def _show(path: Loc) -> str:
    return ".".join(str(p) for p in path)


# -- DAG queries ---------------------------------------------------------------------------


def find_cycle(workflow: Workflow) -> list[str] | None:
    """A dependency cycle as `[a, b, a]` (a depends on b depends on a), or None."""
    ids = {n.id for n in workflow.nodes}
    deps = {n.id: [d for d in n.depends_on if d in ids] for n in workflow.nodes}
    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []

    def visit(node_id: str) -> list[str] | None:
        state[node_id] = 1
        stack.append(node_id)
        for dep in deps[node_id]:
            if state.get(dep) == 1:
                return [*stack[stack.index(dep):], dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        stack.pop()
        state[node_id] = 2
        return None

    for node in workflow.nodes:
        if node.id not in state and (cycle := visit(node.id)):
            return cycle
    return None


def topological_order(workflow: Workflow) -> list[str]:
    """Node ids in dependency order; among ready nodes, file order (stable)."""
    if in_file_order(workflow):
        return [n.id for n in workflow.nodes]
    return kahn_order(workflow)


def kahn_order(workflow: Workflow) -> list[str]:
    """`topological_order` for any file (Kahn's algorithm, ties by file order); raises for
    an unknown dependency or a cycle."""
    position = {n.id: i for i, n in enumerate(workflow.nodes)}
    waiting = {n.id: len(set(n.depends_on)) for n in workflow.nodes}
    dependents: dict[str, list[str]] = {n.id: [] for n in workflow.nodes}
    for node in workflow.nodes:
        for dep in set(node.depends_on):
            if dep not in dependents:
                raise WorkflowDefinitionError(
                    f"node `{node.id}` depends on unknown node `{dep}`", file=workflow.source
                )
            dependents[dep].append(node.id)
    ready = [position[i] for i, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        node_id = workflow.nodes[heapq.heappop(ready)].id
        order.append(node_id)
        for child in dependents[node_id]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, position[child])
    if len(order) != len(workflow.nodes):
        cycle = find_cycle(workflow) or []
        raise WorkflowDefinitionError(
            "`depends_on` forms a cycle: " + " -> ".join(cycle),
            file=workflow.source,
            hint="Remove one of these dependencies.",
        )
    return order


def downstream(workflow: Workflow, node_id: str) -> set[str]:
    """Every node that depends on `node_id`, directly or transitively (not itself)."""
    workflow.node(node_id)  # KeyError for an unknown id
    dependents: dict[str, set[str]] = {n.id: set() for n in workflow.nodes}
    for node in workflow.nodes:
        for dep in node.depends_on:
            dependents.setdefault(dep, set()).add(node.id)
    found: set[str] = set()
    todo = [node_id]
    while todo:
        for child in dependents[todo.pop()]:
            if child not in found:
                found.add(child)
                todo.append(child)
    found.discard(node_id)
    return found
