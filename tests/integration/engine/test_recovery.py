"""A peer recovers a run whose owner stopped (lapsed lease) and `resolve` settles the unsafe step."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.engine.events import EngineEvent, EventKind, NodeState
from core.errors import RunNotResumable, RunStateError
from core.store.records import NodeStatus, RunStatus
from tests.integration.engine.harness import Harness, make_harness
from tests.integration.step_signals import StepSignals

SEND = """
name: send
nodes:
  - id: compose
    bash: echo hello
    replay: pure
  - id: send
    depends_on: [compose]
    bash: |
      echo sent >> {{ inputs.dir }}/sent
      echo send $$ >> {{ inputs.sig }}
      [ -f {{ inputs.dir }}/release ] || exec sleep 30
      echo delivered
    replay: unsafe
  - id: report
    depends_on: [send]
    bash: echo report {{ nodes.send.output }}
    replay: pure
"""


@dataclass
class Pair:
    owner: Harness
    peer: Harness
    finished: asyncio.Event
    out: Path
    signals: StepSignals


@pytest.fixture
def signals(tmp_path: Path) -> Iterator[StepSignals]:
    sig = StepSignals(tmp_path / "signals.fifo")
    yield sig
    sig.close()


@pytest.fixture
async def pair(tmp_path: Path, sqlite_url: str, signals: StepSignals) -> AsyncIterator[Pair]:
    owner = make_harness(tmp_path / "owner", sqlite_url, lease_seconds=0.3)
    peer = make_harness(tmp_path / "peer", sqlite_url, lease_seconds=0.3)
    for h in (owner, peer):
        h.write("send.yaml", SEND)
    finished = asyncio.Event()

    async def on_event(event: EngineEvent) -> None:
        if event.kind is EventKind.RUN_FINISHED:
            finished.set()

    peer.engine.subscribe(on_event)
    out = tmp_path / "out"
    out.mkdir()
    yield Pair(owner, peer, finished, out, signals)
    for h in (owner, peer):
        await h.engine.stop(grace=5)
        h.store.close()


async def _orphan(pair: Pair) -> str:
    """Start the run on `owner`, stop `owner` abruptly while `send` is in flight."""
    run = await pair.owner.start("send", {"dir": str(pair.out), "sig": str(pair.signals.path)})
    await pair.signals.wait_for("send", timeout=15)
    await pair.owner.engine.stop(grace=0)  # like a dead process: the step stays `started`
    assert pair.owner.store.runs.get_run(run.id).status is RunStatus.RUNNING
    (pair.out / "release").touch()
    await pair.peer.engine.start()
    async with asyncio.timeout(15):
        await pair.finished.wait()  # the peer took the lapsed run over and brought it to rest
    return run.id


async def test_a_peer_recovers_and_stops_at_the_unsafe_step(pair: Pair) -> None:
    run_id = await _orphan(pair)
    h = pair.peer

    run = h.store.runs.get_run(run_id)
    assert run.status is RunStatus.NEEDS_ATTENTION
    assert "`send` may have run" in (run.reason or "")
    assert h.kinds(run_id, EventKind.NODE_ATTENTION) == ["send"]
    states = {n.node_id: n.state for n in h.engine.summary(run_id).nodes}
    # `report` runs once `send` is settled: queued, as `plan` says (not skipped)
    assert states == {"compose": NodeState.DONE, "send": NodeState.ATTENTION, "report": NodeState.QUEUED}
    plan = {n.node_id: n.action for n in h.engine.plan(run_id).nodes}
    assert plan == {"compose": "done", "send": "waits", "report": "waits"}
    assert (pair.out / "sent").read_text().split() == ["sent"]
    audit = [(a.actor, a.action, a.details) for a in h.store.events.audit_log(run_id)][-2:]
    assert audit == [("baton", "recover", {"owner": h.engine.owner}),
                     ("baton", "needs_attention", {"node": "send", "reason": run.reason})]

    # resuming without settling it changes nothing: the unsafe step is never re-run blindly
    await h.engine.resume(run_id, actor="console:ana")
    again = await h.engine.wait(run_id, timeout=15)
    assert again.status is RunStatus.NEEDS_ATTENTION
    assert (pair.out / "sent").read_text().split() == ["sent"]


async def test_resolve_retry_runs_it_again_and_continues(pair: Pair) -> None:
    run_id = await _orphan(pair)
    h = pair.peer

    await h.engine.resolve(run_id, "send", "retry", actor="console:ana")
    done = await h.engine.wait(run_id, timeout=15)

    assert done.status is RunStatus.COMPLETED
    assert (pair.out / "sent").read_text().split() == ["sent", "sent"]
    assert h.output(run_id, "report").strip() == "report delivered"
    [resolved] = [a for a in h.store.events.audit_log(run_id) if a.action == "resolve"]
    assert resolved.actor == "console:ana" and resolved.details["resolution"] == "retry"
    with pytest.raises(RunNotResumable):
        await h.engine.resolve(run_id, "send", "retry", actor="console:bo")


async def test_resolve_fail_ends_the_run_failed(pair: Pair) -> None:
    run_id = await _orphan(pair)
    h = pair.peer
    with pytest.raises(RunStateError) as wrong:
        await h.engine.resolve(run_id, "compose", "done", actor="console:ana")
    assert "not waiting for a decision" in wrong.value.message

    failed = await h.engine.resolve(run_id, "send", "fail", actor="console:ana")

    assert failed.status is RunStatus.FAILED
    assert failed.reason == "step `send` marked failed by console:ana"
    [entry] = h.entries(run_id, "send")
    assert entry.status is NodeStatus.FAILED
