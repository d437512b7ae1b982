"""Gate deadlines with a controlled clock (no sleeps), on SQLite and PostgreSQL: reminders to
the eligible people who have not answered, escalation widening who may decide, timeouts and
their outcomes, a restart in between, and two replicas firing one deadline once."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.commands.deadlines import GateDeadlines
from core.commands.messages import Reply
from core.config import Access
from core.errors import StoreError
from core.store.records import RunStatus
from core.store.repository import SqlStore
from tests.integration.commands.conftest import Chat, make_chat

GATE = """
name: timed
nodes:
  - id: review
    approval:
      question: "Ship it?"
      approvers: [group:sre]
      required: 2
      timeout: 4h
      on_timeout: {on_timeout}
      remind: [1h, 3h]
      escalate: {{after: 2h, to: [group:leads]}}
      form:
        replicas: {{type: integer, default: 3}}
  - id: ship
    depends_on: [review]
    bash: printf 'shipped x%s' {{{{ nodes.review.values.replicas }}}}
    replay: pure
"""

ACCESS = Access.model_validate(
    {
        "groups": {"sre": ["console:sam", "console:sue"], "leads": ["console:lee"]},
        "run": {"*": ["console:rita"]},
    }
)


TOLD = ("gate_reminder", "gate_escalated", "gate_timed_out")  # what a fired deadline tells


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def setup(tmp_path: Path, database_url: str) -> AsyncIterator[tuple[Chat, Clock, list[Reply], str]]:
    clock = Clock()
    c = await make_chat(tmp_path, database_url, access=ACCESS, clock=clock)
    for outcome in ("reject", "approve", "skip", "fail"):
        (tmp_path / "workflows" / f"timed-{outcome}.yaml").write_text(
            textwrap.dedent(GATE.format(on_timeout=outcome)).replace("name: timed", f"name: timed-{outcome}")
        )
    told: list[Reply] = []
    yield c, clock, told, database_url
    await c.engine.stop(grace=5)
    await c.handler.drain()
    c.store.close()


def _deadlines(
    chat: Chat, clock: Clock, told: list[Reply], store: SqlStore | None = None, replica: str = "r1"
) -> GateDeadlines:
    async def deliver(run_id: str) -> int:  # the outbox rows of a reminder / escalation / timeout, now
        sent = await chat.handler.progress.deliverer.deliver_run(run_id)
        for reply in [r for r in chat.outbox if r.kind in TOLD]:
            chat.outbox.remove(reply)
            told.append(reply)
        return sent

    return GateDeadlines(
        store=store or chat.store,
        engine=chat.engine,
        replica=replica,
        deliver=deliver,
        clock=clock,
    )


async def _paused(chat: Chat, clock: Clock, outcome: str = "reject") -> str:
    [started] = await chat.say(f"run timed-{outcome}", user="rita")
    assert started.run_id
    assert (await chat.rest(started.run_id)).status is RunStatus.PAUSED
    clock.now = chat.store.gates.get_gate(started.run_id, "review").created_at
    return started.run_id


async def test_reminders_go_to_who_has_not_answered_and_escalation_widens_then_timeout_rejects(setup) -> None:  # type: ignore[no-untyped-def]
    chat, clock, told, _ = setup
    run_id = await _paused(chat, clock)
    opened = clock.now
    deadlines = _deadlines(chat, clock, told)
    assert await deadlines.tick() == []  # nothing due yet
    await chat.say(f"approve {run_id} replicas=3", user="sam")
    clock.now = opened + 3600
    [remind] = await deadlines.tick()
    assert (remind.action, remind.to) == ("remind", ("console:sue",))  # sam answered; lee not yet eligible
    # in the run's thread, then directly to each person not answered yet (on their platform)
    assert [(r.kind, r.to.platform, r.to.conversation, r.to.direct) for r in told] == [
        ("gate_reminder", "console", "c1", False), ("gate_reminder", "console", "sue", True)]
    assert told[-1].to.thread is None and told[-1].data["to"] == ["console:sue"]
    [refused] = await chat.say(f"approve {run_id} replicas=3", user="lee")  # before the escalation
    assert refused.is_error and "not an approver" in refused.data["message"]
    clock.now = opened + 2 * 3600
    [escalate] = await deadlines.tick()
    assert (escalate.action, escalate.to) == ("escalate", ("console:lee",))
    assert [(r.kind, r.to.conversation, r.to.direct) for r in told[-2:]] == [
        ("gate_escalated", "c1", False), ("gate_escalated", "lee", True)]
    clock.now = opened + 3 * 3600
    [remind2] = await deadlines.tick()
    assert remind2.to == ("console:lee", "console:sue")
    told_to = [(r.to.conversation, r.to.direct) for r in told[-3:]]
    assert told_to == [("c1", False), ("lee", True), ("sue", True)]
    clock.now = opened + 4 * 3600
    [timeout] = await deadlines.tick()
    assert timeout.action == "timeout" and told[-1].kind == "gate_timed_out"
    run = chat.store.runs.get_run(run_id)
    assert run.status is RunStatus.CANCELLED and run.status_by == "baton"
    actions = [a.action for a in chat.store.events.audit_log(run_id)]
    assert [a for a in actions if a in ("remind", "escalate", "timeout", "vote")] == [
        "vote",
        "remind",
        "escalate",
        "remind",
        "timeout",
    ]
    assert await deadlines.tick() == []  # each fired once


async def test_an_escalated_approver_completes_the_quorum_and_later_deadlines_are_stale(setup) -> None:  # type: ignore[no-untyped-def]
    chat, clock, told, _ = setup
    run_id = await _paused(chat, clock)
    deadlines = _deadlines(chat, clock, told)
    await chat.say(f"approve {run_id} replicas=3", user="sam")
    clock.now += 2 * 3600
    await deadlines.tick()  # remind:0, escalate
    [opened] = await chat.say(f"approve {run_id}", user="lee")  # approves the proposal: replicas=3
    assert opened.kind == "gate_decided"
    assert (await chat.rest(run_id)).status is RunStatus.COMPLETED
    clock.now += 5 * 3600
    assert {f.action for f in await deadlines.tick()} == {"stale"}  # the gate no longer waits


async def test_on_timeout_fail_marks_the_run_failed_naming_the_gates_timeout(setup) -> None:  # type: ignore[no-untyped-def]
    chat, clock, told, _ = setup
    run_id = await _paused(chat, clock, "fail")
    clock.now += 4 * 3600
    fired = await _deadlines(chat, clock, told).tick()
    assert [f.action for f in fired] == ["remind", "escalate", "remind", "timeout"]
    run = await chat.rest(run_id)
    assert run.status is RunStatus.FAILED and run.status_by == "baton"  # not cancelled, as reject does
    assert run.reason == "timed out at `review`: no decision within 4h (on_timeout: fail)"
    assert told[-1].kind == "gate_timed_out" and told[-1].data["outcome"] == "fail"
    gate = chat.store.gates.get_gate(run_id, "review")
    assert gate.status.value == "rejected" and gate.decided_by == "baton"
    actions = [a.action for a in chat.store.events.audit_log(run_id)]
    assert actions[-2:] == ["timeout", "fail"]
    states = {n.node_id: n.state.value for n in chat.engine.summary(run_id).nodes}
    assert states["ship"] != "done"


@pytest.mark.parametrize(("outcome", "ship"), [("approve", "done"), ("skip", "skipped")])
async def test_a_timeout_approves_with_defaults_or_skips_only_when_written(
    setup, outcome: str, ship: str
) -> None:  # type: ignore[no-untyped-def]
    chat, clock, told, _ = setup
    run_id = await _paused(chat, clock, outcome)
    clock.now += 4 * 3600
    fired = await _deadlines(chat, clock, told).tick()
    assert [f.action for f in fired] == ["remind", "escalate", "remind", "timeout"]
    assert (await chat.rest(run_id)).status is RunStatus.COMPLETED
    states = {n.node_id: n.state.value for n in chat.engine.summary(run_id).nodes}
    assert states["ship"] == ship
    gate = chat.store.gates.get_gate(run_id, "review")
    assert gate.decided_by == "baton" and gate.decision == outcome


async def test_deadlines_survive_a_restart_and_fire_on_one_of_two_replicas(setup) -> None:  # type: ignore[no-untyped-def]
    chat, clock, told, url = setup
    run_id = await _paused(chat, clock)
    clock.now += 3600
    with SqlStore(url) as a, SqlStore(url) as b:  # two replicas, started after the gate opened
        first = _deadlines(chat, clock, told, a, "replica-a")
        second = _deadlines(chat, clock, told, b, "replica-b")
        fired = await asyncio.gather(first.tick(), second.tick())
    assert sorted(len(f) for f in fired) == [0, 1]
    assert [(r.kind, r.to.conversation) for r in told] == [  # once: in the thread, then to sam and sue
        ("gate_reminder", "c1"), ("gate_reminder", "sam"), ("gate_reminder", "sue")]
    assert [a.action for a in chat.store.events.audit_log(run_id)].count("remind") == 1


async def test_a_deadline_whose_gate_cannot_be_read_is_marked_fired_once_and_the_tick_ends(  # type: ignore[no-untyped-def]
    setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deadline whose firing raises (here: its node has no gate) is marked fired as stale.
    Left unfired it stayed due, and a full batch was read again and again: the tick never
    ended and the replica's deadline loop spun."""
    import core.commands.deadlines as deadlines_module

    chat, clock, told, _ = setup
    run_id = await _paused(chat, clock)
    for node in ("gone-1", "gone-2", "gone-3"):
        chat.store.ballots.plan_deadlines(run_id, node, clock.now, [("remind:0", clock.now + 1)])
    monkeypatch.setattr(deadlines_module, "BATCH", 2)  # every batch comes back full
    clock.now += 60
    fired = await asyncio.wait_for(_deadlines(chat, clock, told).tick(), 30)
    assert sorted((f.deadline.node_id, f.action) for f in fired) == [
        ("gone-1", "stale"), ("gone-2", "stale"), ("gone-3", "stale")]
    assert await _deadlines(chat, clock, told).tick() == []  # fired once: not due any more
    assert told == []


async def test_a_timeout_the_database_failed_to_decide_stays_due_and_fires_on_the_next_tick(  # type: ignore[no-untyped-def]
    setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A StoreError is not "the run moved on": marking the deadline fired would drop the
    timeout for good and the gate would wait forever."""
    chat, clock, told, _ = setup
    run_id = await _paused(chat, clock)
    real_reject = chat.engine.reject
    calls = 0

    async def blinking_reject(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        if calls == 1:
            raise StoreError("The run store could not decide the gate (OperationalError: gone).")
        return await real_reject(*args, **kwargs)

    monkeypatch.setattr(chat.engine, "reject", blinking_reject)
    clock.now += 4 * 3600 + 1
    deadlines = _deadlines(chat, clock, told)
    with pytest.raises(StoreError):
        await deadlines.tick()
    assert chat.store.runs.get_run(run_id).status is RunStatus.PAUSED
    assert [a.action for a in chat.store.events.audit_log(run_id)].count("timeout") == 0

    fired = await deadlines.tick()
    assert [f.action for f in fired] == ["timeout"]
    assert (await chat.rest(run_id)).status is RunStatus.CANCELLED
    assert [a.action for a in chat.store.events.audit_log(run_id)].count("timeout") == 1
