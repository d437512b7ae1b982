"""The App Home tab: a person's runs and the gates waiting for them, published when they open it
and again whenever what it shows changes."""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import ANA, BOB
from tests.e2e.slack.mock_slack import Call
from tests.e2e.slack.steps import WAITING, start


def home_text(call: Call) -> str:
    view = call.body["view"]
    view = json.loads(view) if isinstance(view, str) else view
    assert view["type"] == "home"
    return "\n".join(b["text"]["text"] for b in view["blocks"])


async def published(e2e: SlackE2E, user: str, contains: str, *, after: int = 0) -> Call:
    def found(calls: list[Call]) -> Call | None:
        for call in calls[after:]:
            mine = call.method == "views.publish" and call.body.get("user_id") == user
            if mine and contains in home_text(call):
                return call
        return None

    return await e2e.mock.wait_for(found)  # type: ignore[no-any-return]


def opened(user: str) -> dict[str, Any]:
    return {"type": "app_home_opened", "user": user, "channel": "D0HOME", "tab": "home",
            "event_ts": "1700000000.000100"}


async def test_app_home_shows_my_runs_and_the_gates_waiting_for_me_and_stays_current(e2e: SlackE2E) -> None:
    await e2e.slack.event(opened(ANA))
    await e2e.slack.event(opened(BOB))
    empty = await published(e2e, ANA, "You have started no run yet")
    assert "Nothing waits for you." in home_text(empty)

    mark = len(e2e.mock.calls)
    paused = await start(e2e, 'run gated "v1"', rests_with=WAITING)  # Ana's run waits at its gate

    mine = await published(e2e, ANA, f"run `{paused.run_id}` paused", after=mark)
    text = home_text(mine)
    assert "· <#C0OPS> · <http://127.0.0.1:8080/r/" in text and "|Open run>" in text  # her page link
    assert "• <#C0OPS>: <http://127.0.0.1:8080/c/" in text  # the conversation's list of runs
    waiting = await published(e2e, BOB, f"`/workflow approve {paused.run_id}`", after=mark)
    assert "at *review* in <#C0OPS>: Ship it?" in home_text(waiting)

    mark = len(e2e.mock.calls)
    await e2e.slack.command(f"approve {paused.run_id}", user=BOB)
    await published(e2e, BOB, "Nothing waits for you.", after=mark)  # decided: gone from Bob's home


async def test_commands_written_in_a_direct_message_are_answered(e2e: SlackE2E) -> None:
    mark = len(e2e.mock.calls)

    answer = await e2e.slack.event(e2e.slack.message_event("help", channel="D0ANA", channel_type="im"))

    assert answer.status == 200
    told = await e2e.mock.wait_for(lambda calls: [
        c for c in calls[mark:] if c.body.get("channel") == "D0ANA" and c.method.startswith("chat.post")])
    assert "/workflow run" in told[0].text and "Nothing waits for approval" not in told[0].text
