"""What a step's result depends on besides its YAML node, its inputs and its upstream outputs.

`identity_components(workflow, node, tools=, providers=)` gives the components a node's cache
key holds for the things that can change its result while its YAML node stays the same:

    "tool":     {name: identity}   tool steps: the tool's declared version or its source
                                   (`core/engine/tool_identity.py`)
    "provider": {name, model, …}   prompt steps: what answers, `Provider.identity()`: the node's
                                   `provider:`, else the workflow's `defaults.provider`, else the
                                   settings' default; never a secret
    "env":      {NAME: digest}     the step's `env:` values (the workflow's, then the node's),
                                   for steps that see them
    "secrets":  [NAME, …]          the names of the secrets the step receives (the workflow's and
                                   the node's), never their values: rotating a token re-uses
                                   results, declaring another one does not

A component is present only when it applies, so a step that has none keys exactly as before
these existed (its earlier results stay valid). Approval steps have none: their question is
their definition. Steps that see the workflow's environment are bash, script and tool steps,
and prompt steps whose provider runs a process (`Provider.reads_env`).

This is the one place to add a new kind of identity: a component returned here is stored,
hashed (`cache_key.components_of`), explained (`cache_key.explain`) and shown by `plan`.
Values known only while a run executes (upstream outputs, and later a gate's decision or the
outcome of `when:`) join the key in the executor, next to `upstream`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from core.engine.cache_key import UNREGISTERED, digest_value

if TYPE_CHECKING:
    from core.engine.providers import ProviderRegistry
    from core.engine.tools import ToolRegistry
    from core.workflows.model import Node, Workflow


def environment_components(workflow: Workflow, node: Node | None = None) -> dict[str, Any]:
    """The `env` value digests and secret names a step receives (when any): the workflow's,
    and the node's own on top when `node` has some."""
    env = workflow.env if node is None else workflow.step_env(node)
    secrets = workflow.secrets if node is None else workflow.step_secrets(node)
    components: dict[str, Any] = {}
    if env:
        components["env"] = {name: digest_value(value) for name, value in sorted(env.items())}
    if secrets:
        components["secrets"] = sorted(set(secrets))
    return components


def identity_components(
    workflow: Workflow,
    node: Node,
    *,
    tools: ToolRegistry,
    providers: ProviderRegistry,
    environment: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The node's identity components (see the module docstring); `environment` is
    `environment_components(workflow)`, passed in when computed once for many nodes (it is
    used for nodes without `env:` or `secrets:` of their own)."""
    kind = node.kind
    if kind == "approval":
        return {}
    components: dict[str, Any] = {}
    sees_env = True
    if kind == "tool" and node.tool is not None:
        components["tool"] = {node.tool: tools.identity(node.tool) or UNREGISTERED}
    elif kind == "prompt":
        name = workflow.provider(node)
        components["provider"] = providers.identity(name)
        sees_env = providers.reads_env(name)
    if sees_env:
        if node.env or node.secrets or environment is None:
            components.update(environment_components(workflow, node))
        else:
            components.update(environment)
    return components
