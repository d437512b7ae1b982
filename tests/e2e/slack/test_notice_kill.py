"""kill -9 between a run's failure and its notice's post: a real `baton run` (Slack over HTTP,
the mock Web API) fails a run whose workflow a second channel subscribed to; Slack hangs on the
notice (never took it, or took it and never answered) and the process is killed. The next
process delivers the notice from the outbox once its claim lapses: the subscribed channel holds
exactly one notice, and the run's own channel none."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from core.store.records import RunStatus
from core.store.repository import SqlStore
from tests.e2e.slack.conftest import WORKFLOWS
from tests.e2e.slack.harness import CHANNEL
from tests.e2e.slack.mock_slack import MockSlack
from tests.e2e.slack.test_fault_processes import _serve
from tests.e2e.slack.test_process import slack_env

pytestmark = pytest.mark.timeout(300)

BOOM = """
name: boom
nodes:
  - id: push
    bash: echo "no route to host" >&2; exit 2
    replay: pure
"""
ALERTS = "C0ALERTS"
NOTICE = "started by"


def _notice_rows(url: str) -> list[tuple[str, bool]]:
    with SqlStore(url) as store:
        runs = store.runs.recent_runs(platform="slack")
        return [(r.conversation, r.delivered_at is not None)
                for run in runs for r in store.outbox.deliveries(run.id) if r.kind == "notice"]


@pytest.mark.parametrize("taken", [False, True], ids=["slack-never-took-it", "slack-took-it"])
async def test_a_notice_is_delivered_once_after_a_kill_between_the_failure_and_its_post(
    mock_slack: MockSlack, tmp_path: Path, taken: bool
) -> None:
    workflows = tmp_path / "workflows"
    shutil.copytree(WORKFLOWS, workflows)
    (workflows / "boom.yaml").write_text(BOOM)
    url = f"sqlite:///{tmp_path / 'baton.db'}"
    env = slack_env(mock_slack, tmp_path, url)
    env.update(BATON_WORKFLOW_DIRS=str(workflows), BATON_LEASE_SECONDS="2", BATON_OUTBOX_LEASE_SECONDS="3",
               BATON_OUTBOX_POLL_SECONDS="0.5")
    mock_slack.hold("chat.postMessage", NOTICE, taken=taken)
    first, slack = await _serve(env, tmp_path, mock_slack)
    try:
        assert (await slack.command("subscribe boom failed", channel=ALERTS)).status == 200
        await mock_slack.wait_call("chat.postMessage", "now hears about runs of", timeout=30)
        assert (await slack.command("run boom")).status == 200
        await mock_slack.wait_for(lambda _: mock_slack.held, 60)  # the notice hangs
        with SqlStore(url) as store:
            [run] = store.runs.recent_runs(platform="slack")
            assert store.runs.get_run(run.id).status is RunStatus.FAILED
        assert _notice_rows(url) == [(ALERTS, False)]
        first.kill()
        await first.exited()
    finally:
        await slack.close()
        mock_slack.release()
    second, unused = await _serve(env, tmp_path, mock_slack)
    await unused.close()  # nothing is typed to the next process: it only delivers
    try:
        async with asyncio.timeout(60):
            while _notice_rows(url) != [(ALERTS, True)]:
                await asyncio.sleep(0.1)
        notices = [m for m in mock_slack.messages if NOTICE in m["text"]]
        assert [m["channel"] for m in notices] == [ALERTS]  # once, and never in the run's channel
        assert f"run `{run.id}` failed at *push*" in notices[0]["text"] and CHANNEL != ALERTS
    finally:
        assert await second.stop() == 0, second.output
