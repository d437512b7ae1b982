"""A gate's reminder on Slack goes to the run's thread and, directly (a DM: `chat.postMessage`
to the person's user id), to each eligible approver who has not answered; not to who has. An
escalation tells the people it adds, likewise; once the gate is decided, every one of those
messages (the DMs too, edited in their D… conversation) stops offering its buttons.
Deadlines are fired with a controlled time (`GateDeadlines.tick(now)`), as the bot's loop does."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from core.config import Access, Settings
from tests.e2e.slack.conftest import BOT_TOKEN, SIGNING_SECRET, SlackE2E
from tests.e2e.slack.harness import ANA, BOB
from tests.e2e.slack.mock_slack import Call, dm_of
from tests.e2e.slack.steps import COMPLETED, WAITING, command, start, wait_in_thread

CAROL = "U0CAROL"
DAVE = "U0DAVE"
HOUR = 3600.0
ESCALATED = """
name: escalated
nodes:
  - id: review
    approval:
      question: "Ship it?"
      approvers: [group:sre]
      timeout: 4h
      remind: [1h]
      escalate: {after: 2h, to: [group:leads]}
  - id: ship
    depends_on: [review]
    bash: printf shipped
    replay: pure
"""
GATE = """
name: timed
nodes:
  - id: review
    approval:
      question: "Ship it?"
      approvers: [group:sre]
      required: 2
      timeout: 4h
      remind: [1h]
  - id: ship
    depends_on: [review]
    bash: printf shipped
    replay: pure
"""


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "timed.yaml").write_text(textwrap.dedent(GATE))
    (workflows / "escalated.yaml").write_text(textwrap.dedent(ESCALATED))
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=sqlite_url, workflow_dirs=[workflows], data_dir=tmp_path / "data", tool_modules=[],
        access=Access.model_validate({
            "groups": {"sre": [f"slack:{BOB}", f"slack:{CAROL}"], "leads": [f"slack:{DAVE}"]},
            "run": {"*": [f"slack:{ANA}"]}}),
        slack_bot_token=BOT_TOKEN,  # type: ignore[arg-type]
        slack_signing_secret=SIGNING_SECRET,  # type: ignore[arg-type]
    )  # fmt: skip


async def test_a_reminder_goes_to_the_thread_and_directly_to_each_approver_not_answered(
    e2e: SlackE2E,
) -> None:
    paused = await start(e2e, "run timed", rests_with=WAITING)
    mark = await command(e2e, f"approve {paused.run_id}", user=BOB)
    await e2e.mock.wait_call("chat.postMessage", "Vote counted", after=mark)  # 1/2: Bob's vote
    await e2e.settle()
    gate = e2e.baton.store.gates.get_gate(paused.run_id, "review")
    assert e2e.baton.deadlines is not None

    mark = len(e2e.mock.calls)
    [fired] = await e2e.baton.deadlines.deadlines.tick(now=gate.created_at + 3600)
    assert (fired.action, fired.to) == ("remind", (f"slack:{CAROL}",))

    def reminders(calls: list[Call]) -> list[Call] | None:
        found = [c for c in calls[mark:] if c.method == "chat.postMessage" and "Reminder" in c.text]
        return found if len(found) >= 2 else None

    in_thread, direct = await e2e.mock.wait_for(reminders)
    assert in_thread.body.get("thread_ts") == paused.thread and "Ship it?" in in_thread.text
    assert direct.body.get("channel") == CAROL and not direct.body.get("thread_ts")
    assert f"approve {paused.run_id}" in direct.text
    # a reminder calls the approver it waits on (a real mention: Slack notifies her), nobody else
    assert f"Waiting on <@{CAROL}>." in in_thread.text and f"<@{CAROL}>" in direct.text
    assert set(re.findall(r"<@(U\w+)>", in_thread.text + direct.text)) == {CAROL}
    await e2e.settle()
    assert not any(c.body.get("channel") == BOB for c in e2e.mock.calls[mark:])


async def test_an_escalation_tells_who_it_adds_and_a_decision_withdraws_every_offer(e2e: SlackE2E) -> None:
    paused = await start(e2e, "run escalated", rests_with=WAITING)
    await e2e.settle()
    gate = e2e.baton.store.gates.get_gate(paused.run_id, "review")
    assert e2e.baton.deadlines is not None
    deadlines = e2e.baton.deadlines.deadlines

    def sent(mark: int, text: str, count: int) -> object:
        def found(calls: list[Call]) -> list[Call] | None:
            got = [c for c in calls[mark:] if c.method == "chat.postMessage" and text in c.text]
            return got if len(got) >= count else None
        return e2e.mock.wait_for(found)

    mark = len(e2e.mock.calls)
    [reminded] = await deadlines.tick(now=gate.created_at + HOUR)
    assert reminded.to == (f"slack:{BOB}", f"slack:{CAROL}")
    reminders: list[Call] = await sent(mark, "Reminder", 3)  # type: ignore[assignment]
    assert {c.body["channel"] for c in reminders} == {"C0OPS", BOB, CAROL}

    mark = len(e2e.mock.calls)
    [escalated] = await deadlines.tick(now=gate.created_at + 2 * HOUR)
    assert (escalated.action, escalated.to) == ("escalate", (f"slack:{DAVE}",))
    escalations: list[Call] = await sent(mark, "Escalated", 2)  # type: ignore[assignment]
    assert [c.body.get("thread_ts") for c in escalations].count(paused.thread) == 1
    [direct] = [c for c in escalations if c.body["channel"] == DAVE]
    assert f"<@{DAVE}> may now decide it" in direct.text and f"approve {paused.run_id}" in direct.text
    assert not direct.body.get("thread_ts")
    offering = [paused.rest, *reminders, *escalations]
    assert all(c.button("approve")["value"] == f"approve {paused.run_id}" for c in offering)

    # Dave may decide from `escalate.after` on (the vote is cast at the same controlled time):
    # he clicks Approve in his DM
    e2e.baton.handler.clock = lambda: gate.created_at + 2 * HOUR + 60
    mark = len(e2e.mock.calls)
    clicked = await e2e.slack.click(direct, "approve", user=DAVE, channel=str(dm_of(DAVE)))
    assert clicked.status == 200
    await wait_in_thread(e2e, paused.thread, COMPLETED, after=mark)
    assert e2e.baton.store.gates.get_gate(paused.run_id, "review").decided_by == f"slack:{DAVE}"

    def withdrawn(calls: list[Call]) -> list[Call] | None:
        edits = {c.body.get("ts"): c for c in calls[mark:] if c.method == "chat.update"
                 and f"Approved by name-of-{DAVE}" in c.text}
        return [edits[c.ts] for c in offering] if all(c.ts in edits for c in offering) else None

    for message, edit in zip(offering, await e2e.mock.wait_for(withdrawn), strict=True):
        assert edit.buttons == [] and edit.menus == []
        assert edit.body["channel"] == dm_of(message.body["channel"])  # a DM: its D… conversation
    to_users = [c for c in e2e.mock.calls[mark:]
                if c.method == "chat.update" and c.body["channel"] in (BOB, DAVE)]
    assert not to_users  # never an edit naming a user id: Slack would refuse it
