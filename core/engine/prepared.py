"""What the engine works out once per workflow definition, not once per step.

`prepare(workflow, tools)` gives the topological order, dependency maps, each node's
referenced inputs, replay class, memoize flag, timeout, attempts and the digest of its
definition (worked out when a key first needs it, then kept). Everything that does not
depend on files outside the YAML is cached per `Workflow` object (the catalog hands out the
same object until the file changes) and tool registry (a new one when a tool module
changed); script sources and `files:` are re-read for every execution (`read_definitions`),
which is how fixing a producer's script file busts its key without renaming anything.
`read_definitions` also gives each node's identity components (`step_identity.py`): its
tool's code, its provider, the workflow's `env:`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from cachetools import LRUCache

from core.engine.cache_key import definition_digest, encode_identity
from core.engine.replay import attempts_allowed, replay_class
from core.engine.step_identity import environment_components, identity_components
from core.errors import BatonError
from core.store.records import ReplayClass
from core.workflows.limits import gc_paused
from core.workflows.loader import files_content, names_workflow_files, script_source
from core.workflows.model import Node, Workflow
from core.workflows.templating import references
from core.workflows.validation import topological_order

if TYPE_CHECKING:
    from core.engine.providers import ProviderRegistry
    from core.engine.tools import ToolRegistry

_CACHE_SIZE = 64


_NO_ENV: Mapping[str, str] = MappingProxyType({})


class PreparedNode(NamedTuple):
    """One node as the engine runs it. A named tuple rather than a frozen dataclass: as
    immutable, and built in one C call where a frozen dataclass sets each field through
    `object.__setattr__`, which was a large part of preparing a big definition."""

    node: Node
    deps: tuple[str, ...]  # distinct `depends_on`, in order
    dependents: tuple[str, ...]
    input_names: tuple[str, ...] | None  # referenced `inputs.*`; None: the whole inputs mapping
    replay: ReplayClass
    memoize: bool
    timeout: float
    attempts: int
    external: bool  # its definition reads files (script path or `files:`)
    id: str
    kind: str
    reads_run: bool = False  # its templates read `run.id`: the run id is part of its key
    env: Mapping[str, str] = _NO_ENV  # `env:` values (the workflow's, then its own)
    secrets: tuple[str, ...] = ()  # the secrets its step receives (the workflow's and its own)
    network: bool = True  # False: its step runs without network (`network: false`)
    #: holds the definition digest once worked out (`static_definition`); a list per node
    digest_cache: list[str] | None = None

    @property
    def static_definition(self) -> str | None:
        """The definition digest when `external` is False (its YAML is all of it), else None.
        Worked out at the first look (a cache key needs it), then kept: loading and preparing
        a definition does not hash what no key asks for yet."""
        if self.external:
            return None
        cache = self.digest_cache
        if cache:
            return cache[0]
        digest = definition_digest(self.node, script_source=None, files={})
        if cache is not None:
            cache.append(digest)
        return digest


@dataclass(frozen=True, slots=True)
class Identities:
    providers: ProviderRegistry
    components: dict[str, dict[str, Any]]  # node -> identity components (`step_identity.py`)
    encoded: dict[str, tuple[str, ...]]  # the same, encoded for `key_prefix`


@dataclass(frozen=True, slots=True)
class PreparedWorkflow:
    workflow: Workflow
    order: tuple[str, ...]
    nodes: dict[str, PreparedNode]
    tools: ToolRegistry  # the registry the replay classes and tool identities come from
    #: `Identities` per provider registry (one per engine): computed once per definition
    identities: dict[int, Identities] = field(default_factory=dict)

    def sinks(self) -> list[str]:
        return [n for n in self.order if not self.nodes[n].dependents]


_cache: LRUCache[int, PreparedWorkflow] = LRUCache(_CACHE_SIZE)


def _tool_class(node: Node, tools: ToolRegistry) -> ReplayClass | None:
    if node.tool is None:
        return None
    try:
        return tools.get(node.tool).replay
    except BatonError:
        return None  # unknown tool: the step fails when it runs; meanwhile it counts as unsafe


def _distinct(ids: list[str]) -> tuple[str, ...]:
    """`ids` without repeats, in order (most nodes have at most one dependency)."""
    return tuple(ids) if len(ids) < 2 else tuple(dict.fromkeys(ids))


@dataclass(frozen=True, slots=True)
class _Context:
    """What every node of one workflow shares: its `env:` and secrets, built once."""

    env: Mapping[str, str]
    secrets: tuple[str, ...]
    tool_classes: dict[str, ReplayClass | None]  # by tool name: most nodes share a few tools

    @classmethod
    def of(cls, workflow: Workflow) -> _Context:
        return cls(MappingProxyType(dict(workflow.env)), tuple(dict.fromkeys(workflow.secrets)), {})

    def tool_class(self, node: Node, tools: ToolRegistry) -> ReplayClass | None:
        """`_tool_class`, looked up once per tool name."""
        if node.tool is None:
            return None
        known = self.tool_classes
        if node.tool not in known:
            known[node.tool] = _tool_class(node, tools)
        return known[node.tool]


def _prepare_node(
    workflow: Workflow, node: Node, dependents: list[str], tools: ToolRegistry, context: _Context
) -> PreparedNode:
    refs = references(node)
    kind = node.kind
    whole = refs.whole_inputs or kind == "script"
    cls = replay_class(workflow, node, context.tool_class(node, tools))
    return PreparedNode(  # positional, in field order: keywords cost a third of preparing a node
        node,
        _distinct(node.depends_on),  # deps
        tuple(dependents),
        None if whole else tuple(sorted(refs.inputs)) if refs.inputs else (),  # input_names
        cls,  # replay
        workflow.memoize(node),
        workflow.timeout(node),
        attempts_allowed(cls, node.retry),
        kind == "script" or bool(node.files) or names_workflow_files(node),  # external
        node.id,
        kind,
        "run" in refs.names,  # reads_run
        MappingProxyType(workflow.step_env(node)) if node.env else context.env,
        workflow.step_secrets(node) if node.secrets else context.secrets,
        workflow.network_for(node),
        [],  # digest_cache
    )


def prepare(workflow: Workflow, tools: ToolRegistry) -> PreparedWorkflow:
    """The per-definition precomputation, cached by workflow object and tool registry (LRU).
    A new version of a file already prepared re-uses the prepared nodes it shares with the
    last one (the loader hands out the same `Node` object for an unchanged item)."""
    key = id(workflow)
    cached = _cache.get(key)
    if cached is not None and cached.workflow is workflow and cached.tools is tools:
        return cached
    previous = _by_source.get(workflow.source) if workflow.source else None
    with gc_paused():
        prepared = _prepare(workflow, tools, previous)
    _cache[key] = prepared
    if workflow.source:
        _by_source[workflow.source] = prepared
    return prepared


_by_source: LRUCache[str, PreparedWorkflow] = LRUCache(_CACHE_SIZE)  # the last one prepared per file


def _same_context(a: Workflow, b: Workflow) -> bool:
    """The workflow-level fields a prepared node depends on are the same."""
    return a.defaults == b.defaults and a.env == b.env and a.secrets == b.secrets and a.network == b.network


def _prepare(workflow: Workflow, tools: ToolRegistry, previous: PreparedWorkflow | None) -> PreparedWorkflow:
    order = topological_order(workflow)
    dependents: dict[str, list[str]] = {n.id: [] for n in workflow.nodes}
    for node in workflow.nodes:
        for dep in _distinct(node.depends_on):
            dependents[dep].append(node.id)
    old: dict[str, PreparedNode] = {}
    if previous is not None and previous.tools is tools and _same_context(previous.workflow, workflow):
        old = previous.nodes
    nodes: dict[str, PreparedNode] = {}
    context = _Context.of(workflow)
    for n in workflow.nodes:
        pn = old.get(n.id)
        if pn is not None and pn.node is n and pn.dependents == tuple(dependents[n.id]):
            nodes[n.id] = pn
        else:
            nodes[n.id] = _prepare_node(workflow, n, dependents[n.id], tools, context)
    return PreparedWorkflow(workflow=workflow, order=tuple(order), nodes=nodes, tools=tools)


@dataclass(frozen=True, slots=True)
class Definitions:
    """Definition digests of every node, the source of every script node and every node's
    identity components, read at one time."""

    digests: dict[str, str]
    sources: dict[str, str]
    identities: dict[str, dict[str, Any]]
    identities_json: dict[str, tuple[str, ...]]  # the same, encoded for `key_prefix`


def _shape(components: Mapping[str, Any]) -> tuple[tuple[str, object], ...]:
    """Equal for two nodes whose components encode alike: the objects nodes share (a
    provider's identity, the workflow's environment) by identity, and a tool's one-entry
    `{name: identity}`, built per node, by its name and identity (text)."""
    return tuple((k, tuple(v.items()) if k == "tool" else id(v)) for k, v in components.items())


def identities_of(prepared: PreparedWorkflow, providers: ProviderRegistry) -> Identities:
    """Every node's identity components under `prepared`'s tools and these providers;
    computed once per definition, tool registry and provider registry (cached on `prepared`)."""
    cached = prepared.identities.get(id(providers))
    if cached is not None and cached.providers is providers:
        return cached
    workflow, tools = prepared.workflow, prepared.tools
    environment = environment_components(workflow)
    components = {
        node_id: identity_components(
            workflow, pn.node, tools=tools, providers=providers, environment=environment
        )
        for node_id, pn in prepared.nodes.items()
    }
    by_shape: dict[tuple[tuple[str, object], ...], tuple[str, ...]] = {}  # nodes share most components
    encoded: dict[str, tuple[str, ...]] = {}
    for node_id, c in components.items():
        shape = _shape(c)
        found = by_shape.get(shape)
        if found is None:
            found = by_shape[shape] = encode_identity(c)
        encoded[node_id] = found
    result = Identities(providers, components, encoded)
    prepared.identities[id(providers)] = result
    return result


def read_definitions(prepared: PreparedWorkflow, *, providers: ProviderRegistry) -> Definitions:
    """Every node's definition digest, reading script sources and `files:` now, and its
    identity components under `prepared`'s tools and these providers."""
    digests: dict[str, str] = {}
    sources: dict[str, str] = {}
    workflow = prepared.workflow
    identities = identities_of(prepared, providers)
    for node_id, pn in prepared.nodes.items():
        if pn.static_definition is not None:
            digests[node_id] = pn.static_definition
            continue
        source = script_source(workflow, pn.node) if pn.node.kind == "script" else None
        if source is not None:
            sources[node_id] = source
        files = files_content(workflow, pn.node)  # an external node: its files, or none (a script)
        digests[node_id] = definition_digest(pn.node, script_source=source, files=files)
    return Definitions(
        digests=digests,
        sources=sources,
        identities=identities.components,
        identities_json=identities.encoded,
    )
