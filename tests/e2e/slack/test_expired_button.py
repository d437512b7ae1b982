"""Long button commands live in the core's one store (content-addressed blobs), kept as long
as the database: a Slack button whose command is too long for its value still works after
housekeeping swept the adapters' values (`BATON_STATE_RETENTION_DAYS`). A reference the store
never kept (a message from another installation) tells the clicker, privately, that the button
expired and what to type instead; nothing runs."""

from __future__ import annotations

import dataclasses
import json
import time

from bot.housekeeping import DAY, HOUR, Housekeeping
from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.mock_slack import Call
from tests.e2e.slack.steps import PROMPT, WAITING, command, start

LONG = "a message longer than a Slack button value: " + "x" * 2100


async def _prompt(e2e: SlackE2E) -> Call:
    await start(e2e, 'run gated "v1"', rests_with=WAITING)
    mark = await command(e2e, f'run gated "{LONG}"')
    prompt = await e2e.mock.wait_call("chat.postMessage", PROMPT, after=mark)
    assert prompt.button("force")["value"].startswith("ref:")
    await e2e.settle()
    return prompt


async def test_a_long_button_still_works_after_the_state_retention(e2e: SlackE2E) -> None:
    prompt = await _prompt(e2e)
    month_later = Housekeeping(e2e.baton.store, every=3600, event_retention=24 * HOUR,
                               state_retention=30 * DAY, clock=lambda: time.time() + 31 * DAY)
    assert month_later.sweep().state >= 1  # the adapters' values (the progress message) went

    mark = len(e2e.mock.calls)
    answer = await e2e.slack.click(prompt, "force")
    assert answer.status == 200
    await e2e.mock.wait_call("chat.postMessage", "Started", after=mark)
    [forced, _] = e2e.baton.store.runs.recent_runs(platform="slack")
    assert LONG in json.dumps(e2e.baton.store.blobs.get_blob(forced.args_digest or "").decode())


async def test_a_reference_nobody_kept_says_it_expired_and_what_to_type(e2e: SlackE2E) -> None:
    prompt = await _prompt(e2e)
    blocks = json.loads(json.dumps(prompt.body["blocks"]))
    for block in blocks:
        for element in block.get("elements", []) if block.get("type") == "actions" else []:
            if str(element.get("value", "")).startswith("ref:"):
                element["value"] = "ref:" + "0" * 64  # no such command in this store
    unknown = dataclasses.replace(prompt, body={**prompt.body, "blocks": blocks})

    mark = len(e2e.mock.calls)
    answer = await e2e.slack.click(unknown, "force")
    assert answer.status == 200
    told = await e2e.mock.wait_call("response_url", "expired", after=mark)

    assert "no longer remembers its command" in told.text
    assert "Type the command shown in the message with `/workflow`" in told.text
    assert told.body.get("response_type") == "ephemeral"
    await e2e.settle()
    assert len(e2e.baton.store.runs.recent_runs(platform="slack")) == 1  # only the first run: nothing ran
