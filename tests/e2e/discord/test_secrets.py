"""No secret reaches Discord: the application assembled from settings that hold every secret
(`build_baton(settings, environ=…)`, as `baton run` builds it), driven by real interaction
payloads through discord.py; every request the fake Discord recorded (content, components,
attached files), the log and the audit trail are checked for each secret, whole or in part."""

from __future__ import annotations

import io
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.logging import setup_logging
from core.redaction import Redactor
from tests.e2e import leak
from tests.e2e.discord.fake_discord import FakeDiscord
from tests.e2e.discord.harness import DiscordBot, discord_bot, settings_for


@pytest.fixture
async def leaky_bot(
    tmp_path: Path, postgres_url: str, fake_discord: FakeDiscord
) -> AsyncIterator[tuple[DiscordBot, io.StringIO]]:
    """Baton on Discord, its settings holding every secret; and what it logs."""
    url = leak.with_password(postgres_url)
    settings = settings_for(tmp_path, url).model_copy(update={
        "slack_bot_token": SecretStr(leak.SLACK_BOT),
        "slack_app_token": SecretStr(leak.SLACK_APP),
        "slack_signing_secret": SecretStr(leak.SLACK_SIGNING),
        "discord_token": SecretStr(leak.DISCORD),
        "openai_api_key": SecretStr(leak.OPENAI),
        "secrets_file": leak.write_secrets_file(tmp_path / "step-secrets.env"),
        "step_secrets": ["DEPLOY_TOKEN"],
    })  # fmt: skip
    leak.write_workflows(settings.workflow_dirs[0], url)
    log = io.StringIO()
    root, level = logging.getLogger(), logging.getLogger().level
    handler = setup_logging("INFO", Redactor(settings.secrets()), stream=log)  # as `settings_for` does
    environ = {**os.environ, "DEPLOY_TOKEN": leak.DEPLOY}
    try:
        async with discord_bot(fake_discord, settings, environ=environ) as bot:
            yield bot, log
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def test_no_secret_reaches_discord_the_log_or_the_audit(
    leaky_bot: tuple[DiscordBot, io.StringIO],
) -> None:
    bot, log = leaky_bot
    shown_id, shown_thread, shown = await bot.start("run envdump")
    assert shown.status == "completed"
    done = (await bot.posted_in(shown_thread, " completed in ")).content
    done += "".join(f.decode(errors="replace") for c in bot.fake.calls for f in c.files.values())
    assert f"saw {leak.fingerprint(leak.DEPLOY)} {leak.fingerprint(leak.FILE_SECRET)}" in done
    assert "DEPLOY\\_TOKEN=•••" in done or "DEPLOY_TOKEN=•••" in done
    failed_id, failed_thread, failed = await bot.start("run leaky")
    assert failed.status == "failed"
    told = (await bot.posted_in(failed_thread, "Next: fix the step")).content
    assert "exited with code 3" in told and "•••" in told

    echoed = bot.command(f"status '{' '.join(leak.ALL)}'")  # typed back: echoed in an error
    assert "•••" in (await bot.answers(echoed))[0].content
    for run_id in (shown_id, failed_id):
        for what in ("status", "audit", "args"):
            await bot.answers(bot.command(f"{what} {run_id}"))
    await bot.baton.handler.drain()

    for call in bot.fake.calls:
        files = "".join(data.decode(errors="replace") for data in call.files.values())
        assert leak.leaks(call.path + leak.dumped(call.json) + files) == [], (call.method, call.path)
    assert leak.leaks(log.getvalue()) == [], log.getvalue()
    store = bot.baton.store
    audit = [
        leak.dumped(event.details) for r in store.runs.recent_runs() for event in store.events.audit_log(r.id)
    ]
    assert audit and leak.leaks("\n".join(audit)) == []
