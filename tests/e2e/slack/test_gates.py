"""Approvals through Slack: which gate a reply addresses, and the gate's buttons once it is
decided. Signed requests into the real Bolt app; what Baton posts, read from the mock Web API."""

from __future__ import annotations

import pytest

from core.config import Access
from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import ANA, BOB, CHANNEL
from tests.e2e.slack.mock_slack import BOT_USER, Call
from tests.e2e.slack.steps import COMPLETED, WAITING, StartedRun, command, start, wait_in_thread

DECIDED = "Approved the gate"  # gate_decided


async def mention(e2e: SlackE2E, text: str, *, thread: str | None = None, user: str = BOB) -> None:
    """`@Baton <text>`: Slack delivers it twice, as `message` and as `app_mention`."""
    said = e2e.slack.message_event(f"<@{BOT_USER}> {text}", user=user, thread_ts=thread)
    await e2e.slack.event(said)
    await e2e.slack.event({**said, "type": "app_mention"})


async def reply(e2e: SlackE2E, text: str, *, thread: str, user: str = BOB) -> None:
    await e2e.slack.event(e2e.slack.message_event(text, user=user, thread_ts=thread))


async def withdrawn(e2e: SlackE2E, message: Call, said: str, *, after: int = 0) -> Call:
    """The edit of a message that offered a gate: `said` (who decided), and its buttons gone."""
    def found(calls: list[Call]) -> Call | None:
        for call in calls[after:]:
            if call.method == "chat.update" and call.body.get("ts") == message.ts and said in call.text:
                return call
        return None

    edit: Call = await e2e.mock.wait_for(found)
    assert edit.buttons == [] and edit.menus == []
    return edit


def status_of(e2e: SlackE2E, run: StartedRun) -> str:
    return str(e2e.baton.store.runs.get_run(run.run_id).status)


async def test_a_mention_or_reply_in_another_runs_thread_never_decides_this_run(e2e: SlackE2E) -> None:
    hello = await start(e2e, 'run notes "hi"', rests_with=COMPLETED)
    deploy = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    mark = len(e2e.mock.calls)

    await reply(e2e, "lgtm", thread=hello.thread)
    await mention(e2e, "lgtm", thread=hello.thread)
    hint = await e2e.mock.wait_call("chat.postEphemeral", "", after=mark)  # nothing waits in that thread
    assert hint.body.get("thread_ts") == hello.thread and hint.body["user"] == BOB
    probe = await command(e2e, f"status {deploy.run_id}")
    assert "paused" in (await e2e.mock.wait_call("chat.postMessage", deploy.run_id, after=probe)).text
    await e2e.settle()
    assert status_of(e2e, deploy) == "paused"
    assert not [c for c in e2e.mock.calls[mark:] if DECIDED in c.text or COMPLETED in c.text]

    mark = len(e2e.mock.calls)
    await mention(e2e, "lgtm", thread=deploy.thread)  # its own thread: that run, told there
    decided = await e2e.mock.wait_call("chat.postMessage", DECIDED, after=mark)
    assert decided.body.get("thread_ts") == deploy.thread and deploy.run_id in decided.text
    await wait_in_thread(e2e, deploy.thread, COMPLETED, after=mark)
    assert not [c for c in e2e.mock.calls[mark:] if c.body.get("thread_ts") == hello.thread]


async def test_the_gate_message_loses_its_buttons_after_a_decision_by_reply(e2e: SlackE2E) -> None:
    paused = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    offered = [f"approve {paused.run_id}", f"reject {paused.run_id}"]
    assert [b["value"] for b in paused.rest.buttons] == offered
    mark = len(e2e.mock.calls)

    await reply(e2e, "what does it ship?", thread=paused.thread)  # unclear: a question back, with buttons
    question = await e2e.mock.wait_call("chat.postMessage", "could not tell", after=mark)
    assert len(question.buttons) == 2
    await reply(e2e, "lgtm 👍", thread=paused.thread)

    await withdrawn(e2e, paused.rest, f"Approved by name-of-{BOB}", after=mark)
    await withdrawn(e2e, question, f"Approved by name-of-{BOB}", after=mark)
    await wait_in_thread(e2e, paused.thread, COMPLETED, after=mark)


async def test_the_gate_message_loses_its_buttons_after_a_decision_by_command(e2e: SlackE2E) -> None:
    approved = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    rejected = await start(e2e, 'run gated "v2" --force', rests_with=WAITING)
    mark = len(e2e.mock.calls)

    await command(e2e, f"approve {approved.run_id}", user=BOB)
    await command(e2e, f"reject {rejected.run_id} not this one", user=BOB)

    edit = await withdrawn(e2e, approved.rest, f"Approved by name-of-{BOB}", after=mark)
    assert "Reply here" not in edit.text  # the instructions to decide it go too
    await withdrawn(e2e, rejected.rest, f"Rejected by name-of-{BOB}", after=mark)
    await wait_in_thread(e2e, approved.thread, COMPLETED, after=mark)
    assert status_of(e2e, rejected) == "cancelled"


async def test_six_waiting_gates_are_a_choice_list_and_a_choice_decides_one(e2e: SlackE2E) -> None:
    runs = [await start(e2e, f'run gated "v{i}" --force', rests_with=WAITING) for i in range(6)]
    mark = len(e2e.mock.calls)

    await mention(e2e, "lgtm", user=ANA)  # in the channel: every gate waiting here

    which = await e2e.mock.wait_call("chat.postMessage", "6 runs wait for approval here", after=mark)
    assert which.body["channel"] == CHANNEL and which.buttons == []
    [menu] = which.menus
    assert menu["type"] == "static_select"
    assert sorted(o["value"] for o in menu["options"]) == sorted(f"approve {r.run_id}" for r in runs)
    assert all(status_of(e2e, r) == "paused" for r in runs)

    third = runs[2]
    mark = len(e2e.mock.calls)
    answer = await e2e.slack.choose(which, 0, f"approve {third.run_id}", user=ANA)
    assert answer.status == 200

    await wait_in_thread(e2e, third.thread, COMPLETED, after=mark)
    edit = await e2e.mock.wait_for(lambda calls: next(
        (c for c in calls[mark:] if c.method == "chat.update" and c.body.get("ts") == which.ts), None))
    [left] = edit.menus  # the others can still be picked
    assert sorted(o["value"] for o in left["options"]) == sorted(
        f"approve {r.run_id}" for r in runs if r is not third)
    assert f"Approved by name-of-{ANA}" in edit.text and third.run_id in edit.text
    await withdrawn(e2e, third.rest, f"Approved by name-of-{ANA}", after=mark)
    assert [status_of(e2e, r) for r in runs].count("paused") == 5


FOUR_EYES = Access(
    admins=[f"slack:{ANA}"], run={"*": ["*"]}, approve={"*": ["*"]}, approver_not_requester=True
)


@pytest.mark.parametrize("access", [FOUR_EYES])
async def test_the_requester_may_not_approve_by_any_route_not_even_an_admin(e2e: SlackE2E) -> None:
    paused = await start(e2e, 'run gated "v1"', rests_with=WAITING, user=ANA)  # Ana: requester, admin
    mark = len(e2e.mock.calls)

    await e2e.slack.click(paused.rest, "approve", user=ANA)  # the button
    await command(e2e, f"approve {paused.run_id}", user=ANA)  # the command
    await reply(e2e, "lgtm", thread=paused.thread, user=ANA)  # a reply in its thread
    await mention(e2e, "approve", user=ANA)  # a mention in the channel

    def refusals(calls: list[Call]) -> list[Call] | None:
        told = [c for c in calls[mark:] if "requested run" in c.text and c.body.get("user") == ANA]
        return told if len(told) >= 4 else None

    await e2e.mock.wait_for(refusals)
    assert status_of(e2e, paused) == "paused"
    assert [e.actor for e in e2e.baton.store.events.audit_log(paused.run_id) if e.action == "refused"] == [
        f"slack:{ANA}"] * 4

    await reply(e2e, "lgtm", thread=paused.thread, user=BOB)  # anyone else may
    await withdrawn(e2e, paused.rest, f"Approved by name-of-{BOB}", after=mark)
    await wait_in_thread(e2e, paused.thread, COMPLETED, after=mark)


async def test_an_approval_typed_in_the_channel_is_answered_in_the_runs_thread(e2e: SlackE2E) -> None:
    paused = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    mark = await command(e2e, f"approve {paused.run_id} fine", user=BOB)  # typed in the channel
    decided = await e2e.mock.wait_call("chat.postMessage", DECIDED, after=mark)
    assert decided.body.get("thread_ts") == paused.thread and decided.body["channel"] == CHANNEL
    await wait_in_thread(e2e, paused.thread, COMPLETED, after=mark)
    top_level = [c for c in e2e.mock.calls[mark:]
                 if c.method == "chat.postMessage" and "thread_ts" not in c.body]  # fmt: skip
    assert top_level == []  # nothing about the decision lands in the channel itself


async def test_code_or_a_quote_in_the_runs_thread_never_approves(e2e: SlackE2E) -> None:
    paused = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    for text in ("```lgtm```", "`approve`", "&gt; lgtm"):  # Slack sends a quote's `>` escaped
        mark = len(e2e.mock.calls)
        await reply(e2e, text, thread=paused.thread)
        asked = await e2e.mock.wait_call("chat.postMessage", "could not tell", after=mark)
        assert asked.body.get("thread_ts") == paused.thread and len(asked.buttons) == 2
        await e2e.settle()
        assert status_of(e2e, paused) == "paused"
        assert not [c for c in e2e.mock.calls[mark:] if DECIDED in c.text or "Approved by" in c.text]

    mark = len(e2e.mock.calls)
    await reply(e2e, "lgtm", thread=paused.thread)  # the same word outside code decides
    await wait_in_thread(e2e, paused.thread, COMPLETED, after=mark)
