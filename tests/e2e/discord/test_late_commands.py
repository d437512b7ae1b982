"""A Discord interaction recorded, deferred, and its process killed before it was handled:
Discord never redelivers an interaction, so Baton records it before the deferral. The next
process (wired as `baton run` is, `bot_process.py`) handles it once, after
`BATON_EVENT_STALE_SECONDS`, and posts its answer in the channel, saying it was handled after a
restart (the interaction's own follow-up is not relied on)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from core.store.repository import SqlStore
from tests.e2e.discord.fake_discord import FakeDiscord
from tests.e2e.discord.gateway import ANA, slash_command
from tests.e2e.discord.harness import settings_for
from tests.e2e.discord.test_process import fake_discord_url
from tests.e2e.process import REPO, BatonProcess, clean_env

pytestmark = pytest.mark.timeout(240)

LATE = "handled after a restart"


async def _bot(fake: FakeDiscord, url: str, place: Path, command: str | None = None) -> BatonProcess:
    args = [fake_discord_url(fake), url, str(place)]
    if command is not None:
        interaction = place / "interaction.json"
        interaction.write_text(json.dumps(slash_command(fake, command)))
        args.append(str(interaction))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.e2e.discord.bot_process", *args, cwd=REPO,
        env=clean_env(BATON_EVENT_STALE_SECONDS="1"), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    baton = BatonProcess(proc)
    await baton.wait_log("action=discord_ready")
    return baton


async def test_an_interaction_killed_after_its_deferral_is_handled_once_after_the_restart(
    fake_discord: FakeDiscord, tmp_path: Path
) -> None:
    settings_for(tmp_path, "sqlite://")  # copies the workflows
    url = f"sqlite:///{tmp_path / 'baton.db'}"
    fake_discord.hold("POST", "")  # the deferral (the interaction's callback) hangs: killed then
    first = await _bot(fake_discord, url, tmp_path, 'run notes "typed before the crash"')
    try:
        await fake_discord.wait_for(lambda _: fake_discord.held, 60)
    finally:
        first.kill()
        await first.exited()
        fake_discord.release()
    with SqlStore(url) as store:
        assert store.runs.recent_runs(limit=10) == []
        assert len(store.events.open_events(before=2e9)) == 1
    mark = len(fake_discord.calls)
    second = await _bot(fake_discord, url, tmp_path)
    try:
        await fake_discord.wait_for(lambda calls: [c for c in calls[mark:] if LATE in c.content], 60)
        done = "completed in"
        await fake_discord.wait_for(lambda calls: [c for c in calls[mark:] if done in c.content], 60)
    finally:
        assert await second.stop() == 0, second.output
    late = [c for c in fake_discord.calls[mark:] if LATE in c.content and c.method == "POST"]
    assert len(late) == 1, [c.content for c in late]
    # addressed to who typed it: the one mention allowed to ping (every other message allows none)
    assert late[0].content.startswith(f"⏱️ <@{ANA['id']}>, your")
    assert late[0].json["allowed_mentions"] == {"parse": [], "users": [int(ANA["id"])]}
    with SqlStore(url) as store:
        [run] = store.runs.recent_runs(limit=10)
        assert run.workflow == "notes" and run.platform == "discord"
        assert store.events.open_events(before=2e9) == []
