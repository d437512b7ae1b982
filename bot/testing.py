"""The project's "baton.testing": Baton's production wiring for tests.

    baton = testing.build(tmp_path)                          # in memory, workflows in tmp_path/workflows
    baton = testing.build(tmp_path, database_url=url)        # SQLite or PostgreSQL, migrated
    baton = testing.build(tmp_path, tools=tools, access=policy, lease_seconds=2.0)
    baton.engine, baton.handler, baton.store, baton.outbox, baton.deadlines, …
    async with baton.running(handle_signals=False, schedules=False):  # the loops too
        ...

Every test rig that needs an engine or a handler builds it here, through the functions
`build_baton` uses (`bot.runtime.steps_and_workflows`, `open_store`, `load_tools`, and
`bot.app.wire`, the composition root), so tests run the production wiring: the engine gets
its approvers from the access settings, the handler its delivery, the loops their settings.
What a test swaps is a parameter (the store, the tools, the providers, the executor, the
clock, any settings field), never an attribute patched afterwards.

What the builder leaves out is the process's hardening (`bot.runtime.assemble`: the process
made non-dumpable, secrets removed from `os.environ`, the log handler's redactor replaced)
and the step sandbox (none unless given): a test process keeps its environment and its logs.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.app import Baton, engine_config, wire
from bot.runtime import Runtime, load_tools, open_store, steps_and_workflows
from core.commands.pages import RunPages
from core.config import Settings
from core.engine.executor import RunnerFactory
from core.engine.providers import FakeProvider, ProviderRegistry
from core.engine.sandbox import NO_SANDBOX, Sandbox
from core.engine.tools import ToolRegistry
from core.store.memory import MemoryStore
from core.store.port import Store

if TYPE_CHECKING:  # procrastinate is imported only by the tests of BATON_EXECUTOR=procrastinate
    from core.engine.distributed import RemoteDispatcher

__all__ = ["build", "fake_providers", "settings_for"]

#: what a test's settings are unless it says otherwise: nothing read from `.env`, the
#: workflows and data under the test's directory, no tool modules, a fixed replica name
TEST_REPLICA = "test"


def settings_for(root: Path, **fields: Any) -> Settings:
    """Settings for a test under `root` (workflows in `root/workflows`, data in `root/data`);
    `fields` are any of `Settings`' fields, as the environment would set them."""
    values: dict[str, Any] = {
        "_env_file": None,  # a developer's `.env` never reaches a test
        "workflow_dirs": [root / "workflows"],
        "data_dir": root / "data",
        "tool_modules": [],
        "replica_id": TEST_REPLICA,
        "step_sandbox": "none",
    }
    values.update(fields)
    return Settings(**values)


def fake_providers() -> ProviderRegistry:
    """The prompt providers of a test: the fake one, the default."""
    return ProviderRegistry({"fake": FakeProvider()}, "fake")


def build(
    root: Path,
    *,
    database_url: str | None = None,
    store: Store | None = None,
    tools: ToolRegistry | None = None,
    providers: ProviderRegistry | None = None,
    runners: RunnerFactory | None = None,
    dispatcher: RemoteDispatcher | None = None,
    clock: Callable[[], float] = time.time,
    sandbox: Sandbox = NO_SANDBOX,
    environ: Mapping[str, str] | None = None,
    pages: RunPages | None = None,
    group_commit: float | None = None,
    **fields: Any,
) -> Baton:
    """Baton as `build_baton` wires it, for a test under `root`.

    The store: `store` when given (one several replicas share, or a wrapper that counts
    calls; the caller closes it), else the database at `database_url` (opened and migrated as
    the runtime does; `baton.close()` closes it), else a `MemoryStore`. `tools`: the steps'
    tools (else those of `tool_modules`, none by default); `providers`: the fake provider by
    default; `runners` / `dispatcher`: another executor of the steps (`Engine(runners=…)`);
    `clock`: when votes are cast and deadlines are due; `sandbox`: the steps' (none by
    default); `environ`: what steps inherit and secrets are read from (this process's
    environment by default); `pages`: the run pages' links; `group_commit`: seconds a pure
    result may wait for its commit, beyond the range of `group_commit_ms` (a crash test's
    hour). `fields`: settings
    (`settings_for`), e.g. `access=`, `lease_seconds=`, `replica_id=`, `group_commit_ms=`."""
    if database_url is not None:
        fields["database_url"] = database_url
    settings = settings_for(root, **fields)
    environment, catalog = steps_and_workflows(
        settings, dict(os.environ) if environ is None else environ, sandbox
    )
    if store is None:
        store = open_store(settings) if database_url is not None else MemoryStore()
    runtime = Runtime(
        settings=settings,
        redactor=environment.redactor,
        environment=environment,
        catalog=catalog,
        providers=providers if providers is not None else fake_providers(),
        tools=tools if tools is not None else load_tools(
            settings.tool_modules, settings.workflow_dirs, sandbox, data_dir=settings.data_dir
        ),
        store=store,
    )
    config = engine_config(runtime)
    if group_commit is not None:
        config = dataclasses.replace(config, group_commit=group_commit)
    return wire(runtime, pages=pages, dispatcher=dispatcher, runners=runners, clock=clock, config=config)
