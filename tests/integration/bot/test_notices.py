"""Notices through the real wiring (`build_baton`, on SQLite and PostgreSQL), with two chat
platforms served by one process: a run on one notifies a conversation on the other once; a
gate's notice carries buttons that decide it, withdrawn everywhere after; a flood of 50
failures is one notice and one digest; a subscription whose creator lost the right stops
with a notice; the run's own conversation is never told twice."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from bot.app import Baton, build_baton
from core.commands.messages import ChatMessage, Reply
from core.config import Access, Settings
from core.store.records import Run
from core.store.repository import SqlStore
from core.store.tables import OUTBOX

FAILS = """
name: deploy
nodes:
  - id: push
    bash: echo "no route to host" >&2; exit 2
    replay: pure
"""
RULED = """
name: ruled
inputs:
  env: {type: string, default: staging}
nodes:
  - id: push
    bash: exit 2
    replay: pure
notify:
  - on: [failed]
    to: "discord:1130001112223334445"
    when: "{{ inputs.env == 'prod' }}"
    digest: 5m
  - on: [failed]
    to: "slack:CDEV"
"""
GATED = """
name: release
nodes:
  - id: review
    approval:
      question: "Ship it?"
      remind: [1h]
  - id: ship
    depends_on: [review]
    bash: echo shipped
    replay: pure
"""

HELD = """
name: serial
concurrency: {limit: 1}
nodes:
  - id: review
    approval:
      question: "Go?"
  - id: go
    depends_on: [review]
    bash: echo go
    replay: pure
"""


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "deploy.yaml").write_text(FAILS)
    (workflows / "release.yaml").write_text(GATED)
    (workflows / "ruled.yaml").write_text(RULED)
    (workflows / "serial.yaml").write_text(HELD)
    return Settings(database_url=database_url, workflow_dirs=[workflows], data_dir=tmp_path / "data",
                    tool_modules=[], outbox_poll_seconds=0.05, outbox_lease_seconds=2.0)


class Platform:
    def __init__(self, name: str) -> None:
        self.name = name
        self.taken: list[Reply] = []
        self.changed = asyncio.Event()

    async def confirm(self, reply: Reply) -> None:
        self.taken.append(reply)
        self.changed.set()

    def kinds(self, *kinds: str) -> list[Reply]:
        return [r for r in self.taken if r.kind in kinds]

    async def wait(self, ready: Callable[[], object], timeout: float = 20) -> None:
        async with asyncio.timeout(timeout):
            while not ready():
                self.changed.clear()
                await self.changed.wait()


def _sent_rows(platform: Platform, kind: str) -> int:
    """How many outbox rows of `kind` reached `platform` (each reply carries its row's key)."""
    keys = [r.how.once.key if r.how.once is not None else None for r in platform.kinds(kind)]
    assert None not in keys, keys  # every notice goes through the outbox
    return len(set(keys))


async def _until(ready: Callable[[], object], timeout: float = 60) -> None:
    """Until the database shows `ready` (rows folded into a digest send nothing to wait on)."""
    async with asyncio.timeout(timeout):
        while not ready():
            await asyncio.sleep(0.05)


def _baton(settings: Settings) -> tuple[Baton, Platform, Platform]:
    baton = build_baton(settings)
    slack, discord = Platform("slack"), Platform("discord")
    baton.handler.register_outbox("slack", slack.confirm)
    baton.handler.register_outbox("discord", discord.confirm)
    return baton, slack, discord


def _say(platform: str, conversation: str, user: str, text: str, n: list[int] = [0]) -> ChatMessage:  # noqa: B006
    n[0] += 1
    return ChatMessage(platform=platform, conversation=conversation, user=user, text=text,
                       event_id=f"e{n[0]}")


async def _start(baton: Baton, workflow: str, platform: str, conversation: str, requester: str,
                 thread: str | None = None, message: str = "") -> Run:
    return await baton.engine.start_run(workflow=workflow, args={"message": message}, platform=platform,
                                        conversation=conversation, thread=thread, requester=requester)


def _rows(store: SqlStore, kind: str) -> list[tuple[str, str, str, float | None]]:
    query = sa.select(OUTBOX.c.platform, OUTBOX.c.conversation, OUTBOX.c.run_id, OUTBOX.c.delivered_at).where(
        OUTBOX.c.kind == kind).order_by(OUTBOX.c.id)
    with store._engine.connect() as conn:
        return [tuple(r) for r in conn.execute(query)]  # type: ignore[misc]


async def test_a_slack_run_notifies_a_discord_channel_once_and_never_its_own(settings: Settings) -> None:
    baton, slack, discord = _baton(settings)
    try:
        async with baton.running(grace=1.0, handle_signals=False):
            [ok] = await baton.handler.handle(_say("discord", "1130001112223334445", "7", "subscribe deploy"))
            assert ok.kind == "subscribed"
            await baton.handler.handle(_say("slack", "CDEV", "U1", "subscribe deploy failed"))  # its own
            run = await _start(baton, "deploy", "slack", "CDEV", "slack:U1", thread="1700000000.000100")
            await discord.wait(lambda: discord.kinds("notice"))
            await slack.wait(lambda: slack.kinds("run_failed"))
            await baton.handler.drain()
            [notice] = discord.kinds("notice")
            assert (notice.to.platform, notice.to.conversation, notice.data["event"]) == (
                "discord", "1130001112223334445", "failed")
            assert notice.data["node"] == "push" and "no route to host" in notice.data["error"]
            assert notice.data["requester"] == "slack:U1"
            assert notice.data["thread_url"] == "https://slack.com/archives/CDEV/p1700000000000100"
            assert slack.kinds("notice") == []  # never echoed where the run reports
            assert [(p, c, r) for p, c, r, _ in _rows(baton.store, "notice")] == [  # type: ignore[arg-type]
                ("discord", "1130001112223334445", run.id)]
            audit = [e.action for e in baton.store.events.audit_since(0)]
            assert "subscribe" in audit
    finally:
        baton.close()


async def test_a_gate_notice_decides_the_gate_and_is_withdrawn_everywhere(settings: Settings) -> None:
    baton, slack, discord = _baton(settings)
    try:
        async with baton.running(grace=1.0, handle_signals=False):
            await baton.handler.handle(_say("discord", "1130001112223334445", "7", "subscribe release gates"))
            run = await _start(baton, "release", "slack", "CDEV", "slack:U1")
            await discord.wait(lambda: discord.kinds("notice"))
            await slack.wait(lambda: slack.kinds("gate_waiting"))
            [notice] = discord.kinds("notice")
            assert notice.data["event"] == "gate_waiting" and notice.data["question"] == "Ship it?"
            assert notice.data["deciders"] == ["anyone"]
            approve = next(b for b in notice.buttons if b.action == "approve")
            # a click on the notice's button in Discord decides the Slack run's gate
            await baton.handler.handle(_say("discord", "1130001112223334445", "7", approve.command))
            await baton.engine.wait(run.id, timeout=20)
            await slack.wait(lambda: slack.kinds("run_completed"))
            await discord.wait(lambda: [r for r in discord.taken if r.how.edit_only])
            await slack.wait(lambda: [r for r in slack.taken if r.how.edit_only and r.kind == "gate_waiting"])
            [withdrawn] = [r for r in discord.taken if r.how.edit_only]
            assert withdrawn.how.replace_key == notice.how.replace_key and not any(
                b.action in ("approve", "reject") for b in withdrawn.buttons)
            assert withdrawn.data["settled"][0]["by"] == "discord:7"
            assert baton.store.runs.get_run(run.id).status.value == "completed"
    finally:
        baton.close()


async def test_a_flood_of_50_failures_is_one_notice_then_one_digest(settings: Settings) -> None:
    baton, slack, _ = _baton(settings)
    try:
        async with baton.running(grace=1.0, handle_signals=False):
            await baton.handler.handle(_say("slack", "C0OPS", "U9", "subscribe deploy failed"))
            runs = [await _start(baton, "deploy", "discord", f"11300011122233344{n:02d}", "discord:7",
                                 message=str(n)) for n in range(50)]
            for run in runs:
                await baton.engine.wait(run.id, timeout=60)
            await _until(lambda: len(rows := _rows(baton.store, "notice")) == 50 and all(r[3] for r in rows))
            await baton.handler.drain()
            # one notice row sent: an outbox row is delivered at least once (a claim that lapsed
            # on a loaded machine sends it again) and a platform shows it once (Slack looks its
            # key up, Discord's nonce), so what counts is the rows, by their outbox keys
            assert _sent_rows(slack, "notice") == 1 and slack.kinds("notice_digest") == []
            [digest_row] = _rows(baton.store, "notice_digest")
            assert digest_row[3] is None  # due at the end of the window (10 minutes)
            with baton.store._engine.begin() as conn:  # ... which comes now
                conn.execute(sa.update(OUTBOX).where(OUTBOX.c.kind == "notice_digest").values(due_at=0))
            baton.outbox.wake()  # type: ignore[union-attr]
            await slack.wait(lambda: slack.kinds("notice_digest"))
            [digest] = slack.kinds("notice_digest")
            assert digest.data["count"] == 49 and digest.data["events"] == [("failed", 49)]
            assert digest.data["more"] == 39 and len(digest.data["runs"]) == 10
            assert _sent_rows(slack, "notice") == 1
    finally:
        baton.close()


async def test_a_subscription_whose_creator_lost_the_right_stops_with_a_notice(
    settings: Settings, tmp_path: Path
) -> None:
    grants = Access(run={"deploy": ["slack:U9"]}, admins=["slack:UADMIN"])
    settings = settings.model_copy(update={"access": grants})
    baton, slack, _ = _baton(settings)
    try:
        async with baton.running(grace=1.0, handle_signals=False):
            [refused] = await baton.handler.handle(_say("slack", "C0OPS", "U5", "subscribe deploy"))
            assert refused.is_error and "may not view" in refused.data["message"]
            elsewhere = _say("slack", "C0OPS", "U9", "subscribe deploy --to slack:COTHER")
            [other] = await baton.handler.handle(elsewhere)
            assert other.is_error and "admin" in other.data["message"]
            [ok] = await baton.handler.handle(_say("slack", "C0OPS", "U9", "subscribe deploy"))
            assert ok.kind == "subscribed"
        revoked = settings.model_copy(update={"access": Access(run={"deploy": ["slack:UADMIN"]})})
        baton.close()
        baton, slack, _ = _baton(revoked)
        async with baton.running(grace=1.0, handle_signals=False):
            run = await _start(baton, "deploy", "slack", "CDEV", "slack:UADMIN")
            await slack.wait(lambda: slack.kinds("subscription_stopped"))
            assert slack.kinds("notice") == []
            assert baton.store.subscribers.subscriptions(platform="slack", conversation="C0OPS") == []
            stopped = [e for e in baton.store.events.audit_log(run.id) if e.action == "subscription_stopped"]
            assert stopped and stopped[0].details["by"] == "slack:U9"
    finally:
        baton.close()


async def test_a_gate_still_waiting_at_its_reminder_is_told_overdue_once(settings: Settings) -> None:
    # a reminder comes an hour later: past the digest window of the gate's first notice
    baton, slack, discord = _baton(settings.model_copy(update={"notify_digest_seconds": 0.5}))
    try:
        async with baton.running(grace=1.0, handle_signals=False):
            await baton.handler.handle(_say("discord", "1130001112223334445", "7", "subscribe release gates"))
            run = await _start(baton, "release", "slack", "CDEV", "slack:U1")
            await discord.wait(lambda: discord.kinds("notice"))
            gate = baton.store.gates.get_gate(run.id, "review")
            assert baton.deadlines is not None
            await asyncio.sleep(0.6)  # the window of the first notice passes (the tick's hour is not real)
            [reminder] = await baton.deadlines.deadlines.tick(now=gate.created_at + 3600)
            await discord.wait(lambda: len(discord.kinds("notice")) == 2)
            await slack.wait(lambda: slack.kinds("gate_reminder"))
            await baton.handler.drain()
            waiting, overdue = discord.kinds("notice")
            assert (waiting.data["event"], overdue.data["event"]) == ("gate_waiting", "gate_overdue")
            assert overdue.data["question"] == "Ship it?" and overdue.data["node"] == "review"
            assert len(_rows(baton.store, "notice")) == 2 and reminder.action == "remind"
    finally:
        baton.close()


async def test_a_workflows_rule_tells_its_place_when_its_condition_holds_with_its_window(
    settings: Settings,
) -> None:
    baton, slack, discord = _baton(settings)
    try:
        async with baton.running(grace=1.0, handle_signals=False):
            place = {"platform": "slack", "conversation": "CDEV", "thread": None, "requester": "slack:U1"}
            staging = await baton.engine.start_run(workflow="ruled", args={"env": "staging"}, **place)
            prod = await baton.engine.start_run(workflow="ruled", args={"env": "prod"}, **place)
            await discord.wait(lambda: discord.kinds("notice"))
            await baton.engine.wait(staging.id, timeout=20)
            await slack.wait(lambda: len(slack.kinds("run_failed")) == 2)
            await baton.handler.drain()
            [notice] = discord.kinds("notice")
            assert notice.data["run_id"] == prod.id  # staging's condition is false
            [row] = [r for r in baton.store.outbox.deliveries(prod.id) if r.kind == "notice"]
            assert row.payload["window"] == 300 and row.payload["by"] is None  # the rule's own digest
            assert slack.kinds("notice") == []  # its second rule names the run's own channel: no echo
    finally:
        baton.close()


async def test_the_unit_that_ends_a_run_writes_its_notices_though_nothing_is_delivered(
    settings: Settings,
) -> None:
    """The notice rows are written with the transition itself: with no process able to send the
    run's own reply (nothing serves its platform), the failed run's and the paused run's
    notices exist at once, exactly one per place, and the rest rows wait undelivered."""
    baton = build_baton(settings)  # no platform registered: no row is ever delivered here
    try:
        async with baton.running(grace=1.0, handle_signals=False):
            for words in ("subscribe deploy", "subscribe release gates"):
                [ok] = await baton.handler.handle(_say("discord", "1130001112223334445", "7", words))
                assert ok.kind == "subscribed"
            failed = await _start(baton, "deploy", "slack", "CDEV", "slack:U1")
            paused = await _start(baton, "release", "slack", "CDEV", "slack:U1")
            assert (await baton.engine.wait(failed.id, timeout=20)).status.value == "failed"
            await _until(lambda: baton.store.runs.get_run(paused.id).status.value == "paused")
            rows = [*baton.store.outbox.deliveries(failed.id), *baton.store.outbox.deliveries(paused.id)]
            notices = {r.run_id: r for r in rows if r.kind == "notice"}
            assert set(notices) == {failed.id, paused.id}
            assert notices[failed.id].payload["event"] == "failed"
            assert (notices[paused.id].payload["event"], notices[paused.id].payload["node"]) == (
                "gate_waiting", "review")
            assert notices[failed.id].dedupe == f"notice:{failed.id}:failed:discord:1130001112223334445"
            rests = [r for r in baton.store.outbox.deliveries(failed.id) if r.kind == "run_finished"]
            assert len(rests) == 1 and rests[0].delivered_at is None and rests[0].payload["noticed"] is True
            assert [(p, c) for p, c, _, d in _rows(baton.store, "notice")] == [  # type: ignore[misc]
                ("discord", "1130001112223334445")] * 2
    finally:
        baton.close()


async def test_a_run_queued_too_long_is_told_once_across_ticks_and_a_restart(settings: Settings) -> None:
    """`queued_long` through the real wiring: the first run of a limit-1 key waits at its gate,
    the second waits queued; past `BATON_QUEUED_LONG_AFTER` the deadline loop's tick tells the
    subscribed place once, later ticks and a restarted process tell it no more, and the run
    holding the slot is never told."""
    quick = settings.model_copy(update={"queued_long_after": 0.3, "deadline_poll_seconds": 0.05})
    baton, _, discord = _baton(quick)
    try:
        async with baton.running(grace=1.0, handle_signals=False):
            subscribing = _say("discord", "1130001112223334445", "7", "subscribe serial queued")
            [ok] = await baton.handler.handle(subscribing)
            assert ok.kind == "subscribed" and ok.data["events"] == ["queued_long"]
            holder = await _start(baton, "serial", "slack", "CDEV", "slack:U1")
            await _until(lambda: baton.store.runs.get_run(holder.id).status.value == "paused")
            queued = await _start(baton, "serial", "slack", "CDEV", "slack:U2")
            assert baton.store.runs.get_run(queued.id).status.value == "queued"
            await discord.wait(lambda: discord.kinds("notice"))
            [notice] = discord.kinds("notice")
            assert (notice.data["event"], notice.data["run_id"]) == ("queued_long", queued.id)
            assert notice.data["queue"]["position"] == 1 and notice.data["queue"]["ahead"]["id"] == holder.id
            assert notice.data["queue"]["waited"] >= 0.3
            await asyncio.sleep(0.5)  # ten more ticks
            assert baton.deadlines is not None and baton.deadlines.watch_queue() == []
        baton.close()
        baton, _, discord = _baton(quick)  # a restarted process: its place is in the store
        async with baton.running(grace=1.0, handle_signals=False):
            await asyncio.sleep(0.5)
            assert baton.deadlines is not None and baton.deadlines.watch_queue() == []
            await baton.handler.drain()
            assert discord.kinds("notice") == []
        rows = [r for r in baton.store.outbox.deliveries(queued.id) if r.kind == "notice"]
        assert len(rows) == 1 and rows[0].payload["event"] == "queued_long"
        assert [r for r in baton.store.outbox.deliveries(holder.id) if r.kind == "notice"] == []
    finally:
        baton.close()


async def test_a_run_that_crossed_the_threshold_while_baton_was_down_is_told_at_start(
    settings: Settings,
) -> None:
    quick = settings.model_copy(update={"queued_long_after": 0.3, "deadline_poll_seconds": 0.05})
    slow = quick.model_copy(update={"queued_long_after": 3600.0})
    baton, _, _ = _baton(slow)
    try:
        async with baton.running(grace=1.0, handle_signals=False):
            await baton.handler.handle(_say("discord", "1130001112223334445", "7", "subscribe serial queued"))
            holder = await _start(baton, "serial", "slack", "CDEV", "slack:U1")
            await _until(lambda: baton.store.runs.get_run(holder.id).status.value == "paused")
            queued = await _start(baton, "serial", "slack", "CDEV", "slack:U2")
            await asyncio.sleep(0.4)
            assert [r for r in baton.store.outbox.deliveries(queued.id) if r.kind == "notice"] == []
        baton.close()
        baton, _, discord = _baton(quick)
        async with baton.running(grace=1.0, handle_signals=False):
            await discord.wait(lambda: discord.kinds("notice"))
            [notice] = discord.kinds("notice")
            assert (notice.data["event"], notice.data["run_id"]) == ("queued_long", queued.id)
    finally:
        baton.close()
