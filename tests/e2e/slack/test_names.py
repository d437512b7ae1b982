"""People in Baton's Slack messages are named, not pinged (#26): signed requests into the real
Bolt app, the mock Web API answering `users.info`. A `<@U…>` mention notifies its person, so
only a message that calls someone to act carries one (a reminder to the approvers it waits on,
tests/e2e/slack/test_reminders.py); the rest show the name a person's own event carried or
`users.info` gave (escaped: a name cannot ping or format), else the bare id, and a lookup that
fails or hangs never holds a message up."""

from __future__ import annotations

import re

from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import ANA, BOB
from tests.e2e.slack.mock_slack import Call
from tests.e2e.slack.steps import COMPLETED, WAITING, command, start, wait_in_thread
from tests.e2e.slack.test_gates import reply, withdrawn

HOSTILE = "<!channel> *Bob* <@U0ANA>"  # a display name is whatever its owner typed
SHOWN = "&lt;!channel&gt; \u2217Bob\u2217 &lt;@U0ANA&gt;"  # as Slack gets it: text, nothing else
PING = re.compile(r"<[@!]")


def _texts(e2e: SlackE2E, after: int) -> list[Call]:
    return [c for c in e2e.mock.calls[after:] if c.method.startswith("chat.")]


def _lookups(e2e: SlackE2E, user: str) -> list[Call]:
    return [c for c in e2e.mock.of("users.info") if c.body.get("user") == user]


async def test_an_approver_seen_only_by_id_is_named_from_users_info_escaped_and_never_pinged(
    e2e: SlackE2E,
) -> None:
    e2e.mock.users[BOB] = {"id": BOB, "name": "bob", "profile": {"display_name": HOSTILE, "real_name": "Bob"}}
    paused = await start(e2e, 'run gated "v1"', rests_with=WAITING)  # Ana types it: her name comes along
    mark = len(e2e.mock.calls)
    await reply(e2e, "lgtm", thread=paused.thread)  # Bob's message event: an id, no name

    edit = await withdrawn(e2e, paused.rest, f"Approved by {SHOWN}", after=mark)
    done = await wait_in_thread(e2e, paused.thread, COMPLETED, after=mark)
    await e2e.settle()
    for call in [paused.rest, edit, done, *_texts(e2e, 0)]:
        assert not PING.search(call.text), call.text  # no mention, no <!channel>: nobody notified
    # `status`: "requested by" names Ana as her own slash command carried her name
    mark = await command(e2e, f"status {paused.run_id}", user=BOB)
    status = await e2e.mock.wait_for(lambda calls: next(
        (c for c in calls[mark:] if c.method.startswith("chat.post") and "requested by" in c.text), None))
    assert f"requested by name-of-{ANA}" in status.text and not PING.search(status.text)
    assert len(_lookups(e2e, BOB)) == 1  # looked up once, then cached
    assert _lookups(e2e, ANA) == []  # her slash command carried her name
    gate = e2e.baton.store.gates.get_gate(paused.run_id, "review")
    assert gate.decided_by == f"slack:{BOB}"  # decided by id: the name never authorizes anything


async def test_a_lookup_that_fails_or_hangs_still_delivers_with_the_bare_id(e2e: SlackE2E) -> None:
    e2e.mock.unknown_users.add(BOB)
    paused = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    mark = len(e2e.mock.calls)
    await reply(e2e, "lgtm", thread=paused.thread)
    edit = await withdrawn(e2e, paused.rest, f"Approved by {BOB}", after=mark)
    await wait_in_thread(e2e, paused.thread, COMPLETED, after=mark)
    assert f"<@{BOB}>" not in edit.text and f"name-of-{BOB}" not in edit.text

    # Slack does not answer users.info at all: the message goes out anyway, the id shown
    again = await start(e2e, 'run gated "v2" --force', rests_with=WAITING)
    carol = "U0CAROL"
    e2e.mock.hold("users.info", "")
    try:
        mark = len(e2e.mock.calls)
        await reply(e2e, "lgtm", thread=again.thread, user=carol)
        edit = await withdrawn(e2e, again.rest, f"Approved by {carol}", after=mark)
        await wait_in_thread(e2e, again.thread, COMPLETED, after=mark)
        assert [c.body.get("user") for c in e2e.mock.held] == [carol]
        assert not PING.search(edit.text)
    finally:
        e2e.mock.release()
