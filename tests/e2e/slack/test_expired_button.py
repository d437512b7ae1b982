"""A Slack button whose long command housekeeping has forgotten (`BATON_STATE_RETENTION_DAYS`)
tells the clicker, privately, that it expired and what to type instead; nothing runs."""

from __future__ import annotations

import time

from bot.housekeeping import DAY, HOUR, Housekeeping
from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.steps import PROMPT, WAITING, command, start

LONG = "a message longer than a Slack button value: " + "x" * 2100


async def test_a_long_button_past_the_state_retention_says_it_expired_and_what_to_type(
    e2e: SlackE2E,
) -> None:
    await start(e2e, 'run gated "v1"', rests_with=WAITING)
    mark = await command(e2e, f'run gated "{LONG}"')
    prompt = await e2e.mock.wait_call("chat.postMessage", PROMPT, after=mark)
    assert prompt.button("force")["value"].startswith("ref:")
    await e2e.settle()
    month_later = Housekeeping(
        e2e.baton.store,
        every=3600,
        event_retention=24 * HOUR,
        state_retention=30 * DAY,
        clock=lambda: time.time() + 31 * DAY,
    )
    assert month_later.sweep().state >= 1  # the button's command (and the progress message)

    mark = len(e2e.mock.calls)
    answer = await e2e.slack.click(prompt, "force")
    assert answer.status == 200
    told = await e2e.mock.wait_call("response_url", "expired", after=mark)

    assert "no longer remembers its command" in told.text
    assert "Type the command shown in the message with `/workflow`" in told.text
    assert told.body.get("response_type") == "ephemeral"
    await e2e.settle()
    assert len(e2e.baton.store.recent_runs(platform="slack")) == 1  # only the first run: nothing ran
