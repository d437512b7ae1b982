"""Before a run starts from a channel, Baton checks it can post there (`conversations.info`,
answered by the mock Web API as Slack would): where it cannot, nothing starts and the user
alone is told what to do, in words that fit that kind of conversation."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import CHANNEL
from tests.e2e.slack.mock_slack import Call
from tests.e2e.slack.steps import STARTED, WAITING, start


async def _refused(e2e: SlackE2E, *, channel: str, channel_name: str = "ops") -> Call:
    mark = len(e2e.mock.calls)
    answer = await e2e.slack.command('run gated "v1"', channel=channel, channel_name=channel_name)
    assert answer.status == 200
    told: Call = await e2e.mock.wait_call("response_url", "Nothing was started", after=mark)
    assert told.body["response_type"] == "ephemeral"  # the user alone
    assert len(told.body["text"].splitlines()) == 2  # cause, then next step
    await e2e.settle()
    assert e2e.baton.store.runs.recent_runs(platform="slack") == []  # nothing started
    assert not e2e.mock.of("chat.postMessage")  # and nothing was posted anywhere
    return told


@pytest.mark.parametrize(
    ("channel", "channel_name", "info", "error", "says", "never"),
    [
        ("C0OTHER", "general", {"is_member": False}, None, "/invite @Baton", "direct message"),
        ("C0OTHER", "general", None, "not_in_channel", "/invite @Baton", "direct message"),
        ("G0SECRET", "privategroup", None, "channel_not_found", "Add apps", "/invite"),
        ("C0PRIV", "privategroup", {"is_member": False, "is_private": True}, None, "Add apps", "/invite"),
        ("D0PEOPLE", "directmessage", None, "channel_not_found", "direct message between people", "/invite"),
        ("G0GROUP", "mpdm-ana--bob-1", None, "channel_not_found", "group direct message", "/invite"),
        ("C0OLD", "old", {"is_archived": True, "is_member": True}, None, "archived", "/invite"),
        ("C0OTHER", "general", None, "invalid_auth", "could not check", "/invite"),
    ],
)
async def test_a_run_where_baton_cannot_post_starts_nothing_and_says_what_to_do(
    e2e: SlackE2E, channel: str, channel_name: str, info: dict[str, Any] | None, error: str | None,
    says: str, never: str,
) -> None:
    if info is not None:
        e2e.mock.channels[channel] = info
    if error is not None:
        e2e.mock.fail_next("conversations.info", error)

    told = await _refused(e2e, channel=channel, channel_name=channel_name)

    assert says in told.body["text"] and never not in told.body["text"]


async def test_slack_unreachable_for_the_check_starts_nothing(e2e: SlackE2E) -> None:
    e2e.mock.fail_next("conversations.info", "x", drop=True, times=2)  # slack_sdk retries one drop
    told = await _refused(e2e, channel="C0OTHER")
    assert "could not check" in told.body["text"]


async def test_a_channel_baton_is_in_is_checked_once_then_runs_start(e2e: SlackE2E) -> None:
    await start(e2e, 'run gated "one"', rests_with=WAITING)
    await start(e2e, 'run gated "two" --force', rests_with=WAITING)

    asked = e2e.mock.of("conversations.info")
    assert [c.body["channel"] for c in asked] == [CHANNEL]  # remembered for a while
    assert len([c for c in e2e.mock.of("chat.postMessage") if STARTED in c.text]) == 2


async def test_other_commands_are_not_held_back(e2e: SlackE2E) -> None:
    e2e.mock.channels["C0OTHER"] = {"is_member": False}
    mark = len(e2e.mock.calls)
    await e2e.slack.command("help", channel="C0OTHER")
    await e2e.mock.wait_for(lambda calls: [c for c in calls[mark:] if c.method != "conversations.info"])
    assert not e2e.mock.of("conversations.info")
