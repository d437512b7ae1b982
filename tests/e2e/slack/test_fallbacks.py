"""When the run's channel stops taking its messages (the bot removed: `not_in_channel`, the
channel archived or gone), the state-carrying ones go through the response URL of the command
that started the run while it lives (30 minutes, 5 posts), then to a direct message to whoever
started it; the first one in each place says so. The mock Web API fails the way Slack does."""

from __future__ import annotations

import pytest

from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import ANA, BOB, CHANNEL
from tests.e2e.slack.mock_slack import Call
from tests.e2e.slack.steps import WAITING, command, run_id_of, start, wait_in_thread


def _refuse(e2e: SlackE2E, error: str) -> None:
    for method in ("chat.postMessage", "chat.update"):
        e2e.mock.fail_next(method, error, times=20, only={"channel": CHANNEL})


@pytest.mark.parametrize("error", ["not_in_channel", "channel_not_found", "is_archived"])
async def test_a_channel_that_refuses_the_completion_sends_it_through_the_commands_response_url(
    e2e: SlackE2E, error: str
) -> None:
    mark = await command(e2e, 'run gated "v1"')
    url = e2e.slack.last_command_url
    started = await e2e.mock.wait_call("chat.postMessage", "Started", after=mark)
    run_id = run_id_of(started)
    await wait_in_thread(e2e, started.ts or "", WAITING, after=mark)
    await e2e.settle()
    _refuse(e2e, error)

    after = await command(e2e, f"approve {run_id}", user=BOB)
    await e2e.mock.wait_for(lambda _: e2e.baton.store.runs.get_run(run_id).status == "completed")
    await e2e.settle()

    def through_url(calls: list[Call]) -> list[Call]:  # the run's command's URL, not the approval's
        return [c for c in calls[after:] if c.method == "response_url" and c.body["name"] == url]

    def done(calls: list[Call]) -> list[Call] | None:
        found = through_url(calls)
        return found if any(" completed in " in c.text for c in found) else None

    sent = await e2e.mock.wait_for(done)
    notes = [c for c in sent if "answers about run" in c.text]
    assert len(notes) == 1 and run_id in notes[0].text and error in notes[0].text
    assert sent.index(notes[0]) < next(i for i, c in enumerate(sent) if " completed in " in c.text)
    assert all(c.body.get("response_type") == "in_channel" and c.ts for c in sent)  # the channel sees it
    assert not [c for c in e2e.mock.calls[after:] if c.body.get("channel") == ANA]  # no DM needed


@pytest.mark.parametrize("error", ["not_in_channel", "channel_not_found", "is_archived"])
async def test_once_the_response_url_expired_the_completion_goes_to_the_requester_directly(
    e2e: SlackE2E, error: str
) -> None:
    run = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    await e2e.settle()
    e2e.mock.expired_urls.add(e2e.slack.last_command_url)  # the run's command: its 30 minutes are over
    _refuse(e2e, error)

    mark = await command(e2e, f"approve {run.run_id}", user=BOB)
    await e2e.mock.wait_for(lambda _: e2e.baton.store.runs.get_run(run.run_id).status == "completed")

    def direct(calls: list[Call]) -> list[Call]:
        return [c for c in calls[mark:] if c.method == "chat.postMessage" and c.body.get("channel") == ANA]

    def done(calls: list[Call]) -> list[Call] | None:
        found = direct(calls)
        return found if any(" completed in " in c.text for c in found) else None

    sent = await e2e.mock.wait_for(done)
    notes = [c for c in direct(e2e.mock.calls) if "reports run" in c.text]
    assert len(notes) == 1 and run.run_id in notes[0].text and error in notes[0].text
    assert sent.index(notes[0]) < next(i for i, c in enumerate(sent) if " completed in " in c.text)


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_a_server_error_is_retried_by_slack_sdk(e2e: SlackE2E, status: int) -> None:
    e2e.mock.fail_next("chat.postMessage", "internal_error", status=status)

    mark = await command(e2e, 'run gated "v1"')

    def started(calls: list[Call]) -> list[Call]:
        return [c for c in calls[mark:] if c.method == "chat.postMessage" and "Started" in c.text]

    failed, retried = (await e2e.mock.wait_for(lambda calls: len(started(calls)) >= 2 and started(calls)))[:2]
    assert failed.ts is None and retried.ts is not None  # the same message, posted on the retry
    await e2e.mock.wait_call("chat.postMessage", WAITING, after=mark)


async def test_a_started_run_whose_message_slack_refuses_is_not_started_again(e2e: SlackE2E) -> None:
    e2e.mock.fail_next("chat.postMessage", "ratelimited", status=429, headers={"Retry-After": "0"},
                       times=4, only={"channel": CHANNEL})  # beyond slack_sdk's retries

    mark = await command(e2e, 'run gated "v1"')

    told = await e2e.mock.wait_call("response_url", "started", after=mark)
    [run] = e2e.baton.store.runs.recent_runs(platform="slack")
    assert run.id in told.body["text"] and "Do not start it again" in told.body["text"]
    assert "try again" not in told.body["text"].lower()
