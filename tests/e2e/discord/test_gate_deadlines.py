"""A gate's deadlines through Discord. A timeout ends the run as `on_timeout` says (reject:
cancelled; fail: failed, its reason naming the timeout), the gate message is edited to say so with
its buttons withdrawn, the run's thread is told, and a late click on the old Approve is answered
that the gate already timed out, approving nothing. A reminder and an escalation that name people
reach each of them directly: a DM channel opened (`POST /users/@me/channels`) and the message
posted in it. Deadlines are fired with a controlled time (`GateDeadlines.tick(now)`), as the bot's
loop does; gateway payloads into the real discord.py client, what Discord received from the fake."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest

from core.commands.deadlines import GateDeadlines
from core.config import Access, Settings
from core.delivery.button_refs import command_of, parse
from core.store.records import GateStatus, RunStatus
from tests.e2e.discord.fake_discord import GUILD_ID, Call
from tests.e2e.discord.gateway import ANA, BOB, MALLORY, button_click, dispatch_interaction, dm_button_click
from tests.e2e.discord.harness import DEADLINE, DiscordBot, custom_ids

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
    bash: printf shipped
    replay: pure
"""
NAGGED = """
name: nagged
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


def _person(who: dict[str, Any]) -> str:
    return f"discord:{who['id']}"


@pytest.fixture(params=["reject", "fail"])
def on_timeout(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str, on_timeout: str) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "timed.yaml").write_text(textwrap.dedent(TIMED.format(on_timeout=on_timeout)))
    (workflows / "nagged.yaml").write_text(textwrap.dedent(NAGGED))
    return Settings(
        database_url=sqlite_url, workflow_dirs=[workflows], data_dir=tmp_path / "data", tool_modules=[],
        prompt_provider="fake", discord_guild_id=int(GUILD_ID),
        access=Access.model_validate({"groups": {"sre": [_person(BOB)], "leads": [_person(MALLORY)]},
                                      "run": {"*": [_person(ANA)]}}),
        _env_file=None,  # type: ignore[call-arg]
    )  # fmt: skip


def _deadlines(bot: DiscordBot) -> GateDeadlines:
    assert bot.baton.deadlines is not None
    return bot.baton.deadlines.deadlines


async def _paused(bot: DiscordBot, text: str) -> tuple[str, str, dict[str, Any]]:
    """(run id, thread, its gate message) of a run that waits at its gate."""
    run_id, thread, run = await bot.start(text, who=ANA)
    assert run.status is RunStatus.PAUSED
    await bot.posted_in(thread, "waits for approval")
    return run_id, thread, bot.message_with(thread, "waits for approval")


def _button(bot: DiscordBot, message: dict[str, Any], command: str) -> str:
    for cid in custom_ids(message["components"], enabled=True):
        ref = parse(cid)
        if ref is not None and command_of(ref, bot.baton.store.blobs.get_blob) == command:
            return cid
    raise AssertionError(f"no button runs {command!r}")


async def test_a_gate_that_times_out_ends_the_run_and_withdraws_its_buttons(
    bot: DiscordBot, on_timeout: str
) -> None:
    run_id, thread, gate_message = await _paused(bot, "run timed")
    approve = _button(bot, gate_message, f"approve {run_id}")
    # a one-hour timeout, read a moment after it was set ("1h" or, on a slow machine, "59m 59s")
    assert "expires in 1h" in gate_message["content"] or "expires in 59m" in gate_message["content"]
    store = bot.baton.store
    gate = store.gates.get_gate(run_id, "review")
    # Bob clicks Approve just as the deadline fires: his click carries the message as he saw it
    late = button_click(bot.fake, gate_message["id"], approve, who=BOB)

    assert await _deadlines(bot).tick(now=gate.created_at + HOUR - 1) == []  # not yet due
    [fired] = await _deadlines(bot).tick(now=gate.created_at + HOUR)
    assert fired.action == "timeout"

    run = store.runs.get_run(run_id)
    if on_timeout == "reject":
        assert run.status is RunStatus.CANCELLED
    else:
        assert run.status is RunStatus.FAILED
        assert run.reason and "timed out at `review`" in run.reason and "no decision within 1h" in run.reason
    assert store.gates.get_gate(run_id, "review").status is GateStatus.REJECTED

    told = await bot.posted_in(thread, "had no decision within 1h")
    outcome = "rejected" if on_timeout == "reject" else "failed"
    assert f"{outcome}; the run ends here" in told.content and run_id in told.content

    def withdrawn(_: object) -> dict[str, Any] | None:
        message = bot.fake.messages[gate_message["id"]]
        return message if "No decision in time" in message["content"] and not message["components"] else None

    edited = await bot.fake.wait_for(withdrawn, DEADLINE)
    assert ("cancelled" if on_timeout == "reject" else "failed") in edited["content"]
    assert "Approved" not in edited["content"] and "Rejected by" not in edited["content"]

    # his click arrives after the timeout: refused, to him alone, saying the gate timed out
    dispatch_interaction(bot.client, late)
    callback = await bot.acknowledged(late)

    def refusal(calls: list[Call]) -> str | None:
        texts = [str((callback.json.get("data") or {}).get("content") or "")]
        texts += [c.content for c in calls if late["token"] in c.path and c.method in ("POST", "PATCH")]
        return next((t for t in texts if "timed out" in t), None)

    said = await bot.fake.wait_for(refusal, DEADLINE)
    assert "already timed out" in said and "nobody decided in time" in said
    assert store.runs.get_run(run_id).status is run.status  # nothing approved, nothing ran
    assert store.gates.get_gate(run_id, "review").status is GateStatus.REJECTED
    assert not [e for e in store.steps.journal([run_id]) if e.node_id == "ship"]


@pytest.mark.parametrize("on_timeout", ["reject"])
async def test_a_reminder_and_an_escalation_reach_each_person_in_a_direct_message(bot: DiscordBot) -> None:
    run_id, thread, _ = await _paused(bot, "run nagged")
    gate = bot.baton.store.gates.get_gate(run_id, "review")

    def direct(who: dict[str, Any], text: str, after: int) -> Any:
        """The DM channel opened with `who` after call `after`, and the message posted in it."""
        def found(calls: list[Call]) -> tuple[Call, Call] | None:
            opened = [c for c in calls[after:] if c.method == "POST" and c.path == "users/@me/channels"
                      and str(c.json.get("recipient_id")) == who["id"]]
            if not opened:
                return None
            dm = next(i for i, ch in bot.fake.channels.items()
                      if ch.get("type") == 1 and str(ch["recipients"][0]["id"]) == who["id"])
            sent = [c for c in calls[after:] if c.method == "POST" and c.path == f"channels/{dm}/messages"
                    and text in c.content]
            return (opened[0], sent[0]) if sent else None

        return bot.fake.wait_for(found, DEADLINE)

    mark = len(bot.fake.calls)
    [reminded] = await _deadlines(bot).tick(now=gate.created_at + HOUR)
    assert (reminded.action, reminded.to) == ("remind", (_person(BOB),))
    in_thread = await bot.posted_in(thread, "Reminder")
    assert "Ship it?" in in_thread.content and f"<@{BOB['id']}>" in in_thread.content
    _, dm = await direct(BOB, "Reminder", mark)
    assert f"approve {run_id}" in dm.content and "It expires in 3h" in dm.content
    # a reminder calls the approver it waits on: exactly that mention may ping (the rest never do)
    assert in_thread.json["allowed_mentions"] == dm.json["allowed_mentions"] == {
        "parse": [], "users": [int(BOB["id"])]}
    offering = [in_thread, dm]
    assert not [c for c in bot.fake.calls[mark:] if c.json and isinstance(c.json, dict)
                and str(c.json.get("recipient_id")) in (ANA["id"], MALLORY["id"])]  # only who is waited on

    mark = len(bot.fake.calls)
    [escalated] = await _deadlines(bot).tick(now=gate.created_at + 2 * HOUR)
    assert (escalated.action, escalated.to) == ("escalate", (_person(MALLORY),))
    offering.append(await bot.posted_in(thread, "Escalated"))
    _, dm = await direct(MALLORY, "Escalated", mark)
    assert f"<@{MALLORY['id']}> may now decide it" in dm.content and f"approve {run_id}" in dm.content
    assert dm.json["allowed_mentions"] == {"parse": [], "users": [int(MALLORY["id"])]}
    offering.append(dm)
    sent = [bot.fake.messages[_message_id(bot, call)] for call in offering]
    assert all(_button(bot, m, f"approve {run_id}") for m in sent)  # each offers the decision

    # the escalation made Mallory eligible: her approve (cast at the same controlled time, past
    # `escalate.after`) opens the gate and the run completes
    bot.baton.handler.clock = lambda: gate.created_at + 2 * HOUR + 60
    bot.command(f"approve {run_id}", who=MALLORY)
    await bot.posted_in(thread, " completed in ")
    assert bot.baton.store.runs.get_run(run_id).status is RunStatus.COMPLETED
    assert bot.baton.store.gates.get_gate(run_id, "review").decided_by == _person(MALLORY)

    def withdrawn(_: object) -> list[dict[str, Any]] | None:
        now = [bot.fake.messages[m["id"]] for m in sent]
        return now if all(not custom_ids(m["components"], enabled=True) for m in now) else None

    # decided: every message that offered its buttons, the DMs too, stops offering them
    for message in await bot.fake.wait_for(withdrawn, DEADLINE):
        assert f"Approved by <@{MALLORY['id']}>" in message["content"]
    edits = [c for c in bot.fake.calls if c.method == "PATCH" and "Approved by" in c.content]
    assert edits and all(c.json["allowed_mentions"] == {"parse": []} for c in edits)  # named, not pinged


def _message_id(bot: DiscordBot, call: Call) -> str:
    """The id of the message a recorded `POST channels/<id>/messages` created."""
    channel = call.path.split("/")[1]
    [found] = [m for m in bot.fake.messages.values()
               if m["channel_id"] == channel and m["content"] == call.content]
    return str(found["id"])


@pytest.mark.parametrize("on_timeout", ["reject"])
async def test_approve_clicked_in_a_reminders_direct_message_decides_the_gate(bot: DiscordBot) -> None:
    run_id, thread, gate_message = await _paused(bot, "run nagged")
    gate = bot.baton.store.gates.get_gate(run_id, "review")
    mark = len(bot.fake.calls)
    await _deadlines(bot).tick(now=gate.created_at + HOUR)

    def reminded(calls: list[Call]) -> Call | None:
        return next((c for c in calls[mark:] if c.method == "POST" and "Reminder" in c.content
                     and bot.fake.channels.get(c.path.split("/")[1], {}).get("type") == 1), None)

    dm = bot.fake.messages[_message_id(bot, await bot.fake.wait_for(reminded, DEADLINE))]
    click = dm_button_click(bot.fake, dm["id"], _button(bot, dm, f"approve {run_id}"), who=BOB)
    dispatch_interaction(bot.client, click)
    await bot.acknowledged(click)
    await bot.posted_in(thread, " completed in ")
    decided = bot.baton.store.gates.get_gate(run_id, "review")
    assert decided.status is GateStatus.APPROVED and decided.decided_by == _person(BOB)

    def withdrawn(_: object) -> list[dict[str, Any]] | None:
        now = [bot.fake.messages[m["id"]] for m in (gate_message, dm)]
        return now if all(not custom_ids(m["components"], enabled=True) for m in now) else None

    for message in await bot.fake.wait_for(withdrawn, DEADLINE):
        assert f"Approved by <@{BOB['id']}>" in message["content"]


@pytest.mark.parametrize("on_timeout", ["reject"])
async def test_a_reminder_redelivered_after_discord_took_it_shows_once(bot: DiscordBot) -> None:
    """The reminder's outbox row is sent, Discord makes the message, and the answer is lost
    (the connection drops): the row is not marked delivered and goes again. Its message
    carries the row's nonce with `enforce_nonce`, so Discord answers the repeat with the
    message it made: one reminder in the thread, and the DM follows."""
    import tenacity

    run_id, thread, _ = await _paused(bot, "run nagged")
    gate = bot.baton.store.gates.get_gate(run_id, "review")
    deliverer = bot.baton.handler.progress.deliverer
    deliverer.wait = tenacity.wait_fixed(0)  # the retry is due at once
    bot.fake.fail_next("POST", f"channels/{thread}/messages", 0, drop=True, taken=True, content="Reminder")
    mark = len(bot.fake.calls)
    [reminded] = await _deadlines(bot).tick(now=gate.created_at + HOUR)
    assert reminded.action == "remind"

    def sent_twice(calls: list[Call]) -> list[Call] | None:
        posts = [c for c in calls[mark:] if c.method == "POST" and c.path == f"channels/{thread}/messages"
                 and "Reminder" in c.content]
        return posts if len(posts) >= 2 else None

    async def redelivered() -> list[Call]:
        while (posts := sent_twice(bot.fake.calls)) is None:
            await deliverer.deliver_due()
            await asyncio.sleep(0.05)
        return posts

    first, again = (await asyncio.wait_for(redelivered(), DEADLINE))[:2]
    assert first.status == 599 and first.json["nonce"] == again.json["nonce"]
    assert first.json["enforce_nonce"] is True
    shown = [m for m in bot.fake.messages.values()
             if m["channel_id"] == thread and "Reminder" in m["content"]]
    assert len(shown) == 1  # the platform deduplicated the repeat
    dm = next(i for i, ch in bot.fake.channels.items()
              if ch.get("type") == 1 and str(ch["recipients"][0]["id"]) == BOB["id"])
    await bot.fake.wait_for(lambda calls: next((c for c in calls[mark:] if c.path == f"channels/{dm}/messages"
                                                and "Reminder" in c.content), None), DEADLINE)
    [row] = [r for r in bot.baton.store.outbox.deliveries(run_id) if r.kind == "gate_reminder"]
    assert row.delivered_at is not None and row.attempts == 2
