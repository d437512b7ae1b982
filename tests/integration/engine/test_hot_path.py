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

from core.engine.engine import Engine, EngineConfig
from core.engine.providers import FakeProvider, ProviderRegistry
from core.engine.tools import ToolRegistry
from core.store.records import RunStatus
from core.store.repository import SqlStore
from core.workflows.catalog import Catalog

N = 1000


class CountingStore:
    """The real store, with a count of calls per method and the seconds spent in it."""

    def __init__(self, inner: SqlStore) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
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


def _chain(root: Path, fail_last: bool = False) -> None:
    lines = ["name: chain", "nodes:"]
    for i in range(N):
        last = i == N - 1
        lines += [f"  - id: n{i}", "    tool: " + ("gate_keeper" if last else "noop")]
        if i:
            lines.append(f"    depends_on: [n{i - 1}]")
    (root / "workflows").mkdir(parents=True, exist_ok=True)
    (root / "workflows" / "chain.yaml").write_text("\n".join(lines) + "\n")


def _engine(root: Path, url: str, tools: ToolRegistry) -> tuple[Engine, CountingStore]:
    real = SqlStore(url)
    real.migrate()
    store = CountingStore(real)
    engine = Engine(
        store=store,  # type: ignore[arg-type]
        catalog=Catalog([root / "workflows"]),
        config=EngineConfig(data_dir=root / "data", replica_id="bench"),
        providers=ProviderRegistry({"fake": FakeProvider()}, "fake"),
        tools=tools,
    )
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


async def test_a_durable_noop_step_costs_three_statements(tmp_path: Path, sqlite_url: str) -> None:
    _chain(tmp_path)
    engine, store = _engine(tmp_path, sqlite_url, _tools(lambda: True))
    await _start(engine)  # warm: catalog, prepared workflow, SQLite pages
    store.reset()

    began = time.perf_counter()
    run = await _start(engine)
    wall = time.perf_counter() - began
    await engine.stop()

    assert run.status is RunStatus.COMPLETED
    assert store.calls["journal_start"] == N
    assert store.calls["journal_finish"] == N
    assert store.calls["put_blob"] == N + 1  # one output per step, plus the run's args
    per_step = sum(store.calls.values()) - 3 * N
    assert per_step <= 10, f"{per_step} store calls besides the three per step: {store.calls}"
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
    assert store.calls["journal_start"] == 1  # only n999 ran
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
    assert store.calls["journal_start"] == 1
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
