"""`/workflow audit since:7d format:jsonl` on Discord: an admin gets the workspace's audit as a
file attached to the answer; anyone else gets a one-line refusal (ephemeral) and no file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.config import Access, Settings
from tests.e2e.discord.gateway import ANA, BOB
from tests.e2e.discord.harness import DiscordBot, settings_for


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str) -> Settings:
    people = [f"discord:{ANA['id']}", f"discord:{BOB['id']}"]
    access = Access(admins=[f"discord:{ANA['id']}"], run={"*": people}, approve={"*": people})
    return settings_for(tmp_path, sqlite_url).model_copy(update={"access": access})


async def test_an_admin_gets_the_audit_as_a_jsonl_file_and_others_are_refused(bot: DiscordBot) -> None:
    run_id, _, run = await bot.start('run notes "v1, final"', who=BOB)
    assert run.status == "completed"

    (refused,) = await bot.answers(bot.subcommand("audit", since="7d", format="jsonl", who=BOB))
    assert refused.json["flags"] & 64 and "admin" in refused.content
    assert not refused.files

    (told,) = await bot.answers(bot.subcommand("audit", since="7d", format="jsonl", who=ANA))
    assert "baton-audit-" in told.content
    ((name, data),) = told.files.items()
    assert name.startswith("baton-audit-") and name.endswith(".jsonl")
    rows = [json.loads(line) for line in data.decode("utf-8").splitlines()]
    started = [r for r in rows if r["action"] == "start"]
    assert [(r["actor"], r["run_id"]) for r in started] == [(f"discord:{BOB['id']}", run_id)]
    assert any(r["action"] == "refused" and r["actor"] == f"discord:{BOB['id']}" for r in rows)
