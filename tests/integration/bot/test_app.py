"""Wiring (`bot/app.py`) with the real store, catalog and engine on a temporary SQLite file."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.app import build_baton, ensure_sqlite_dir, load_tools
from bot.serve import configured_adapters
from core.config import Settings
from core.errors import ConfigurationError

TOOLS = """\
from core.engine.tools import tool

@tool(replay="pure", inline=True)
def ping() -> str:
    return "pong"
"""


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "one.yaml").write_text("name: one\nnodes:\n  - id: a\n    bash: echo a\n    replay: pure\n")
    return Settings(
        database_url=f"sqlite:///{tmp_path / 'nested' / 'baton.db'}",
        workflow_dirs=[workflows],
        data_dir=tmp_path / "data",
        tool_modules=[],
    )


async def test_build_baton_migrates_and_running_starts_and_stops_the_engine(settings: Settings) -> None:
    baton = build_baton(settings)
    try:
        assert baton.store.runs.recent_runs() == []  # migrated: the tables exist
        assert [e.name for e in baton.catalog.entries()] == ["one"]
        async with baton.running(grace=1.0):
            run = await baton.engine.start_run(
                workflow="one",
                args={},
                platform="console",
                conversation="c",
                thread=None,
                requester="console:t",
            )
            assert (await baton.engine.wait(run.id, timeout=30)).status == "completed"
    finally:
        baton.close()


async def test_sigterm_asks_the_process_to_stop(settings: Settings) -> None:
    baton = build_baton(settings)
    try:
        async with baton.running(grace=1.0):
            assert not baton.stopping.is_set()
            os.kill(os.getpid(), signal.SIGTERM)  # handled by the loop: no default action
            await baton.stopping.wait()
        assert baton.stopping.is_set()
    finally:
        baton.close()


def test_ensure_sqlite_dir_creates_the_parent_directory(tmp_path: Path) -> None:
    ensure_sqlite_dir(f"sqlite:///{tmp_path / 'a' / 'b' / 'baton.db'}")
    assert (tmp_path / "a" / "b").is_dir()
    ensure_sqlite_dir("postgresql+psycopg://postgres@127.0.0.1:5432/test")  # nothing to create


def test_the_default_tool_module_may_be_absent(tmp_path: Path) -> None:
    assert load_tools(["tools.py"], [tmp_path / "workflows"]).names() == []


def test_a_named_tool_module_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"tool module ops/tools.py was not found \(looked in "):
        load_tools(["ops/tools.py"], [tmp_path / "workflows"])


def test_tools_are_found_next_to_the_workflows_wherever_baton_is_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "project" / "workflows").mkdir(parents=True)
    (tmp_path / "project" / "workflows" / "tools.py").write_text(TOOLS)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    dirs = [tmp_path / "project" / "workflows"]

    assert load_tools(["tools.py"], dirs).names() == ["ping"]  # the default: the directory's own
    assert load_tools(["workflows/tools.py"], dirs).names() == ["ping"]  # relative to the project


def test_adapters_start_only_when_their_tokens_are_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("BATON_")]:
        monkeypatch.delenv(name)
    assert configured_adapters(Settings()) == []
    slack = Settings(slack_bot_token=SecretStr("xoxb-1"), slack_app_token=SecretStr("xapp-1"))
    assert configured_adapters(slack) == ["slack"]
    both = slack.model_copy(update={"discord_token": SecretStr("d-token")})
    assert configured_adapters(both) == ["slack", "discord"]
    assert configured_adapters(Settings(slack_bot_token=SecretStr("xoxb-1"))) == []  # no app token/secret
