"""The "Open run" button in Slack: each clicker gets their own link, privately; the button stays."""

from __future__ import annotations

import re

from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import ANA, BOB
from tests.e2e.slack.mock_slack import Call
from tests.e2e.slack.steps import STARTED, command

LINK = re.compile(r"<(http://[^|>]+/r/[\w.\-]+)\|Open run>")


async def private_link(e2e: SlackE2E, message: Call, user: str) -> str:
    mark = len(e2e.mock.calls)
    answer = await e2e.slack.click(message, "open", user=user)
    assert answer.status == 200, answer

    def found(calls: list[Call]) -> Call | None:
        return next((c for c in calls[mark:] if LINK.search(c.text)), None)

    reply: Call = await e2e.mock.wait_for(found)
    assert reply.method in ("response_url", "chat.postEphemeral"), reply  # only the clicker sees it
    if reply.method == "response_url":
        assert reply.body.get("response_type") == "ephemeral"
    match = LINK.search(reply.text)
    assert match is not None
    return match.group(1)


async def test_each_clicker_gets_their_own_link_and_the_button_stays(e2e: SlackE2E) -> None:
    mark = await command(e2e, 'run gated "v1"')
    first = await e2e.mock.wait_call("chat.postMessage", STARTED, after=mark)
    assert "open" in {b["action_id"].split(":")[1] for b in first.buttons}
    mine = await private_link(e2e, first, ANA)
    theirs = await private_link(e2e, first, BOB)
    assert mine != theirs  # bound to who clicked
    assert not [c for c in e2e.mock.calls if c.method == "chat.update" and c.body.get("ts") == first.ts
                and "chose" in c.text]  # nothing was "chosen": the next reader can click it too
    assert first.button("open")  # still offered
