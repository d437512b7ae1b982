"""Two replicas (two deadline loops, each with its own engine and outbox, on one database)
firing the same due timeout at the same moment, on every store (in memory, SQLite,
PostgreSQL): both read the gate waiting before either decides, exactly one decision wins, and
only its unit's rows exist: one `timeout` audit row, one `gate_timed_out` outbox row, one
`gate_timed_out` message sent (before the run's final reply), the deadline fired by the winner."""

from __future__ import annotations

import asyncio
import textwrap
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot import testing
from core.commands.deadlines import Fired, GateDeadlines
from core.commands.handler import Handler
from core.commands.messages import Reply
from core.config import Access
from core.engine.engine import Engine
from core.engine.tools import ToolRegistry
from core.store.memory import MemoryStore
from core.store.port import Gates, Store
from core.store.records import Gate, RunStatus
from core.store.repository import SqlStore

HOUR = 3600.0
TIMED = """
name: timed
nodes:
  - id: review
    approval:
      question: "Ship it?"
      approvers: [group:sre]
      timeout: 1h
      on_timeout: {on_timeout}
  - id: ship
    depends_on: [review]
    tool: noop
"""
ACCESS = Access.model_validate({"groups": {"sre": ["console:sam"]}, "run": {"*": ["console:rita"]}})
FINAL = {"reject": "run_cancelled", "fail": "run_failed", "approve": "run_completed", "skip": "run_completed"}


class Meeting:
    """A replica's view of the store whose gate reads wait for the other replica's: both have
    read the gate waiting before either decides (the race, every time)."""

    def __init__(self, store: Store, barrier: threading.Barrier) -> None:
        self._store = store
        self.gates = _MeetingGates(store.gates, barrier)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class _MeetingGates:
    """`Meeting`'s gates role: `get_gate` waits for the other replica's."""

    def __init__(self, gates: Gates, barrier: threading.Barrier) -> None:
        self._gates = gates
        self._barrier = barrier

    def get_gate(self, run_id: str, node_id: str) -> Gate:
        gate = self._gates.get_gate(run_id, node_id)
        self._barrier.wait()
        return gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gates, name)


@dataclass
class Replica:
    store: Store
    engine: Engine
    handler: Handler
    deadlines: GateDeadlines
    sent: list[Reply] = field(default_factory=list)


@pytest.fixture(
    params=[
        pytest.param("memory", marks=pytest.mark.memory_store),
        pytest.param("sqlite"),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def open_store(request: pytest.FixtureRequest) -> Iterator[Callable[[], Store]]:
    """Opens the store of one more replica, on the same database."""
    opened: list[SqlStore] = []
    if request.param == "memory":
        shared = MemoryStore()
        yield lambda: shared
        return
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "postgres_url")

    def sql() -> Store:
        store = SqlStore(url)
        store.migrate()
        opened.append(store)
        return store

    yield sql
    for store in opened:
        store.close()


def _replica(root: Path, store: Store, name: str, barrier: threading.Barrier) -> Replica:
    tools = ToolRegistry()

    @tools.tool("noop", replay="pure", inline=True)
    def noop() -> str:
        return "shipped"

    baton = testing.build(root, store=store, tools=tools, access=ACCESS, replica_id=name,
                          data_dir=root / "data" / name)  # fmt: skip
    engine, handler = baton.engine, baton.handler
    deadlines = GateDeadlines(
        store=Meeting(store, barrier),  # type: ignore[arg-type]
        engine=engine, replica=name,
        deliver=handler.progress.deliverer.deliver_run,
    )  # fmt: skip
    replica = Replica(store, engine, handler, deadlines)

    async def collect(reply: Reply) -> None:
        replica.sent.append(reply)

    handler.register_outbox("console", collect)
    return replica


@pytest.mark.parametrize("on_timeout", ["reject", "fail", "approve", "skip"])
async def test_two_replicas_firing_one_timeout_decide_audit_and_tell_it_once(
    tmp_path: Path, open_store: Callable[[], Store], on_timeout: str
) -> None:
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "timed.yaml").write_text(textwrap.dedent(TIMED.format(on_timeout=on_timeout)))
    barrier = threading.Barrier(2, timeout=30)
    one, two = (_replica(tmp_path, open_store(), name, barrier) for name in ("replica-a", "replica-b"))
    run = await one.engine.start_run(workflow="timed", args={}, platform="console", conversation="c1",
                                     thread=None, requester="console:rita")  # fmt: skip
    assert (await one.engine.wait(run.id, timeout=30)).status is RunStatus.PAUSED
    await one.handler.drain()
    one.sent.clear()
    gate = one.store.gates.get_gate(run.id, "review")
    now = gate.created_at + HOUR

    async def fire(replica: Replica) -> list[Fired]:
        fired = await replica.deadlines.tick(now)
        await replica.engine.wait(run.id, timeout=30)  # a run the winner opened goes on in its loop
        await replica.handler.drain()
        return fired

    # each in its own thread and event loop: the store's compare-and-swap decides, not asyncio
    results = await asyncio.gather(*(asyncio.to_thread(asyncio.run, fire(r)) for r in (one, two)))
    try:
        timeouts = [f for fired in results for f in fired if f.action == "timeout"]
        assert len(timeouts) == 1  # the other replica lost the gate's CAS: stale, or not fired at all
        [winner] = [r for r, fired in zip((one, two), results, strict=True) if timeouts[0] in fired]

        store = one.store
        assert [a.action for a in store.events.audit_log(run.id)].count("timeout") == 1
        decided = store.gates.get_gate(run.id, "review")
        assert decided.decided_by == "baton"
        assert decided.decision == ("reject" if on_timeout == "fail" else on_timeout)  # a fail rejects it
        [deadline] = store.ballots.gate_deadlines(run.id, "review", gate.created_at)
        assert deadline.fired_by == winner.deadlines.replica
        [row] = [r for r in store.outbox.deliveries(run.id) if r.kind == "gate_timed_out"]
        assert row.delivered_at is not None and row.payload["outcome"] == on_timeout

        told = [r for r in one.sent + two.sent if r.kind == "gate_timed_out"]
        assert len(told) == 1
        assert {k: told[0].data[k] for k in ("run_id", "node", "outcome", "waited")} == {
            "run_id": run.id, "node": "review", "outcome": on_timeout, "waited": "1h"}
        assert (told[0].to.platform, told[0].to.conversation) == ("console", "c1")
        kinds = [r.kind for r in winner.sent if r.kind != "progress"]
        assert kinds.index("gate_timed_out") < kinds.index(FINAL[on_timeout])  # the line, then the end
        assert store.runs.get_run(run.id).status.value == FINAL[on_timeout].removeprefix("run_")
    finally:
        for replica in (one, two):
            await replica.engine.stop(grace=5)
            await replica.handler.drain()
