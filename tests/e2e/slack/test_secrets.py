"""No secret reaches Slack: the application assembled from settings that hold every secret
(`build_baton(settings, environ=…)`, as `baton run` builds it), driven through slack-bolt
with signed requests; every Web API call the mock Slack recorded, the log and the audit
trail are checked for each secret, whole or in part."""

from __future__ import annotations

import io
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.logging import setup_logging
from core.config import Settings
from core.redaction import Redactor
from tests.e2e import leak
from tests.e2e.slack.conftest import SlackE2E, slack_baton
from tests.e2e.slack.mock_slack import MockSlack
from tests.e2e.slack.steps import COMPLETED, FAILED, command, start


@pytest.fixture
async def leaky_slack(
    tmp_path: Path, postgres_url: str, mock_slack: MockSlack
) -> AsyncIterator[tuple[SlackE2E, io.StringIO]]:
    """Baton on Slack, its settings holding every secret; and what it logs."""
    url = leak.with_password(postgres_url)
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    leak.write_workflows(workflows, url)
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=url,
        workflow_dirs=[workflows],
        data_dir=tmp_path / "data",
        tool_modules=[],
        slack_bot_token=SecretStr(leak.SLACK_BOT),
        slack_app_token=SecretStr(leak.SLACK_APP),
        slack_signing_secret=SecretStr(leak.SLACK_SIGNING),
        discord_token=SecretStr(leak.DISCORD),
        openai_api_key=SecretStr(leak.OPENAI),
        secrets_file=leak.write_secrets_file(tmp_path / "step-secrets.env"),
        step_secrets=["DEPLOY_TOKEN"],
    )
    log = io.StringIO()
    root, level = logging.getLogger(), logging.getLogger().level
    handler = setup_logging("INFO", Redactor(settings.secrets()), stream=log)  # as `settings_for` does
    environ = {**os.environ, "DEPLOY_TOKEN": leak.DEPLOY}
    try:
        async with slack_baton(settings, mock_slack, tmp_path, environ=environ) as e2e:
            yield e2e, log
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def test_no_secret_reaches_slack_the_log_or_the_audit(
    leaky_slack: tuple[SlackE2E, io.StringIO],
) -> None:
    e2e, log = leaky_slack
    shown = await start(e2e, "run envdump", rests_with=COMPLETED)
    assert f"saw {leak.fingerprint(leak.DEPLOY)} {leak.fingerprint(leak.FILE_SECRET)}" in shown.rest.text
    assert "DEPLOY_TOKEN=•••" in shown.rest.text
    failed = await start(e2e, "run leaky", rests_with=FAILED)
    assert "exited with code 3" in failed.rest.text and "•••" in failed.rest.text
    encoded = await start(e2e, "run encoded", rests_with=COMPLETED)  # base64, hex: `leaks` decodes
    assert "Authorization: Basic " in encoded.rest.text and encoded.rest.text.count("•••") >= 6

    mark = await command(e2e, f"status '{' '.join(leak.ALL)}'")  # typed back: echoed in an error
    told = await e2e.mock.wait_call("chat.postEphemeral", after=mark)
    assert "•••" in told.text
    for run_id in (shown.run_id, failed.run_id):
        for what in ("status", "audit", "args"):
            mark = await command(e2e, f"{what} {run_id}")
            await e2e.mock.wait_for(lambda calls, m=mark, r=run_id: [  # type: ignore[misc]
                c for c in calls[m:] if c.method.startswith("chat.post") and r in c.text])
    await e2e.settle()

    for call in e2e.mock.calls:
        assert leak.leaks(leak.dumped(call.body) + call.text) == [], (call.method, call.body)
    assert all(leak.leaks(data.decode(errors="replace")) == [] for data in e2e.mock.uploads.values())
    assert leak.leaks(log.getvalue()) == [], log.getvalue()
    store = e2e.baton.store
    audit = [
        leak.dumped(event.details) for r in store.runs.recent_runs() for event in store.events.audit_log(r.id)
    ]
    assert audit and leak.leaks("\n".join(audit)) == []


async def test_a_secret_at_every_offset_of_a_long_output_is_never_split_across_sections(
    leaky_slack: tuple[SlackE2E, io.StringIO],
) -> None:
    e2e, _ = leaky_slack
    shown = await start(e2e, "run chunks", rests_with=COMPLETED)
    await e2e.settle()

    sections = [b["text"]["text"] for b in shown.rest.body.get("blocks") or [] if b.get("type") == "section"]
    assert len(sections) >= 2  # one line longer than a section: cut where a secret would straddle
    assert "".join(sections).count("•••") == 100  # every one of them hidden, whole
    for call in e2e.mock.calls:
        assert leak.leaks(leak.dumped(call.body) + call.text) == [], (call.method, call.body)
    assert all(leak.leaks(data.decode(errors="replace")) == [] for data in e2e.mock.uploads.values())
