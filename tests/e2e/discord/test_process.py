"""The real `baton` process against the fake Discord (BATON_DISCORD_API_URL): a wrong server or
token is a one-line configuration error with exit 2, never restarted; `baton discord sync`."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

from tests.e2e.discord.fake_discord import GUILD_ID, FakeDiscord
from tests.e2e.discord.harness import WORKFLOWS
from tests.e2e.process import BatonProcess, clean_env

WRONG_GUILD = "1100000000000000777"


def discord_env(fake_url: str, tmp_path: Path, database_url: str, **extra: str) -> dict[str, str]:
    workflows = tmp_path / "workflows"
    if not workflows.exists():
        shutil.copytree(WORKFLOWS, workflows)
    return clean_env(**{
        "BATON_DISCORD_TOKEN": "test-token", "BATON_DISCORD_GUILD_ID": GUILD_ID,
        "BATON_DISCORD_API_URL": fake_url, "BATON_DATABASE_URL": database_url,
        "BATON_WORKFLOW_DIRS": str(workflows), "BATON_DATA_DIR": str(tmp_path / "data"),
        "BATON_WEB_PORT": "off", "BATON_TOOL_MODULES": "[]", "BATON_LOG_LEVEL": "WARNING", **extra,
    })


async def _exit_2(env: dict[str, str], cwd: Path) -> list[str]:
    baton = await BatonProcess.start(env, "run", "--supervise", cwd=cwd)  # a supervisor that must not retry
    assert await baton.exited() == 2, baton.output
    assert "Traceback" not in baton.output
    return [line for line in baton.lines if not line.startswith("ts=")]


async def test_a_server_the_bot_is_not_in_is_one_line_and_exit_2_never_restarted(
    fake_discord: FakeDiscord, tmp_path: Path, sqlite_url: str
) -> None:
    url = fake_discord_url(fake_discord)
    env = discord_env(url, tmp_path, sqlite_url, BATON_DISCORD_GUILD_ID=WRONG_GUILD)
    said = await _exit_2(env, tmp_path)

    assert said[0] == f"error: Discord refused Baton's commands in server {WRONG_GUILD} (Missing Access)."
    assert said[1].startswith("Check BATON_DISCORD_GUILD_ID") and len(said) == 2
    assert len(fake_discord.find("PUT", "/commands")) == 1  # one start: the supervisor did not retry


async def test_a_rejected_token_is_one_line_and_exit_2_never_restarted(
    fake_discord: FakeDiscord, tmp_path: Path, sqlite_url: str
) -> None:
    fake_discord.bot_token = "the-real-token"

    said = await _exit_2(discord_env(fake_discord_url(fake_discord), tmp_path, sqlite_url), tmp_path)

    assert said == ["error: BATON_DISCORD_TOKEN was rejected by Discord.",
                    "Copy the bot token again from the Developer Portal (Bot → Reset Token)."]
    assert len(fake_discord.find("GET", "users/@me")) == 1


async def test_discord_sync_registers_the_commands_every_time_it_is_asked(
    fake_discord: FakeDiscord, tmp_path: Path, sqlite_url: str
) -> None:
    env = discord_env(fake_discord_url(fake_discord), tmp_path, sqlite_url)

    for _ in range(2):  # unchanged, yet synced: that is what the command is for
        baton = await BatonProcess.start(env, "discord", "sync", cwd=tmp_path)
        assert await baton.exited() == 0, baton.output
        assert f"Registered 1 application command in server {GUILD_ID}." in baton.lines

    assert len(fake_discord.find("PUT", f"guilds/{GUILD_ID}/commands")) == 2


def fake_discord_url(fake: FakeDiscord) -> str:
    import discord

    return str(discord.http.Route.BASE)  # the fixture pointed this process's discord.py at the fake


async def test_discord_unreachable_is_one_line_and_exit_1_so_a_supervisor_tries_again(
    tmp_path: Path, sqlite_url: str
) -> None:
    """Nothing listens where Discord should be (DNS down, a firewall): `baton run` said so with
    aiohttp's traceback; now one line, and exit 1 (not 2: a restart may well succeed)."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]  # closed again: connections to it are refused
    env = discord_env(f"http://127.0.0.1:{port}/api/v10", tmp_path, sqlite_url)
    for command in (["run"], ["discord", "sync"]):
        baton = await BatonProcess.start(env, *command, cwd=tmp_path)
        assert await baton.exited() == 1, baton.output
        assert "Traceback" not in baton.output
        said = [line for line in baton.lines if not line.startswith("ts=")]
        assert said == ["error: Baton could not reach Discord (ClientConnectorError).",
                        "Check the machine's network (and BATON_DISCORD_API_URL if set) and try again; "
                        "under systemd or --supervise, `baton run` does."], command
