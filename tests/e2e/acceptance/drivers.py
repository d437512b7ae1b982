"""One way to drive Baton per platform, for the acceptance suite: what a person does (type a
command, reply in a run's thread) and what they see (a prompt's choices, messages about a run),
each through the platform's existing real harness.

    console  `baton say --json --wait` as a subprocess (tests/e2e/console/cli.py)
    slack    the real Bolt app over signed HTTP, the mock Web API (tests/e2e/slack/)
    discord  the real discord.py client fed gateway payloads, the fake Discord (tests/e2e/discord/)
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

from core.config import Access, Settings
from core.delivery.button_refs import command_of, parse
from core.store.records import JournalEntry, Run
from core.store.repository import SqlStore
from tests.e2e.console.cli import BatonCli, prompts
from tests.e2e.discord.fake_discord import FakeDiscord
from tests.e2e.discord.harness import DiscordBot, custom_ids, discord_bot, settings_for
from tests.e2e.slack.conftest import BOT_TOKEN, SIGNING_SECRET, SlackE2E, slack_baton
from tests.e2e.slack.harness import CHANNEL
from tests.e2e.slack.mock_slack import MockSlack
from tests.e2e.slack.steps import COMPLETED, PROMPT, STARTED, command, posts, run_id_of

WORKFLOWS = Path(__file__).parent / "workflows"
DEADLINE = 30.0


@dataclass(frozen=True)
class Prompt:
    """A fresh-run prompt: the commands its choices run (as the platform decodes them) and its text."""

    commands: list[str]
    text: str


class Chat(Protocol):
    workflows: Path

    async def start(self, text: str) -> Run:
        """Type a `run …` that starts a run (no prompt); the run once it rests."""

    async def prompted(self, text: str) -> Prompt:
        """Type a `run …` that must prompt instead of starting anything."""

    async def command(self, text: str) -> str:
        """Type any other command; the text of Baton's answer."""

    async def submit(self, text: str) -> str:
        """Type a command and wait for nothing it starts (a run it queues, say); the answer."""

    def windows(self, run_id: str) -> tuple[float, float]:
        """When the run's steps ran: the first start and the last finish (its journal)."""

    async def reply(self, run_id: str, text: str) -> None:
        """Write `text` as a plain message in the run's thread (or conversation)."""

    async def status(self, run_id: str, status: str) -> Run:
        """The run, once its status is `status` (waiting for it)."""

    async def shown(self, run_id: str, text: str) -> None:
        """A message about the run showing `text` was posted (waiting for it)."""

    def prompts_shown(self) -> int:
        """How many fresh-run prompts Baton has shown so far."""

    def runs(self) -> list[Run]: ...

    def args_of(self, run: Run) -> dict[str, Any]: ...


def _windows(entries: list[JournalEntry]) -> tuple[float, float]:
    return min(e.started_at for e in entries), max(e.finished_at or 0.0 for e in entries)


def _copy_workflows(home: Path) -> Path:
    target = home / "workflows"
    shutil.copytree(WORKFLOWS, target)
    return target


# -- console ---------------------------------------------------------------------------------
@dataclass
class ConsoleChat:
    cli: BatonCli
    said: list[dict[str, Any]] = field(default_factory=list)  # every reply so far

    @property
    def workflows(self) -> Path:
        return self.cli.workflows

    async def _say(self, text: str, thread: str | None = None) -> list[dict[str, Any]]:
        replies = await asyncio.to_thread(self.cli.say, text, thread=thread)
        self.said += replies
        return replies

    async def start(self, text: str) -> Run:
        replies = await self._say(text)
        assert prompts(replies) == [], replies
        (run_id,) = {r["run_id"] for r in replies if r["run_id"]}
        return self.cli.run_record(run_id)  # `--wait`: at rest already

    async def prompted(self, text: str) -> Prompt:
        (prompt,) = prompts(await self._say(text))
        return Prompt([b["command"] for b in prompt["buttons"]], prompt["text"])

    async def command(self, text: str) -> str:
        return "\n".join(r["text"] for r in await self._say(text))

    async def submit(self, text: str) -> str:
        replies = await asyncio.to_thread(self.cli.say, text, wait=False)
        self.said += replies
        return "\n".join(r["text"] for r in replies)

    def windows(self, run_id: str) -> tuple[float, float]:
        store = SqlStore(self.cli.database_url)
        try:
            return _windows(store.steps.journal([run_id]))
        finally:
            store.close()

    async def reply(self, run_id: str, text: str) -> None:
        await self._say(text, thread=self.cli.run_record(run_id).thread)

    async def status(self, run_id: str, status: str) -> Run:
        run = self.cli.run_record(run_id)  # each `baton say --wait` drives its runs to rest
        assert run.status == status, run
        return run

    async def shown(self, run_id: str, text: str) -> None:
        assert [r for r in self.said if r["run_id"] == run_id and text in r["text"]], self.said

    def prompts_shown(self) -> int:
        return len(prompts(self.said))

    def runs(self) -> list[Run]:
        return self.cli.runs()

    def args_of(self, run: Run) -> dict[str, Any]:
        return self.cli.args_of(run)


@asynccontextmanager
async def console_chat(tmp_path: Path, database_url: str) -> AsyncIterator[ConsoleChat]:
    _copy_workflows(tmp_path)
    yield ConsoleChat(BatonCli(home=tmp_path, database_url=database_url))


# -- Slack -----------------------------------------------------------------------------------
@dataclass
class SlackChat:
    e2e: SlackE2E
    workflows: Path

    @property
    def _store(self) -> Any:
        return self.e2e.baton.store

    async def start(self, text: str) -> Run:
        mark = await command(self.e2e, text)  # acknowledged within Slack's 3 s
        first = await self.e2e.mock.wait_call("chat.postMessage", STARTED, after=mark)
        assert "thread_ts" not in first.body, "a run's first message opens its thread in the channel"
        run = await self.e2e.baton.engine.wait(run_id_of(first), timeout=DEADLINE)
        assert self._store.runs.get_run(run.id).thread == first.ts
        return run

    async def prompted(self, text: str) -> Prompt:
        mark = await command(self.e2e, text)
        prompt = await self.e2e.mock.wait_call("chat.postMessage", PROMPT, after=mark)
        assert prompt.body["channel"] == CHANNEL
        commands = [b["value"] for b in prompt.buttons]
        for force in [c for c in commands if "--force" in c]:
            assert f"/workflow {force}" in prompt.text  # copyable as typed in Slack
        return Prompt(commands, prompt.text)

    async def command(self, text: str) -> str:
        await self.e2e.settle()  # what earlier runs still had to post is out: the next post answers
        mark = await command(self.e2e, text)
        answer = await self.e2e.mock.wait_for(lambda calls: next(
            (c for c in calls[mark:] if c.method == "chat.postMessage"), None))
        return str(answer.text)

    async def submit(self, text: str) -> str:
        return await self.command(text)

    def windows(self, run_id: str) -> tuple[float, float]:
        return _windows(self._store.steps.journal([run_id]))

    async def reply(self, run_id: str, text: str) -> None:
        thread = self._store.runs.get_run(run_id).thread
        answer = await self.e2e.slack.event(self.e2e.slack.message_event(text, thread_ts=thread))
        assert answer.status == 200

    async def status(self, run_id: str, status: str) -> Run:
        def reached(_calls: object) -> Run | None:
            run = self._store.runs.get_run(run_id)
            return run if run.status == status else None

        run: Run = await self.e2e.mock.wait_for(reached, DEADLINE)
        await self.e2e.settle()
        if status == "completed":  # said once in the run's thread: no loop, no repeat
            done = [c for c in posts(self.e2e, COMPLETED, thread=run.thread) if run.id in c.text]
            assert len(done) == 1, done
        return run

    async def shown(self, run_id: str, text: str) -> None:
        thread = self._store.runs.get_run(run_id).thread
        await self.e2e.mock.wait_for(lambda calls: [
            c for c in calls if c.method in ("chat.postMessage", "chat.update")
            and (c.body.get("thread_ts") == thread or c.body.get("ts") == thread) and text in c.text])

    def prompts_shown(self) -> int:
        return len([c for c in self.e2e.mock.of("chat.postMessage") if PROMPT in c.text])

    def runs(self) -> list[Run]:
        return list(self._store.runs.recent_runs(limit=1000))

    def args_of(self, run: Run) -> dict[str, Any]:
        return dict(self.e2e.baton.engine.args_of(run))


@asynccontextmanager
async def slack_chat(tmp_path: Path, database_url: str) -> AsyncIterator[SlackChat]:
    workflows = _copy_workflows(tmp_path)
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=database_url, workflow_dirs=[workflows], data_dir=tmp_path / "data", tool_modules=[],
        access=Access.everyone(), slack_bot_token=BOT_TOKEN,  # type: ignore[arg-type]
        slack_signing_secret=SIGNING_SECRET,  # type: ignore[arg-type]
    )
    mock = MockSlack()
    await mock.start()
    try:
        async with slack_baton(settings, mock, tmp_path) as e2e:
            yield SlackChat(e2e, workflows)
    finally:
        await mock.stop()


# -- Discord ---------------------------------------------------------------------------------
@dataclass
class DiscordChat:
    bot: DiscordBot
    workflows: Path

    async def start(self, text: str) -> Run:
        _, _, run = await self.bot.start(text)
        return run

    async def prompted(self, text: str) -> Prompt:
        mark = len(self.bot.fake.calls)
        (answer,) = await self.bot.answers(self.bot.command(text))
        assert not [c for c in self.bot.fake.calls[mark:] if c.path.endswith("/threads")]  # no run began
        ids = custom_ids(answer.json["components"])
        decoded = [parse(cid) for cid in ids]  # as any Baton process rebuilds a button's command
        assert None not in decoded, ids
        commands = [command_of(ref, self.bot.baton.store.blobs.get_blob) for ref in decoded if ref]
        return Prompt(commands, answer.content)

    async def command(self, text: str) -> str:
        (answer,) = await self.bot.answers(self.bot.command(text))
        return answer.content

    async def submit(self, text: str) -> str:
        return await self.command(text)

    def windows(self, run_id: str) -> tuple[float, float]:
        return _windows(self.bot.baton.store.steps.journal([run_id]))

    async def reply(self, run_id: str, text: str) -> None:
        thread = self.bot.baton.store.runs.get_run(run_id).thread
        assert thread is not None
        self.bot.say(thread, text)

    async def status(self, run_id: str, status: str) -> Run:
        def reached(_calls: object) -> Run | None:
            run = self.bot.baton.store.runs.get_run(run_id)
            return run if run.status == status else None

        run: Run = await self.bot.fake.wait_for(reached, DEADLINE)
        return run

    async def shown(self, run_id: str, text: str) -> None:
        await self.bot.posted_in(self.bot.baton.store.runs.get_run(run_id).thread or "", text)

    def prompts_shown(self) -> int:
        # an interaction's answer is sent, then edited, at one webhook path: one message per path
        sent = [c for c in self.bot.fake.calls if c.method in ("POST", "PATCH")]
        return len({c.path for c in sent if PROMPT in c.content})

    def runs(self) -> list[Run]:
        return list(self.bot.baton.store.runs.recent_runs(limit=1000))

    def args_of(self, run: Run) -> dict[str, Any]:
        return dict(self.bot.baton.engine.args_of(run))


@asynccontextmanager
async def discord_chat(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[DiscordChat]:
    from adapters.discord import discord

    workflows = _copy_workflows(tmp_path)
    fake = FakeDiscord()
    monkeypatch.setattr(discord.http.Route, "BASE", await fake.start())
    try:
        async with discord_bot(fake, settings_for(tmp_path, database_url)) as bot:
            yield DiscordChat(bot, workflows)
    finally:
        await fake.stop()
