"""A Baton of real parts for the benchmarks: store, catalog, engine and handler in a temp dir.

Nothing is faked: the engine journals to a real SQLite (WAL, synchronous NORMAL or FULL)
or PostgreSQL database through `SqlStore`. The only bench-specific parts are the generated
workflows (N tool steps, chain or fan-out) and the tools they call (`bench_tools`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bot import testing
from bot.startup import started
from core.commands.handler import Handler
from core.engine.engine import Engine, EngineConfig
from core.engine.providers import ProviderRegistry
from core.engine.sandbox import NO_SANDBOX, Sandbox
from core.engine.tools import ToolRegistry
from core.store.repository import SqlStore
from core.workflows.catalog import Catalog

Shape = Literal["chain", "fanout"]
Synchronous = Literal["NORMAL", "FULL"]
DURABILITY = {
    "NORMAL": "SQLite WAL, synchronous=NORMAL (Baton default)",
    "FULL": "SQLite WAL, synchronous=FULL",
    "postgres": "PostgreSQL 15, synchronous_commit=on (fsync per commit)",
}


def step_id(i: int) -> str:
    return f"s{i:05d}"


def steps_yaml(name: str, n: int, shape: Shape, *, tool: str = "noop", last_tool: str | None = None) -> str:
    """A workflow of `n` tool steps: each depending on the previous one (chain) or none (fan-out)."""
    lines = [f"name: {name}", "defaults: {replay: pure}", "nodes:"]
    for i in range(n):
        lines.append(f"  - id: {step_id(i)}")
        if shape == "chain" and i > 0:
            lines.append(f"    depends_on: [{step_id(i - 1)}]")
        lines.append(f"    tool: {last_tool if (last_tool and i == n - 1) else tool}")
    return "\n".join(lines) + "\n"


def bench_tools(extra: Callable[[ToolRegistry], None] | None = None) -> ToolRegistry:
    """`noop` (pure, inline: the cheapest step Baton has) plus whatever `extra` registers."""
    registry = ToolRegistry()

    @registry.tool("noop", replay="pure", inline=True)
    def noop() -> str:
        return "ok"

    if extra is not None:
        extra(registry)
    return registry


@dataclass
class Rig:
    root: Path
    store: SqlStore
    catalog: Catalog
    engine: Engine
    handler: Handler

    @property
    def workflows(self) -> Path:
        return self.root / "workflows"

    def add_workflow(self, name: str, text: str) -> Path:
        path = self.workflows / f"{name}.yaml"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)  # a new inode: the catalog sees the change at once
        return path

    async def run(self, workflow: str, args: dict[str, Any] | None = None, **kw: Any) -> str:
        """Start a run and wait until it rests; its id."""
        run = await self.engine.start_run(
            workflow=workflow,
            args=args or {},
            platform=kw.pop("platform", "console"),
            conversation=kw.pop("conversation", "bench"),
            thread=kw.pop("thread", None),
            requester=kw.pop("requester", "console:bench"),
            **kw,
        )
        await self.engine.wait(run.id)
        return run.id


def sqlite_url(root: Path) -> str:
    return f"sqlite:///{root / 'baton.db'}"


@contextlib.asynccontextmanager
async def rig(
    root: Path,
    *,
    url: str | None = None,
    synchronous: Synchronous = "NORMAL",
    tools: ToolRegistry | None = None,
    providers: ProviderRegistry | None = None,
    max_parallel: int = 4,
    replica_id: str = "bench",
    start_engine: bool = False,
    group_commit: float = EngineConfig.group_commit,
    sandbox: Sandbox = NO_SANDBOX,
    step_secrets: tuple[str, ...] = (),
) -> AsyncIterator[Rig]:
    """Baton as `baton run` wires it (`bot.testing.build` -> `bot.app.wire`: the engine gets
    the access's approvers, the handler its delivery), on a real database. `step_secrets`:
    names of this process's environment the workflows may declare (`BATON_STEP_SECRETS`)."""
    (root / "workflows").mkdir(parents=True, exist_ok=True)
    store = SqlStore(url or sqlite_url(root), sqlite_synchronous=synchronous)
    store.migrate()
    baton = testing.build(
        root,
        store=store,
        tools=tools or bench_tools(),
        providers=providers,
        sandbox=sandbox,
        group_commit=group_commit,
        max_parallel=max_parallel,
        replica_id=replica_id,
        step_secrets=list(step_secrets),
    )
    if start_engine:
        await baton.engine.start()
    started(collect=True)  # as `baton run` does once running: the start's objects frozen out of GC
    try:
        yield Rig(root, store, baton.catalog, baton.engine, baton.handler)
    finally:
        await baton.engine.stop(grace=5.0)
        store.close()
