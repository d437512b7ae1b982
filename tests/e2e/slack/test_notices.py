"""Notices on Slack (Bolt over signed HTTP, the mock Web API, `build_baton`): a run that fails
in one channel is told once in the channel subscribed to its workflow and never in its own;
`unsubscribe` stops it; a subscribed channel that refuses the notice (the bot removed, the
channel archived) has it sent to whoever subscribed it, directly."""

from __future__ import annotations

import pytest

from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import ANA, CHANNEL
from tests.e2e.slack.mock_slack import Call, dm_of
from tests.e2e.slack.steps import FAILED, command, failed_run, start

ALERTS = "C0ALERTS"
NOTICE = "started by"  # every notice's line says who started the run


def _notices(e2e: SlackE2E, after: int = 0) -> list[Call]:
    """Notices Slack took (a refused call has no ts)."""
    return [c for c in e2e.mock.calls[after:] if c.method == "chat.postMessage" and NOTICE in c.text and c.ts]


async def test_a_failure_is_told_once_in_the_subscribed_channel_until_it_unsubscribes(e2e: SlackE2E) -> None:
    await command(e2e, "subscribe flaky failed")  # the run's own channel: never echoed
    mark = len(e2e.mock.calls)
    assert (await e2e.slack.command("subscribe flaky failed", channel=ALERTS)).status == 200
    await e2e.mock.wait_call("chat.postMessage", "now hears about runs of *flaky*", after=mark)
    failed = await failed_run(e2e, "A")
    [notice] = [await e2e.mock.wait_call("chat.postMessage", NOTICE, after=mark)]
    await e2e.settle()
    assert _notices(e2e, mark) == [notice] and notice.body["channel"] == ALERTS
    assert f"run `{failed.run_id}` failed at *check*" in notice.text
    assert f"started by name-of-{ANA}" in notice.text and f"p{failed.thread.replace('.', '')}" in notice.text

    assert (await e2e.slack.command("unsubscribe flaky", channel=ALERTS)).status == 200
    await e2e.mock.wait_call("chat.postMessage", "no longer hears about *flaky*", after=mark)
    after = len(e2e.mock.calls)
    await start(e2e, f'run flaky "B" --force --set marker={e2e.tmp / "marker-B"}', rests_with=FAILED)
    await e2e.settle()
    assert _notices(e2e, after) == []


@pytest.mark.parametrize("error", ["not_in_channel", "is_archived"])
async def test_a_channel_that_refuses_a_notice_has_it_sent_to_its_subscriber_directly(
    e2e: SlackE2E, error: str
) -> None:
    assert (await e2e.slack.command("subscribe flaky failed", channel=ALERTS)).status == 200
    await e2e.mock.wait_call("chat.postMessage", "now hears about runs of *flaky*")
    e2e.mock.fail_next("chat.postMessage", error, times=5, only={"channel": ALERTS})
    mark = len(e2e.mock.calls)
    failed = await failed_run(e2e, "A")
    direct = await e2e.mock.wait_for(lambda calls: next(
        (c for c in calls[mark:] if c.method == "chat.postMessage" and NOTICE in c.text and c.ts), None))
    await e2e.settle()
    assert direct.body["channel"] == ANA and dm_of(direct.body["channel"]) == f"D{ANA}"
    assert f"run `{failed.run_id}` failed" in direct.text
    assert [c.body["channel"] for c in _notices(e2e, mark)] == [ANA] and CHANNEL != ALERTS
