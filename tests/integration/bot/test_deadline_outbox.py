"""A gate's reminder and timeout through the real wiring (`build_baton`, on SQLite and
PostgreSQL): firing a reminder writes the deadline's compare-and-swap, its audit row and its
outbox row in one unit of work; a process that dies right after the firing leaves the row, and
the next process delivers it (in the run's thread and directly to the person waited on); of two
replicas firing it at the same moment exactly one does, and only its rows exist. A timeout's
`gate_timed_out` line is an outbox row of the decision's own unit: a process that dies right
after the decision leaves it, and the next process tells it, before the run's final reply. A
reminder's DM on another platform than the run's loses its buttons there once the gate is decided."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.app import Baton, build_baton
from core.commands.deadlines import GateDeadlines
from core.commands.messages import Reply
from core.config import Access, Settings
from core.delivery.envelope import Once
from core.errors import DeadlineAlreadyFired
from core.store.records import RunStatus
from tests.integration.bot.test_outbox import Platform

HOUR = 3600.0
NAGGED = """
name: nagged
nodes:
  - id: review
    approval:
      question: "Ship it?"
      approvers: [group:sre]
      timeout: 4h
      remind: [1h]
  - id: ship
    depends_on: [review]
    bash: echo shipped
    replay: pure
"""
MIXED = """
name: mixed
nodes:
  - id: review
    approval:
      question: "Ship it?"
      approvers: [group:mixed]
      timeout: 4h
      remind: [1h]
  - id: ship
    depends_on: [review]
    bash: echo shipped
    replay: pure
"""
TIMED = """
name: timed-{on_timeout}
nodes:
  - id: review
    approval:
      question: "Ship it?"
      approvers: [group:sre]
      timeout: 1h
      on_timeout: {on_timeout}
  - id: ship
    depends_on: [review]
    bash: echo shipped
    replay: pure
"""


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "nagged.yaml").write_text(NAGGED)
    (workflows / "mixed.yaml").write_text(MIXED)
    for on_timeout in ("reject", "approve"):
        (workflows / f"timed-{on_timeout}.yaml").write_text(TIMED.format(on_timeout=on_timeout))
    return Settings(
        database_url=database_url, workflow_dirs=[workflows], data_dir=tmp_path / "data", tool_modules=[],
        outbox_poll_seconds=0.05, outbox_lease_seconds=1.0, deadline_poll_seconds=3600,
        access=Access.model_validate({
            "groups": {"sre": ["console:U2"], "mixed": ["console:U2", "discord:802"]},  # 802: reached by DM
            "run": {"*": ["console:U1"]}}),
    )


async def _paused(baton: Baton, workflow: str = "nagged") -> str:
    run = await baton.engine.start_run(workflow=workflow, args={}, platform="console", conversation="C1",
                                       thread=None, requester="console:U1")
    assert (await baton.engine.wait(run.id, timeout=30)).status is RunStatus.PAUSED
    return run.id


def _replica(baton: Baton, name: str) -> GateDeadlines:
    """Another caller of the same store (a replica), delivering nothing itself."""
    assert baton.deadlines is not None
    mine = baton.deadlines.deadlines
    return GateDeadlines(store=mine.store, engine=mine.engine, replica=name)


async def test_a_reminder_fired_by_a_process_that_dies_is_delivered_by_the_next(settings: Settings) -> None:
    first = build_baton(settings)  # no platform connected: nothing can be sent before it "dies"
    try:
        run_id = await _paused(first)
        gate = first.store.gates.get_gate(run_id, "review")
        assert first.deadlines is not None
        [fired] = await first.deadlines.deadlines.tick(now=gate.created_at + HOUR)
        assert (fired.action, fired.to) == ("remind", ("console:U2",))
        # the firing's unit: the deadline taken, its audit row, its outbox row, all there
        [deadline] = [d for d in first.store.ballots.gate_deadlines(run_id, "review", gate.created_at)
                      if d.name.startswith("remind")]
        assert deadline.fired_by == first.engine.owner
        assert [a.action for a in first.store.events.audit_log(run_id)].count("remind") == 1
        [row] = [r for r in first.store.outbox.deliveries(run_id) if r.kind == "gate_reminder"]
        assert row.delivered_at is None and row.payload["to"] == ["console:U2"]
        assert row.payload["node"] == "review" and row.payload["opened_at"] == gate.created_at
        await first.engine.stop(grace=1)
    finally:
        first.close()

    platform = Platform()
    second = build_baton(settings)
    second.handler.register_outbox("console", platform.confirm)
    try:
        async with second.running(grace=1.0, handle_signals=False):
            await platform.wait(lambda: len([r for r in platform.taken if r.kind == "gate_reminder"]) == 2)
            thread, direct = [r for r in platform.taken if r.kind == "gate_reminder"]
            assert (thread.to.conversation, thread.to.direct) == ("C1", False)
            assert (direct.to.conversation, direct.to.direct) == ("U2", True)
            assert direct.data["to"] == ["console:U2"]
            assert thread.buttons and direct.buttons  # each offers the decision
            assert thread.how.once == Once(f"outbox:{row.id}")
            assert direct.how.once == Once(f"outbox:{row.id}:1")
            # first claim: `since` is None, nothing looked for
            [done] = [r for r in second.store.outbox.deliveries(run_id) if r.kind == "gate_reminder"]
            assert done.delivered_at is not None and done.claimed_by == second.engine.owner
            assert second.deadlines is not None
            assert await second.deadlines.deadlines.tick(now=gate.created_at + HOUR) == []  # fired once
    finally:
        second.close()


async def test_two_replicas_firing_a_reminder_at_once_fire_it_once(settings: Settings) -> None:
    baton = build_baton(settings)
    try:
        run_id = await _paused(baton)
        gate = baton.store.gates.get_gate(run_id, "review")
        one, two = _replica(baton, "replica-a"), _replica(baton, "replica-b")
        now = gate.created_at + HOUR
        # each in its own thread and event loop: the store's compare-and-swap decides, not asyncio
        results = await asyncio.gather(asyncio.to_thread(asyncio.run, one.tick(now)),
                                       asyncio.to_thread(asyncio.run, two.tick(now)))
        assert sorted(len(r) for r in results) == [0, 1]
        [fired] = [f for r in results for f in r]
        assert fired.action == "remind"
        rows = [r for r in baton.store.outbox.deliveries(run_id) if r.kind == "gate_reminder"]
        assert len(rows) == 1
        assert [a.action for a in baton.store.events.audit_log(run_id)].count("remind") == 1
        [deadline] = [d for d in baton.store.ballots.gate_deadlines(run_id, "review", gate.created_at)
                      if d.name.startswith("remind")]
        assert deadline.fired_by in ("replica-a", "replica-b")

        # the loser's unit is undone whole: nothing it held was written
        with pytest.raises(DeadlineAlreadyFired), baton.store.transaction() as tx:
            tx.fire_deadline(deadline, "replica-c")
            tx.audit(actor="baton", action="remind", run_id=run_id, details={})
            tx.enqueue_delivery(run_id, "gate_reminder", {"node": "review"})
        assert len([r for r in baton.store.outbox.deliveries(run_id) if r.kind == "gate_reminder"]) == 1
        assert [a.action for a in baton.store.events.audit_log(run_id)].count("remind") == 1
        await baton.engine.stop(grace=1)
    finally:
        baton.close()


async def test_a_timeout_ends_the_run_with_its_rest_row_in_the_outbox(settings: Settings) -> None:
    platform = Platform()
    baton = build_baton(settings)
    baton.handler.register_outbox("console", platform.confirm)
    try:
        run_id = await _paused(baton)
        gate = baton.store.gates.get_gate(run_id, "review")
        assert baton.deadlines is not None
        fired = await baton.deadlines.deadlines.tick(now=gate.created_at + 4 * HOUR)
        assert [f.action for f in fired] == ["remind", "timeout"]
        assert baton.store.runs.get_run(run_id).status is RunStatus.CANCELLED
        rest = [r for r in baton.store.outbox.deliveries(run_id) if r.kind == "run_finished"]
        assert [r.payload["status"] for r in rest][-1] == "cancelled"
        # the reminder (due first) went out at once, then the decision withdrew its buttons
        await baton.handler.progress.deliverer.deliver_due()
        await baton.handler.drain()
        reminders = [r for r in platform.taken if r.kind == "gate_reminder"]
        assert [r.to.direct for r in reminders if not r.how.edit_only] == [False, True]
        assert [r for r in reminders if r.how.edit_only and not r.buttons]  # withdrawn on the decision
        assert all(r.delivered_at is not None for r in baton.store.outbox.deliveries(run_id))
        assert all(d.fired_at is not None
                   for d in baton.store.ballots.gate_deadlines(run_id, "review", gate.created_at))
        await baton.engine.stop(grace=1)
    finally:
        baton.close()


async def test_a_decision_withdraws_a_reminders_dm_on_the_platform_it_was_sent_on(settings: Settings) -> None:
    """A console run whose approver is reminded by a Discord DM: the decision edits that DM
    through Discord's outbox, even though the run's own platform fails to edit its messages."""
    console, discord = Platform(), Platform()

    async def refusing(reply: Reply) -> None:
        if reply.how.edit_only:
            raise RuntimeError("the console refused an edit")
        await console.confirm(reply)

    baton = build_baton(settings)
    baton.handler.register_outbox("console", refusing)
    baton.handler.register_outbox("discord", discord.confirm)
    try:
        run_id = await _paused(baton, "mixed")
        gate = baton.store.gates.get_gate(run_id, "review")
        assert baton.deadlines is not None
        [fired] = await baton.deadlines.deadlines.tick(now=gate.created_at + HOUR)
        assert fired.to == ("console:U2", "discord:802")
        await baton.handler.progress.deliverer.deliver_due()
        await baton.handler.drain()
        [dm] = [r for r in discord.taken if r.kind == "gate_reminder"]
        assert (dm.to.platform, dm.to.conversation, dm.to.direct) == ("discord", "802", True) and dm.buttons

        await baton.engine.approve(run_id, actor="console:U2")
        await baton.engine.wait(run_id, timeout=30)
        await baton.handler.drain()
        [withdrawn] = [r for r in discord.taken if r.how.edit_only]
        assert withdrawn.how.replace_key == dm.how.replace_key and withdrawn.to.conversation == "802"
        assert not withdrawn.buttons and withdrawn.data["settled"][0]["by"] == "console:U2"
        assert not [r for r in console.taken if r.how.edit_only]  # the console's edits failed
        await baton.engine.stop(grace=1)
    finally:
        baton.close()


async def test_a_reminder_delivered_after_its_gate_was_decided_is_not_sent(settings: Settings) -> None:
    baton = build_baton(settings)  # no platform yet: the reminder's row waits
    try:
        run_id = await _paused(baton)
        gate = baton.store.gates.get_gate(run_id, "review")
        assert baton.deadlines is not None
        [fired] = await baton.deadlines.deadlines.tick(now=gate.created_at + HOUR)
        assert fired.action == "remind"
        await baton.engine.reject(baton.store.runs.get_run(run_id), actor="console:U2", reason="not now")
        platform = Platform()
        baton.handler.register_outbox("console", platform.confirm)
        await baton.handler.progress.deliverer.deliver_due()
        await baton.handler.drain()
        assert not [r for r in platform.taken if r.kind == "gate_reminder"]  # its buttons would be stale
        assert [r.kind for r in platform.taken if r.kind != "progress"] == ["run_cancelled"]
        assert all(r.delivered_at is not None for r in baton.store.outbox.deliveries(run_id))
        await baton.engine.stop(grace=1)
    finally:
        baton.close()


@pytest.mark.parametrize(("on_timeout", "final"), [("reject", "run_cancelled"), ("approve", "run_completed")])
async def test_a_timeout_decided_by_a_process_that_dies_is_told_by_the_next(
    settings: Settings, on_timeout: str, final: str
) -> None:
    first = build_baton(settings)  # no platform connected: it "dies" right after the decision's commit
    try:
        run_id = await _paused(first, f"timed-{on_timeout}")
        gate = first.store.gates.get_gate(run_id, "review")
        assert first.deadlines is not None
        [fired] = await first.deadlines.deadlines.tick(now=gate.created_at + HOUR)
        assert fired.action == "timeout"
        await first.engine.wait(run_id, timeout=30)  # approve: the run goes on to its end here
        # the decision's unit: the deadline taken, its audit row, the line in the outbox before
        # the run's rest row; nothing sent
        [deadline] = first.store.ballots.gate_deadlines(run_id, "review", gate.created_at)
        assert deadline.fired_by == first.engine.owner
        assert [a.action for a in first.store.events.audit_log(run_id)].count("timeout") == 1
        rows = first.store.outbox.deliveries(run_id)
        assert [r.kind for r in rows][-2:] == ["gate_timed_out", "run_finished"]
        assert all(r.delivered_at is None for r in rows)
        [row] = [r for r in rows if r.kind == "gate_timed_out"]
        assert row.payload == {"node": "review", "opened_at": gate.created_at, "deadline": "timeout",
                               "outcome": on_timeout, "waited": "1h"}  # fmt: skip
        await first.handler.drain()  # the decision's background work (its offers settled) is done
        await first.engine.stop(grace=1)
    finally:
        first.close()

    platform = Platform()
    second = build_baton(settings)
    second.handler.register_outbox("console", platform.confirm)
    try:
        async with second.running(grace=1.0, handle_signals=False):
            await platform.wait(lambda: final in [r.kind for r in platform.finals(run_id)])
            told, ended = platform.finals(run_id)  # the paused reply is stale now: not sent
            assert (told.kind, ended.kind) == ("gate_timed_out", final)
            assert told.to.conversation == "C1"
            assert (told.data["outcome"], told.data["waited"]) == (on_timeout, "1h")
            assert told.how.once is not None and told.how.once.key == f"outbox:{row.id}"
            assert all(r.delivered_at is not None for r in second.store.outbox.deliveries(run_id))
            assert second.deadlines is not None
            assert await second.deadlines.deadlines.tick(now=gate.created_at + HOUR) == []  # fired once
            assert [a.action for a in second.store.events.audit_log(run_id)].count("timeout") == 1
    finally:
        second.close()
