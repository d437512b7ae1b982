"""A gate's reminder on Slack goes to the run's thread and, directly (a DM: `chat.postMessage`
to the person's user id), to each eligible approver who has not answered; not to who has.
Deadlines are fired with a controlled time (`GateDeadlines.tick(now)`), as the bot's loop does."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from core.config import Access, Settings
from tests.e2e.slack.conftest import BOT_TOKEN, SIGNING_SECRET, SlackE2E
from tests.e2e.slack.harness import ANA, BOB
from tests.e2e.slack.mock_slack import Call
from tests.e2e.slack.steps import WAITING, command, start

CAROL = "U0CAROL"
GATE = """
name: timed
nodes:
  - id: review
    approval:
      question: "Ship it?"
      approvers: [group:sre]
      required: 2
      timeout: 4h
      remind: [1h]
  - id: ship
    depends_on: [review]
    bash: printf shipped
    replay: pure
"""


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "timed.yaml").write_text(textwrap.dedent(GATE))
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=sqlite_url, workflow_dirs=[workflows], data_dir=tmp_path / "data", tool_modules=[],
        access=Access.model_validate({
            "groups": {"sre": [f"slack:{BOB}", f"slack:{CAROL}"]}, "run": {"*": [f"slack:{ANA}"]}}),
        slack_bot_token=BOT_TOKEN,  # type: ignore[arg-type]
        slack_signing_secret=SIGNING_SECRET,  # type: ignore[arg-type]
    )  # fmt: skip


async def test_a_reminder_goes_to_the_thread_and_directly_to_each_approver_not_answered(
    e2e: SlackE2E,
) -> None:
    paused = await start(e2e, "run timed", rests_with=WAITING)
    mark = await command(e2e, f"approve {paused.run_id}", user=BOB)
    await e2e.mock.wait_call("chat.postMessage", "Vote counted", after=mark)  # 1/2: Bob's vote
    await e2e.settle()
    gate = e2e.baton.store.get_gate(paused.run_id, "review")
    assert e2e.baton.deadlines is not None

    mark = len(e2e.mock.calls)
    [fired] = await e2e.baton.deadlines.deadlines.tick(now=gate.created_at + 3600)
    assert (fired.action, fired.to) == ("remind", (f"slack:{CAROL}",))

    def reminders(calls: list[Call]) -> list[Call] | None:
        found = [c for c in calls[mark:] if c.method == "chat.postMessage" and "Reminder" in c.text]
        return found if len(found) >= 2 else None

    in_thread, direct = await e2e.mock.wait_for(reminders)
    assert in_thread.body.get("thread_ts") == paused.thread and "Ship it?" in in_thread.text
    assert direct.body.get("channel") == CAROL and not direct.body.get("thread_ts")
    assert f"approve {paused.run_id}" in direct.text
    await e2e.settle()
    assert not any(c.body.get("channel") == BOB for c in e2e.mock.calls[mark:])
