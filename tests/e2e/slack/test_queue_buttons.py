"""A queued run on Slack: its first message says it is queued and behind whom, its progress
message in its thread carries a Cancel button that only who may use can use, and a click
takes the run out of the queue (real Bolt app over signed HTTP, the mock Web API)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import Access, Settings
from core.store.records import RunStatus
from tests.e2e.slack.conftest import BOT_TOKEN, SIGNING_SECRET, SlackE2E
from tests.e2e.slack.harness import ANA, BOB
from tests.e2e.slack.steps import WAITING, command, run_id_of, start, wait_in_thread

SHIP = """\
name: ship
concurrency: {key: deploy-prod, limit: 1}
nodes:
  - id: prepare
    bash: echo prepared
    replay: pure
  - id: review
    depends_on: [prepare]
    approval: "Ship it?"
"""


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str, access: Access) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "ship.yaml").write_text(SHIP)
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=sqlite_url, workflow_dirs=[workflows], data_dir=tmp_path / "data", tool_modules=[],
        access=access, slack_bot_token=BOT_TOKEN,  # type: ignore[arg-type]
        slack_signing_secret=SIGNING_SECRET,  # type: ignore[arg-type]
    )


async def test_a_queued_runs_cancel_button(e2e: SlackE2E) -> None:
    held = await start(e2e, 'run ship "v1"', rests_with=WAITING)
    mark = await command(e2e, 'run ship "v2" --force', user=BOB)
    first = await e2e.mock.wait_call("chat.postMessage", "Queued", after=mark)
    queued = run_id_of(first)
    assert f"queued #1 for `deploy-prod`, behind `{held.run_id[:6]}` (paused at `review` for" in first.text
    assert first.ts is not None
    progress = await wait_in_thread(e2e, first.ts, "queued #1 for", after=mark)
    assert progress.button("cancel")["value"] == f"cancel {queued}"

    refused = await e2e.slack.click(progress, "cancel", user=ANA)  # not hers
    assert refused.status == 200
    await e2e.settle()
    assert e2e.baton.store.runs.get_run(queued).status is RunStatus.QUEUED

    answer = await e2e.slack.click(progress, "cancel", user=BOB)
    assert answer.status == 200
    await e2e.settle()
    assert e2e.baton.store.runs.get_run(queued).status is RunStatus.CANCELLED
    assert e2e.baton.store.runs.get_run(held.run_id).status is RunStatus.PAUSED
    actions = [e.action for e in e2e.baton.store.events.audit_log(queued)]
    assert "queued" in actions and "cancel" in actions
