"""Group commit of pure inline steps (core/engine/group_commit.py), on a real SQLite store.

Batches are bounded by a window and a size; anything else the executor writes commits the
batch first; an execution that ends (however it ends) commits what is pending; a batch
that cannot be committed is kept and committed later.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from core.engine.engine import Engine
from core.engine.group_commit import PendingResults
from core.engine.tools import ToolRegistry
from core.errors import StoreError
from core.store.port import StepResult
from core.store.records import NodeStatus, Run, RunStatus
from core.store.repository import SqlStore
from tests.factories import create_run
from tests.integration.engine.test_hot_path import CountingStore, N, _chain, _engine, _start, _tools

HOUR = 3600.0


def _write(root: Path, name: str, lines: list[str]) -> None:
    (root / "workflows").mkdir(parents=True, exist_ok=True)
    (root / "workflows" / f"{name}.yaml").write_text("\n".join([f"name: {name}", "nodes:", *lines]) + "\n")


async def _start_named(engine: Engine, workflow: str) -> Run:
    return await engine.start_run(
        workflow=workflow, args={}, platform="console", conversation="c", thread=None, requester="console:t"
    )


def _statuses(store: CountingStore, run_id: str) -> dict[str, str]:
    return {e.node_id: e.status.value for e in store.inner.steps.journal([run_id])}


async def test_a_chain_of_pure_steps_commits_in_batches_of_at_most_512(
    tmp_path: Path, sqlite_url: str
) -> None:
    _chain(tmp_path)
    engine, store = _engine(tmp_path, sqlite_url, _tools(lambda: True), group_commit=HOUR)

    run = await _start(engine)
    await engine.stop()

    assert run.status is RunStatus.COMPLETED
    assert store.calls["journal_complete_many"] == 2  # 512 results, then the other 488 at the end
    entries = store.inner.steps.journal([run.id])
    assert len(entries) == N and {e.status for e in entries} == {NodeStatus.COMPLETED}
    assert store.inner.blobs.get_blob(entries[-1].output_digest or "") == b"through"


async def test_the_default_window_commits_far_less_often_than_once_per_step(
    tmp_path: Path, sqlite_url: str
) -> None:
    _chain(tmp_path)
    engine, store = _engine(tmp_path, sqlite_url, _tools(lambda: True))  # EngineConfig's default

    run = await _start(engine)
    await engine.stop()

    assert run.status is RunStatus.COMPLETED
    assert 1 <= store.calls["journal_complete_many"] < N // 4, store.calls
    assert len(store.inner.steps.journal([run.id])) == N


async def _run_watched(
    tmp_path: Path, sqlite_url: str, last: str, replay: str, middle: str = "quick"
) -> tuple[dict[str, str], CountingStore, Run]:
    """Run `a` (pure) -> `b` (`middle`) -> `watch` (an inline tool of class `replay`) with an
    hour-long window; `watch` records what a reader on another connection sees of the run."""
    _write(
        tmp_path,
        "watched",
        [
            "  - id: a\n    tool: quick",
            f"  - id: b\n    tool: {middle}\n    depends_on: [a]",
            f"  - id: {last}\n    tool: watch\n    depends_on: [b]\n    with: {{run_id: '{{{{ run.id }}}}'}}",
        ],
    )
    seen: dict[str, str] = {}
    reader = SqlStore(sqlite_url)
    tools = ToolRegistry()
    tools.tool("quick", replay="pure", inline=True)(lambda: "ok")
    tools.tool("send", replay="idempotent", inline=True)(lambda: "sent")

    @tools.tool("watch", replay=replay, inline=True)
    def watch(run_id: str) -> str:
        seen.update({e.node_id: e.status.value for e in reader.steps.journal([run_id])})
        return "watched"

    engine, store = _engine(tmp_path, sqlite_url, tools, group_commit=HOUR)
    try:
        run = await _start_named(engine, "watched")
        done = await engine.wait(run.id, timeout=60)
    finally:
        await engine.stop()
        reader.close()
    assert done.status is RunStatus.COMPLETED, done.status_reason
    return seen, store, done


async def test_an_unsafe_steps_start_is_committed_after_the_results_before_it(
    tmp_path: Path, sqlite_url: str
) -> None:
    """While `risky` runs, a reader on another connection sees `a` and `b` completed."""
    seen, _, _ = await _run_watched(tmp_path, sqlite_url, "risky", "unsafe")

    assert seen == {"a": "completed", "b": "completed", "risky": "started"}


async def test_an_idempotent_result_is_committed_at_once_with_what_is_pending(
    tmp_path: Path, sqlite_url: str
) -> None:
    seen, store, run = await _run_watched(tmp_path, sqlite_url, "look", "pure", middle="send")

    assert seen == {"a": "completed", "b": "completed"}  # one transaction, before `look` ran
    assert store.calls["journal_complete_many"] == 2  # a + b together, then look at the end
    assert _statuses(store, run.id) == {"a": "completed", "b": "completed", "look": "completed"}


async def test_an_idle_executor_commits_when_the_window_ends(tmp_path: Path, sqlite_url: str) -> None:
    """`slow` (async, started first) blocks until the store reports a commit. `quick` then
    completes next to it, and its result is committed by the window's timer while the
    executor waits for `slow`: nothing else is written in between."""
    _write(tmp_path, "idle", ["  - id: slow\n    tool: slow", "  - id: quick\n    tool: quick"])
    committed = asyncio.Event()
    tools = ToolRegistry()
    tools.tool("quick", replay="pure", inline=True)(lambda: "ok")

    @tools.tool("slow", replay="pure")
    async def slow() -> str:
        async with asyncio.timeout(10):
            await committed.wait()
        return "waited"

    engine, store = _engine(tmp_path, sqlite_url, tools, group_commit=0.05)
    real = store.inner.steps.journal_complete_many
    batches: list[list[str]] = []

    def noting(results: Any) -> None:
        real(results)
        batches.append([r.node_id for r in results])
        committed.set()

    store.inner.steps.journal_complete_many = noting  # type: ignore[method-assign]
    try:
        run = await _start_named(engine, "idle")
        done = await engine.wait(run.id, timeout=60)
    finally:
        await engine.stop()

    assert done.status is RunStatus.COMPLETED, done.status_reason
    assert batches == [["quick"]]
    assert _statuses(store, run.id) == {"slow": "completed", "quick": "completed"}


async def test_results_pending_when_a_step_fails_are_kept(tmp_path: Path, sqlite_url: str) -> None:
    _write(
        tmp_path,
        "failing",
        ["  - id: a\n    tool: quick", "  - id: b\n    tool: boom\n    depends_on: [a]\n    replay: pure"],
    )
    tools = ToolRegistry()
    tools.tool("quick", replay="pure", inline=True)(lambda: "ok")

    @tools.tool("boom", replay="pure", inline=True)
    def boom() -> str:
        raise RuntimeError("no")

    engine, store = _engine(tmp_path, sqlite_url, tools, group_commit=HOUR)
    run = await _start_named(engine, "failing")
    done = await engine.wait(run.id, timeout=60)
    await engine.stop()

    assert done.status is RunStatus.FAILED
    assert _statuses(store, run.id) == {"a": "completed", "b": "failed"}


class _FailingOnce:
    """A store whose first group commit fails like a locked or unreachable database."""

    def __init__(self, inner: SqlStore) -> None:
        self.inner = inner
        self.failures = 1

    def journal_complete_many(self, results: list[StepResult]) -> None:
        if self.failures:
            self.failures -= 1
            raise StoreError("The run store could not record step results (database is locked).")
        self.inner.steps.journal_complete_many(results)


async def test_a_batch_that_fails_to_commit_stays_pending_and_commits_later(sqlite_url: str) -> None:
    inner = SqlStore(sqlite_url)
    inner.migrate()
    try:
        run_id = create_run(
            inner,
            workflow="w", platform="console", conversation="c", thread=None, requester="console:t",
            args_digest=inner.blobs.put_blob(b"{}"),
        ).id  # fmt: skip
        pending = PendingResults(_FailingOnce(inner), HOUR)  # type: ignore[arg-type]
        for node in ("a", "b"):
            pending.add(StepResult(run_id, node, f"k-{node}", {}, 1, None, node.encode()))
        with pytest.raises(StoreError):
            pending.flush()
        assert len(pending) == 2 and inner.steps.journal([run_id]) == []
        pending.flush()
        assert len(pending) == 0
        assert [e.node_id for e in inner.steps.journal([run_id])] == ["a", "b"]
        assert inner.blobs.get_blob(inner.steps.journal([run_id])[1].output_digest or "") == b"b"
    finally:
        inner.close()
