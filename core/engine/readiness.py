"""`Readiness`: a run's workflow resolved and read, before its status changes.

    readiness.ready(workflow, args)   -> Ready   # current definition, tools, sources, args checked
    readiness.args_of(run)            -> dict    # the run's arguments (its args blob)

Every action that makes a run execute (start, resume, approve, resolve, recovery) reads its
workflow here first, so a broken definition, a missing tool or secret, or bad arguments
surface before anything changes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.engine.prepared import Definitions, PreparedWorkflow, prepare, read_definitions
from core.engine.providers import ProviderRegistry
from core.engine.step_env import StepEnvironment
from core.engine.subruns import child_definitions, with_children
from core.engine.tools import ToolRegistry, unregistered
from core.errors import BatonError, InputValidationError, UnknownWorkflow
from core.store.port import Blobs
from core.store.records import Run
from core.workflows.args import validate_inputs
from core.workflows.catalog import Catalog
from core.workflows.model import Workflow

log = logging.getLogger("baton.engine")


@dataclass(frozen=True, slots=True)
class Ready:
    """A run's workflow, resolved and read, before its status changes (errors surface first)."""

    workflow: Workflow
    prepared: PreparedWorkflow
    definitions: Definitions
    args: dict[str, Any]
    tools: ToolRegistry  # the registry the keys were computed with: the execution uses it


class Readiness:
    def __init__(
        self,
        *,
        blobs: Blobs,
        catalog: Catalog,
        providers: ProviderRegistry,
        tools: ToolRegistry,
        environment: StepEnvironment,
    ) -> None:
        self.blobs = blobs
        self.catalog = catalog
        self.providers = providers
        self.tools = tools  # replaced by a refreshed registry when a tool module changes
        self.environment = environment

    def args_of(self, run: Run) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.blobs.get_blob(run.args_digest))
        return value

    def workflow(self, name: str) -> Workflow:
        self.catalog.reload()
        return self.catalog.get(name)

    def ready(self, workflow_name: str, args: Mapping[str, Any], *, to_run: bool = True) -> Ready:
        """The workflow resolved and read. `to_run`: its steps are about to execute, so every
        secret it declares must be available (`MissingSecret` otherwise: nothing starts)."""
        workflow = self.workflow(workflow_name)
        tools = self.current_tools(workflow)
        prepared = prepare(workflow, tools)
        checked = validate_inputs(workflow, args)
        if to_run:
            missing = unregistered(workflow, tools)
            if missing is not None:  # refused now, not at that step (after an approval, say)
                raise missing
            self.environment.require(workflow.name, workflow.declared_secrets())
        definitions = read_definitions(prepared, providers=self.providers)
        if any(node.workflow is not None for node in workflow.nodes):  # a child's definition counts
            children = child_definitions(self.workflow, tools, self.providers)
            definitions = with_children(definitions, prepared, children)
        return Ready(workflow, prepared, definitions, checked, tools)

    def for_run(self, run: Run, args: Mapping[str, Any] | None = None, *, to_run: bool = True) -> Ready:
        """`ready` for a run that exists, with its own args unless `args` are given. A
        workflow no file defines any more (the file removed or renamed, its `name:` changed),
        or one whose inputs its args no longer fit, is said as such, with the ways on, instead
        of "no workflow named …" or "pass it with --set" (a resume takes no `--set`)."""
        try:
            return self.ready(run.workflow, self.args_of(run) if args is None else args, to_run=to_run)
        except InputValidationError as exc:  # the workflow changed its inputs since the run began
            if args is not None:
                raise
            why = exc.message.split(": pass it with", 1)[0]  # a resume takes no `--set`: the hint says how
            raise InputValidationError(
                f"run {run.id}'s arguments no longer fit `{run.workflow}`: {why}",
                hint=f"A resume keeps a run's arguments; re-use its results in a new run with the ones it "
                f"needs now: `/workflow run {run.workflow} --resume-from {run.id} --set …`.",
            ) from exc
        except UnknownWorkflow as exc:
            raise UnknownWorkflow(
                f"run {run.id} is a run of `{run.workflow}`, which no workflow file defines any more",
                hint=f"Put its file back (with `name: {run.workflow}`) to go on with it, or "
                f"`/workflow abandon {run.id}`.",
            ) from exc

    def current_tools(self, workflow: Workflow) -> ToolRegistry:
        """The tools as their files are now: a changed tool module is imported again, so what
        runs, and what its callers' keys say ran, is the code on disk. A module that no
        longer imports fails the workflows that call tools; the others go on."""
        try:
            self.tools = self.tools.refreshed()
        except BatonError as exc:
            if any(node.kind == "tool" for node in workflow.nodes):
                raise
            log.warning("tool modules not reloaded: %s", exc.message, extra={"action": "tools_reload"})
        return self.tools
