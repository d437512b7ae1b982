"""When the run's channel stops taking its messages (the bot removed: `not_in_channel`, the
channel archived or gone), the state-carrying ones go to a direct message to whoever started
the run, and the first one there says so. The mock Web API fails the way Slack does."""

from __future__ import annotations

import pytest

from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import ANA, BOB, CHANNEL
from tests.e2e.slack.mock_slack import Call
from tests.e2e.slack.steps import WAITING, command, start


@pytest.mark.parametrize("error", ["not_in_channel", "channel_not_found", "is_archived"])
async def test_a_channel_that_refuses_the_completion_sends_it_to_the_requester(
    e2e: SlackE2E, error: str
) -> None:
    run = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    await e2e.settle()
    for method in ("chat.postMessage", "chat.update"):
        e2e.mock.fail_next(method, error, times=20, only={"channel": CHANNEL})

    mark = await command(e2e, f"approve {run.run_id}", user=BOB)
    await e2e.mock.wait_for(lambda _: e2e.baton.store.get_run(run.run_id).status == "completed")

    def direct(calls: list[Call]) -> list[Call]:
        return [c for c in calls[mark:] if c.method == "chat.postMessage" and c.body.get("channel") == ANA]

    def done(calls: list[Call]) -> list[Call] | None:
        found = direct(calls)
        return found if any(" completed in " in c.text for c in found) else None

    sent = await e2e.mock.wait_for(done)
    notes = [c for c in direct(e2e.mock.calls) if "reports run" in c.text]
    assert len(notes) == 1 and run.run_id in notes[0].text and error in notes[0].text
    assert sent.index(notes[0]) < next(i for i, c in enumerate(sent) if " completed in " in c.text)
