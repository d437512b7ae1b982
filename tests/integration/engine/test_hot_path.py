"""Constant-query resumes and the per-step cost of the journal's hot path (real SQLite, WAL).

The store is wrapped in a counter (every call still reaches the real `SqlStore`) so the
tests can assert how many statements the engine issues, and how much of the wall time
is the engine's own. Figures are printed (`pytest -s`); bounds are loose because the
machine is shared, the query counts are exact.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot import testing
from core.engine.engine import Engine
from core.engine.tools import ToolRegistry
from core.store.port import Roles
from core.store.records import NodeStatus, RunStatus
from core.store.repository import SqlStore

N = 1000


class CountingStore:
    """The real store, with a count of calls per method and the seconds spent in it."""

    def __init__(self, inner: SqlStore) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name in ROLES:  # `store.steps.journal_start(StepEntry(…))` counts as `journal_start`
            return _CountedRole(attr, self)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            began = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - began

        return counted

    def reset(self) -> None:
        self.calls.clear()
        self.seconds = 0.0


ROLES = {name for name, value in vars(Roles).items() if isinstance(value, property)}


class _CountedRole:
    """A role of the real store, its calls counted in its `CountingStore`'s."""

    def __init__(self, role: Any, counting: CountingStore) -> None:
        self._role, self._counting = role, counting

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._role, name)
        counting = self._counting

        def counted(*args: Any, **kwargs: Any) -> Any:
            counting.calls[name] += 1
            began = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                counting.seconds += time.perf_counter() - began

        return counted


def _chain(root: Path, fail_last: bool = False) -> None:
    lines = ["name: chain", "nodes:"]
    for i in range(N):
        last = i == N - 1
        lines += [f"  - id: n{i}", "    tool: " + ("gate_keeper" if last else "noop")]
        if i:
            lines.append(f"    depends_on: [n{i - 1}]")
    (root / "workflows").mkdir(parents=True, exist_ok=True)
    (root / "workflows" / "chain.yaml").write_text("\n".join(lines) + "\n")


def _engine(
    root: Path, url: str, tools: ToolRegistry, *, group_commit: float = 0.01
) -> tuple[Engine, CountingStore]:
    real = SqlStore(url)
    real.migrate()
    store = CountingStore(real)
    engine = testing.build(
        root,
        store=store,  # type: ignore[arg-type]
        tools=tools,
        replica_id="bench",
        group_commit=group_commit,
    ).engine
    return engine, store


def _tools(allow: Callable[[], bool]) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool("noop", replay="pure", inline=True)
    def noop() -> str:
        return "ok"

    @tools.tool("gate_keeper", replay="pure", inline=True)
    def gate_keeper() -> str:
        if not allow():
            raise RuntimeError("not yet")
        return "through"

    return tools


async def _start(engine: Engine, **kw: Any) -> Any:
    run = await engine.start_run(
        workflow="chain",
        args={},
        platform="console",
        conversation="bench",
        thread=None,
        requester="console:bench",
        **kw,
    )
    return await engine.wait(run.id, timeout=120)


async def test_a_durable_inline_pure_step_is_one_commit(tmp_path: Path, sqlite_url: str) -> None:
    """Without group commit (window 0): one transaction per step, nothing else per step."""
    _chain(tmp_path)
    engine, store = _engine(tmp_path, sqlite_url, _tools(lambda: True), group_commit=0)
    await _start(engine)  # warm: catalog, prepared workflow, SQLite pages
    store.reset()

    began = time.perf_counter()
    run = await _start(engine)
    wall = time.perf_counter() - began
    await engine.stop()

    assert run.status is RunStatus.COMPLETED
    # an inline pure tool: no `started` entry, blob + `completed` entry in one transaction
    assert store.calls["journal_complete_many"] == N
    assert store.calls["journal_start"] == 0
    assert store.calls["journal_finish"] == 0
    assert store.calls["put_blob"] == 0  # outputs go with their entries,
    # the run's args with the run and its audit row; its rest with its reply in the outbox
    assert store.calls["transaction"] == 2
    assert store.calls["transition"] == 0
    entries = store.inner.steps.journal([run.id])
    assert len(entries) == N and {e.status for e in entries} == {NodeStatus.COMPLETED}
    assert store.inner.blobs.get_blob(entries[-1].output_digest or "") == b"through"
    per_step = sum(store.calls.values()) - N
    assert per_step <= 10, f"{per_step} store calls besides the one per step: {store.calls}"
    ms_step = wall * 1000 / N
    engine_ms_step = (wall - store.seconds) * 1000 / N
    print(f"\nhot path: {ms_step:.3f} ms/step total, {engine_ms_step:.3f} ms/step engine (excl. store)")
    assert engine_ms_step < 1.0


async def test_a_1000_node_all_cached_resume_reads_the_journal_once(tmp_path: Path, sqlite_url: str) -> None:
    _chain(tmp_path)
    allowed = {"last": False}
    engine, store = _engine(tmp_path, sqlite_url, _tools(lambda: allowed["last"]))
    failed = await _start(engine)
    assert failed.status is RunStatus.FAILED  # n999 refused; n0..n998 done

    # --resume-from: a new run whose lineage holds every result
    store.reset()
    began = time.perf_counter()
    copy = await _start(engine, resume_from=failed.id)
    wall_from = time.perf_counter() - began
    assert copy.status is RunStatus.FAILED  # the cached 999, then n999 again
    assert store.calls["journal"] == 1
    assert store.calls["get_blobs"] <= 1
    assert store.calls["journal_record_cached"] == 1
    assert store.calls["journal_start"] == 1  # only n999 ran; it failed, so its start is journaled
    assert store.calls["journal_complete_many"] == 0
    engine_from = wall_from - store.seconds

    # resume of the run itself: everything but the last step is done in it
    allowed["last"] = True
    store.reset()
    began = time.perf_counter()
    await engine.resume(failed.id, actor="console:bench")
    done = await engine.wait(failed.id, timeout=60)
    wall_resume = time.perf_counter() - began
    await engine.stop()

    assert done.status is RunStatus.COMPLETED
    assert store.calls["journal"] == 1
    assert store.calls["journal_complete_many"] == 1  # only n999 ran, and completed: one commit
    assert store.calls["journal_start"] == 0
    assert sum(store.calls.values()) <= 16, store.calls
    engine_resume = wall_resume - store.seconds
    print(
        f"\nresume-from 1,000 cached: {wall_from * 1000:.1f} ms total, {engine_from * 1000:.1f} ms engine;"
        f" resume 999 done + 1: {wall_resume * 1000:.1f} ms total, {engine_resume * 1000:.1f} ms engine"
    )
    assert engine_resume < 0.5 and engine_from < 0.5  # loose: the target (50 ms) is checked by the bench


async def test_summary_is_a_constant_number_of_queries(tmp_path: Path, sqlite_url: str) -> None:
    _chain(tmp_path)
    engine, store = _engine(tmp_path, sqlite_url, _tools(lambda: True))
    run = await _start(engine)
    await engine.stop()
    store.reset()

    summary = engine.summary(run.id)

    assert len(summary.nodes) == N and summary.output == "through"
    assert dict(store.calls) == {"get_run": 1, "journal": 1, "get_blob": 1}


async def test_only_unsafe_or_non_inline_steps_journal_their_start_before_running(
    tmp_path: Path, sqlite_url: str
) -> None:
    """The tool reads the journal while it runs: `started` is there for an unsafe inline tool
    (committed before dispatch) and for a threaded pure tool, never for an inline pure one."""
    (tmp_path / "workflows").mkdir(parents=True)
    steps = ["quick", "risky", "threaded"]
    lines = ["name: mixed", "nodes:"]
    for step in steps:
        lines += [f"  - id: {step}", f"    tool: {step}", "    with: {run_id: '{{ run.id }}'}"]
    (tmp_path / "workflows" / "mixed.yaml").write_text("\n".join(lines) + "\n")
    seen: dict[str, list[str]] = {}
    holder: dict[str, CountingStore] = {}

    def look(node: str, run_id: str) -> str:
        entries = holder["store"].inner.steps.journal([run_id])
        seen[node] = [e.status.value for e in entries if e.node_id == node]
        return node

    tools = ToolRegistry()
    tools.tool("quick", replay="pure", inline=True)(lambda run_id: look("quick", run_id))
    tools.tool("risky", replay="unsafe", inline=True)(lambda run_id: look("risky", run_id))
    tools.tool("threaded", replay="pure")(lambda run_id: look("threaded", run_id))
    engine, store = _engine(tmp_path, sqlite_url, tools)
    holder["store"] = store
    run = await engine.start_run(
        workflow="mixed", args={}, platform="console", conversation="c", thread=None, requester="console:t"
    )
    done = await engine.wait(run.id, timeout=60)
    await engine.stop()

    assert done.status is RunStatus.COMPLETED, done.status_reason
    assert seen == {"quick": [], "risky": ["started"], "threaded": ["started"]}
    final = {e.node_id: e.status for e in store.inner.steps.journal([run.id])}
    assert final == dict.fromkeys(steps, NodeStatus.COMPLETED)
    # quick's result waited for the next write: risky's `started` entry, which it precedes
    assert store.calls["journal_complete_many"] == 1 and store.calls["journal_start"] == 2
