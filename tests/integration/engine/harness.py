"""A real engine on a real database with workflows written to a temporary directory."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import testing
from core.engine.engine import Engine
from core.engine.events import EngineEvent, EventKind
from core.engine.sandbox import NO_SANDBOX, Sandbox
from core.engine.tools import ToolRegistry
from core.store.records import JournalEntry, NodeStatus, Run
from core.store.repository import SqlStore
from core.workflows.catalog import Catalog


@dataclass
class Harness:
    root: Path
    store: SqlStore
    tools: ToolRegistry
    catalog: Catalog
    engine: Engine
    events: list[EngineEvent] = field(default_factory=list)

    @property
    def workflows(self) -> Path:
        return self.root / "workflows"

    def write(self, name: str, text: str) -> Path:
        """Write a file next to the workflows (a workflow YAML, a script, a declared file)."""
        path = self.workflows / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    async def start(self, workflow: str, args: Mapping[str, Any] | None = None, **kw: Any) -> Run:
        return await self.engine.start_run(
            workflow=workflow,
            args=dict(args or {}),
            platform="console",
            conversation="c1",
            thread=None,
            requester="console:ana",
            **kw,
        )

    async def run(self, workflow: str, args: Mapping[str, Any] | None = None, **kw: Any) -> Run:
        run = await self.start(workflow, args, **kw)
        return await self.engine.wait(run.id, timeout=30)

    def entries(self, run_id: str, node_id: str | None = None) -> list[JournalEntry]:
        return [
            e
            for e in self.store.steps.journal([run_id])
            if (node_id is None or e.node_id == node_id) and e.cache_key != ""
        ]

    def executed(self, run_id: str, node_id: str) -> int:
        """How many times `node_id` was dispatched in `run_id` (not counting cache copies)."""
        return sum(1 for e in self.entries(run_id, node_id) if e.cached_from is None)

    def output(self, run_id: str, node_id: str) -> str:
        done = [e for e in self.entries(run_id, node_id) if e.status is NodeStatus.COMPLETED]
        assert done, f"{node_id} has no completed entry in {run_id}"
        digest = done[-1].output_digest
        assert digest is not None
        return self.store.blobs.get_blob(digest).decode()

    def kinds(self, run_id: str, kind: EventKind) -> list[str | None]:
        return [e.node_id for e in self.events if e.run_id == run_id and e.kind is kind]


def make_harness(
    root: Path,
    url: str,
    *,
    lease_seconds: float = 15.0,
    max_parallel: int = 4,
    tools: ToolRegistry | None = None,
    sandbox: Sandbox | None = None,
) -> Harness:
    (root / "workflows").mkdir(parents=True, exist_ok=True)
    registry = tools if tools is not None else ToolRegistry()
    baton = testing.build(root, database_url=url, tools=registry, sandbox=sandbox or NO_SANDBOX,
                          lease_seconds=lease_seconds, max_parallel=max_parallel)  # fmt: skip
    assert isinstance(baton.store, SqlStore)
    store, catalog, engine = baton.store, baton.catalog, baton.engine
    harness = Harness(root=root, store=store, tools=registry, catalog=catalog, engine=engine)

    async def record(event: EngineEvent) -> None:
        harness.events.append(event)

    engine.subscribe(record)
    return harness
