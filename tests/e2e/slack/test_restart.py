"""A restart between two messages of a run: the new process edits the progress message the
old one posted, and a button whose command was too long for Slack still works."""

from __future__ import annotations

from pathlib import Path

from core.config import Settings
from tests.e2e.slack.conftest import slack_baton
from tests.e2e.slack.harness import BOB
from tests.e2e.slack.mock_slack import Call, MockSlack
from tests.e2e.slack.steps import COMPLETED, PROMPT, STARTED, WAITING, command, start, wait_in_thread

LONG = "a message longer than a Slack button value: " + "x" * 2100


def _progress(calls: list[Call], run_id: str) -> list[Call]:
    return [c for c in calls if run_id in c.text and "—" in c.text]


async def test_after_a_restart_progress_is_edited_in_place(
    settings: Settings, mock_slack: MockSlack, tmp_path: Path
) -> None:
    async with slack_baton(settings, mock_slack, tmp_path) as first:
        run = await start(first, 'run gated "v1"', rests_with=WAITING)
        await first.settle()
        [posted] = [c for c in _progress(mock_slack.calls, run.run_id) if c.method == "chat.postMessage"]

    async with slack_baton(settings, mock_slack, tmp_path) as second:  # same database, new process
        mark = await command(second, f"approve {run.run_id}", user=BOB)
        await wait_in_thread(second, run.thread, COMPLETED, after=mark)
        await second.settle()

    after = _progress(mock_slack.calls[mark:], run.run_id)
    assert after and all(c.method == "chat.update" and c.body["ts"] == posted.ts for c in after)
    assert "completed" in after[-1].text


async def test_after_a_restart_a_button_with_a_long_command_still_runs_it(
    settings: Settings, mock_slack: MockSlack, tmp_path: Path
) -> None:
    async with slack_baton(settings, mock_slack, tmp_path) as first:
        await start(first, 'run gated "v1"', rests_with=WAITING)
        mark = await command(first, f'run gated "{LONG}"')
        prompt = await mock_slack.wait_call("chat.postMessage", PROMPT, after=mark)
        assert prompt.button("force")["value"].startswith("ref:")  # passed by reference
        await first.settle()

    async with slack_baton(settings, mock_slack, tmp_path) as second:
        mark = len(mock_slack.calls)
        answer = await second.slack.click(prompt, "force")
        assert answer.status == 200
        await mock_slack.wait_call("chat.postMessage", STARTED, after=mark)
        fresh = second.baton.store.runs.recent_runs(platform="slack")[0]
        assert second.baton.engine.args_of(fresh)["message"] == LONG
        await second.settle()
