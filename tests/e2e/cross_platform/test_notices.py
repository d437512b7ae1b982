"""Notices end to end, one Baton process serving Slack and Discord (`build_baton`, the real
Bolt app over HTTP to the mock Slack Web API, the real discord.py client to the fake Discord):
a Slack run that fails is told once in the Discord channel subscribed to its workflow and
never echoed in its own Slack channel; a Discord run waiting at a gate is told in the Slack
channel subscribed to gates, whose Approve button decides it, and every copy of the gate's
buttons is withdrawn on both platforms."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.config import Access, Settings
from core.delivery.button_refs import command_of, parse
from core.store.records import GateStatus, RunStatus
from tests.e2e.cross_platform.test_gate_offers import CAROL, NAGGED, Both, _button, both_platforms
from tests.e2e.discord.fake_discord import CHANNEL_ID, GUILD_ID
from tests.e2e.discord.gateway import BOB
from tests.e2e.discord.harness import DEADLINE, custom_ids
from tests.e2e.slack.conftest import BOT_TOKEN, SIGNING_SECRET
from tests.e2e.slack.harness import ANA, CHANNEL
from tests.e2e.slack.mock_slack import Call as SlackCall
from tests.e2e.slack.steps import FAILED, command, start

BOOM = """
name: boom
nodes:
  - id: push
    bash: echo "no route to host" >&2; exit 2
    replay: pure
"""
NOTICE = "started by"  # every notice's line says who started the run


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "nagged.yaml").write_text(textwrap.dedent(NAGGED))
    (workflows / "boom.yaml").write_text(textwrap.dedent(BOOM))
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=sqlite_url, workflow_dirs=[workflows], data_dir=tmp_path / "data", tool_modules=[],
        prompt_provider="fake", discord_guild_id=int(GUILD_ID),
        access=Access.model_validate({
            "groups": {"sre": [f"discord:{BOB['id']}", f"slack:{CAROL}"]},
            "run": {"*": [f"slack:{ANA}", f"discord:{BOB['id']}"]}}),
        slack_bot_token=BOT_TOKEN,  # type: ignore[arg-type]
        slack_signing_secret=SIGNING_SECRET,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.fixture
async def both(settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Both]:
    async with both_platforms(settings, tmp_path, monkeypatch) as running:
        yield running


def _discord_notices(both: Both) -> list[dict[str, Any]]:
    return [m for m in both.discord.fake.messages.values()
            if m["channel_id"] == CHANNEL_ID and NOTICE in m["content"]]


async def test_a_slack_run_that_fails_is_told_once_in_the_subscribed_discord_channel(both: Both) -> None:
    slack, bot = both.slack, both.discord
    subscribed = bot.command("subscribe boom failed", who=BOB)
    [answer] = await bot.answers(subscribed)
    assert "now hears about runs of **boom**" in answer.json["content"]
    await command(slack, "subscribe boom failed")  # the run's own channel: never echoed
    failed = await start(slack, "run boom", rests_with=FAILED)
    found = await bot.fake.wait_for(lambda _: _discord_notices(both), DEADLINE)
    await slack.baton.handler.drain()
    [notice] = _discord_notices(both)
    assert f"run `{failed.run_id}` failed at **push**" in notice["content"]
    assert "no route to host" in notice["content"] and "started by" in notice["content"]
    assert f"https://slack.com/archives/{CHANNEL}/p{failed.thread.replace('.', '')}" in notice["content"]
    assert found == [notice]
    in_slack = [c for c in slack.mock.of("chat.postMessage") if NOTICE in c.text]
    assert in_slack == []  # no echo where the run reports
    rows = [r for r in slack.baton.store.outbox.deliveries(failed.run_id) if r.kind == "notice"]
    assert [(r.platform, r.conversation, r.delivered_at is not None) for r in rows] == [
        ("discord", CHANNEL_ID, True)]


async def test_a_gate_notice_in_slack_decides_a_discord_runs_gate_and_is_withdrawn_everywhere(
    both: Both,
) -> None:
    slack, bot = both.slack, both.discord
    await command(slack, "subscribe nagged gates")
    await slack.mock.wait_call("chat.postMessage", "now hears about runs of")
    mark = len(slack.mock.calls)
    run_id, thread, run = await bot.start("run nagged", who=BOB)
    assert (run.status, run.platform) == (RunStatus.PAUSED, "discord")
    await bot.posted_in(thread, "waits for approval")
    gate_message = bot.message_with(thread, "waits for approval")
    notice = await slack.mock.wait_call("chat.postMessage", NOTICE, after=mark)
    assert notice.body["channel"] == CHANNEL and "Ship it?" in notice.text
    assert f"name-of-{CAROL}" in notice.text  # who may decide (group sre)
    assert notice.button("approve")["value"] == f"approve {run_id}"

    # Carol approves with the notice's button, in Slack
    mark = len(slack.mock.calls)
    clicked = await slack.slack.click(notice, "approve", user=CAROL)
    assert clicked.status == 200
    await bot.posted_in(thread, " completed in ")
    decided = slack.baton.store.gates.get_gate(run_id, "review")
    assert (decided.status, decided.decided_by) == (GateStatus.APPROVED, f"slack:{CAROL}")

    def withdrawn_on_discord(_: object) -> dict[str, Any] | None:
        now = bot.fake.messages[gate_message["id"]]
        return now if not custom_ids(now["components"], enabled=True) else None

    await bot.fake.wait_for(withdrawn_on_discord, DEADLINE)

    def withdrawn_on_slack(calls: list[SlackCall]) -> SlackCall | None:
        return next((c for c in calls[mark:] if c.method == "chat.update" and c.body.get("ts") == notice.ts
                     and f"Approved by name-of-{CAROL}" in c.text), None)

    edit = await slack.mock.wait_for(withdrawn_on_slack)
    assert [b["value"] for b in edit.buttons] == [f"open {run_id}"]  # Approve / Reject gone, the page stays
    assert edit.body["channel"] == CHANNEL


async def test_a_gate_notice_in_discord_decides_a_slack_runs_gate_with_its_button(both: Both) -> None:
    slack, bot = both.slack, both.discord
    subscribed = bot.command("subscribe nagged gates", who=BOB)
    await bot.answers(subscribed)
    paused = await start(slack, "run nagged", rests_with="waits for approval at")
    found = await bot.fake.wait_for(lambda _: _discord_notices(both), DEADLINE)
    [notice] = found
    assert f"run `{paused.run_id}` waits at **review**: **Ship it?**" in notice["content"]
    mark = len(slack.mock.calls)
    click = bot.click(_button(bot, notice, f"approve {paused.run_id}"), who=BOB)
    await bot.acknowledged(click)
    await slack.mock.wait_call("chat.postMessage", " completed in ", after=mark)
    assert slack.baton.store.gates.get_gate(paused.run_id, "review").decided_by == f"discord:{BOB['id']}"

    def deciding(message: dict[str, Any]) -> list[str]:
        """The commands of its enabled buttons that decide a gate ("Open run" stays)."""
        get_blob = bot.baton.store.blobs.get_blob
        commands = [command_of(ref, get_blob) for cid in custom_ids(message["components"], enabled=True)
                    if (ref := parse(cid)) is not None]
        return [c for c in commands if c and c.startswith(("approve", "reject"))]

    def withdrawn_on_discord(_: object) -> dict[str, Any] | None:
        now = bot.fake.messages[notice["id"]]
        return now if not deciding(now) else None

    now = await bot.fake.wait_for(withdrawn_on_discord, DEADLINE)
    assert f"Approved by <@{BOB['id']}>" in now["content"]
    edit = await slack.mock.wait_for(lambda calls: next(
        (c for c in calls[mark:] if c.method == "chat.update" and c.body.get("ts") == paused.rest.ts
         and "Approved by" in c.text), None))
    assert edit.buttons == []  # the run's own gate message in Slack, withdrawn too
