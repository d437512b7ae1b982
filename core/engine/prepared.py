"""What the engine works out once per workflow definition, not once per step.

`prepare(workflow, tools)` gives the topological order, dependency maps, each node's
referenced inputs, replay class, memoize flag, timeout, attempts and the digest of its
definition. Everything that does not depend on files outside the YAML is cached per
`Workflow` object (the catalog hands out the same object until the file changes); script
sources and `files:` are re-read for every execution (`definition_digests`), which is how
fixing a producer's script file busts its key without renaming anything.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.engine.cache_key import definition_digest
from core.engine.replay import attempts_allowed, replay_class
from core.errors import BatonError
from core.store.records import ReplayClass
from core.workflows.loader import files_content, script_source
from core.workflows.model import Node, Workflow
from core.workflows.templating import references
from core.workflows.validation import topological_order

if TYPE_CHECKING:
    from core.engine.tools import ToolRegistry

_CACHE_SIZE = 64


@dataclass(frozen=True, slots=True)
class PreparedNode:
    node: Node
    deps: tuple[str, ...]  # distinct `depends_on`, in order
    dependents: tuple[str, ...]
    input_names: tuple[str, ...] | None  # referenced `inputs.*`; None: the whole inputs mapping
    replay: ReplayClass
    memoize: bool
    timeout: float
    attempts: int
    external: bool  # its definition reads files (script path or `files:`)
    static_definition: str | None  # definition digest when `external` is False
    id: str
    kind: str
    reads_run: bool = False  # its templates read `run.id`: the run id is part of its key


@dataclass(frozen=True, slots=True)
class PreparedWorkflow:
    workflow: Workflow
    order: tuple[str, ...]
    nodes: dict[str, PreparedNode]

    def sinks(self) -> list[str]:
        return [n for n in self.order if not self.nodes[n].dependents]


_cache: OrderedDict[int, PreparedWorkflow] = OrderedDict()


def _tool_class(node: Node, tools: ToolRegistry) -> ReplayClass | None:
    if node.tool is None:
        return None
    try:
        return tools.get(node.tool).replay
    except BatonError:
        return None  # unknown tool: the step fails when it runs; meanwhile it counts as unsafe


def _prepare_node(workflow: Workflow, node: Node, dependents: list[str], tools: ToolRegistry) -> PreparedNode:
    refs = references(node)
    whole = refs.whole_inputs or node.kind == "script"
    cls = replay_class(workflow, node, _tool_class(node, tools))
    external = node.kind == "script" or bool(node.files)
    return PreparedNode(
        node=node,
        deps=tuple(dict.fromkeys(node.depends_on)),
        dependents=tuple(dependents),
        input_names=None if whole else tuple(sorted(refs.inputs)),
        replay=cls,
        memoize=workflow.memoize(node),
        timeout=workflow.timeout(node),
        attempts=attempts_allowed(cls, node.retry),
        external=external,
        static_definition=None if external else definition_digest(node, script_source=None, files={}),
        id=node.id,
        kind=node.kind,
        reads_run="run" in refs.names,
    )


def prepare(workflow: Workflow, tools: ToolRegistry) -> PreparedWorkflow:
    """The per-definition precomputation, cached by workflow object (LRU)."""
    key = id(workflow)
    cached = _cache.get(key)
    if cached is not None and cached.workflow is workflow:
        _cache.move_to_end(key)
        return cached
    order = topological_order(workflow)
    dependents: dict[str, list[str]] = {n.id: [] for n in workflow.nodes}
    for node in workflow.nodes:
        for dep in dict.fromkeys(node.depends_on):
            dependents[dep].append(node.id)
    nodes = {n.id: _prepare_node(workflow, n, dependents[n.id], tools) for n in workflow.nodes}
    prepared = PreparedWorkflow(workflow=workflow, order=tuple(order), nodes=nodes)
    _cache[key] = prepared
    while len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)
    return prepared


@dataclass(frozen=True, slots=True)
class Definitions:
    """Definition digests of every node and the source of every script node, read at one time."""

    digests: dict[str, str]
    sources: dict[str, str]


def read_definitions(prepared: PreparedWorkflow) -> Definitions:
    """Every node's definition digest, reading script sources and `files:` now."""
    digests: dict[str, str] = {}
    sources: dict[str, str] = {}
    workflow = prepared.workflow
    for node_id, pn in prepared.nodes.items():
        if pn.static_definition is not None:
            digests[node_id] = pn.static_definition
            continue
        source = script_source(workflow, pn.node) if pn.node.kind == "script" else None
        if source is not None:
            sources[node_id] = source
        files = files_content(workflow, pn.node) if pn.node.files else {}
        digests[node_id] = definition_digest(pn.node, script_source=source, files=files)
    return Definitions(digests=digests, sources=sources)
