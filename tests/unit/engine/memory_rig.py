"""A `RunExecutor` and an `Engine` on `MemoryStore` with in-process tools: no database, no
subprocess. Steps are inline or async tools that count their calls."""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import testing
from core.engine.engine import Engine
from core.engine.events import EngineEvent, EventBus
from core.engine.executor import RunExecutor, RunnerFactory, Setup
from core.engine.local_runner import LocalStepRunner
from core.engine.prepared import prepare, read_definitions
from core.engine.providers import FakeProvider, ProviderRegistry
from core.engine.tools import ToolRegistry
from core.engine.workdirs import run_dirs
from core.store.memory import MemoryStore
from core.store.records import Run, RunStatus
from core.workflows.loader import load_workflow_text
from core.workflows.model import Workflow
from tests.environments import step_environment
from tests.factories import create_run


@dataclass
class Rig:
    root: Path
    store: MemoryStore = field(default_factory=MemoryStore)
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    calls: Counter[str] = field(default_factory=Counter)
    events: list[EngineEvent] = field(default_factory=list)
    providers: ProviderRegistry = field(
        default_factory=lambda: ProviderRegistry({"fake": FakeProvider()}, "fake")
    )

    def __post_init__(self) -> None:
        self.environment = step_environment()
        self.bus = EventBus()

        async def record(event: EngineEvent) -> None:
            self.events.append(event)

        self.bus.subscribe(record)

    def counted(self, name: str, *, replay: str = "pure", value: Any = None, fail: int = 0) -> None:
        """An inline tool `name` that counts its calls, failing its first `fail` calls."""

        @self.tools.tool(name, replay=replay, inline=True)
        def tool(text: str = "") -> Any:
            self.calls[name] += 1
            if self.calls[name] <= fail:
                raise RuntimeError(f"{name} broke (call {self.calls[name]})")
            return value if value is not None else f"{name}({text})"

    def workflow(self, yaml: str) -> Workflow:
        return load_workflow_text(textwrap.dedent(yaml))

    def run(self, workflow: Workflow, *, resumed_from: str | None = None) -> Run:
        return create_run(self.store, workflow=workflow.name, platform="console", conversation="c1",
                          thread=None, requester="console:ana", args_digest=self.store.blobs.put_blob(b"{}"),
                          status=RunStatus.RUNNING, resumed_from=resumed_from)  # fmt: skip

    def executor(
        self, workflow: Workflow, run: Run, *, args: Mapping[str, Any] | None = None,
        runner: RunnerFactory = LocalStepRunner, group_commit: float = 0.0,
    ) -> RunExecutor:  # fmt: skip
        prepared = prepare(workflow, self.tools)
        setup = Setup(
            store=self.store, prepared=prepared,
            definitions=read_definitions(prepared, providers=self.providers), run=run,
            args=dict(args or {}), lineage=tuple(self.store.steps.lineage(run.id)),
            dirs=run_dirs(self.root / "data", run.id), providers=self.providers, tools=self.tools,
            bus=self.bus, environment=self.environment, group_commit=group_commit,
        )  # fmt: skip
        return RunExecutor(setup, runner)

    def engine(self, **workflows: str) -> Engine:
        """An engine over workflow files written for it (name -> YAML)."""
        folder = self.root / "workflows"
        folder.mkdir(parents=True, exist_ok=True)
        for name, yaml in workflows.items():
            (folder / f"{name}.yaml").write_text(textwrap.dedent(yaml))
        engine = testing.build(self.root, store=self.store, tools=self.tools, providers=self.providers,
                               replica_id="unit").engine  # fmt: skip
        engine.subscribe(self._record)
        return engine

    async def _record(self, event: EngineEvent) -> None:
        self.events.append(event)

    def kinds(self, node_id: str) -> list[str]:
        return [str(e.kind) for e in self.events if e.node_id == node_id]
