"""`/workflow` as Discord subcommands with typed options and autocomplete, and one free-text form.

Each subcommand only spells the chat command it stands for (`run deploy --force "v2"`), quoted
as the core parses it, and hands the text to the client (`on_workflow`): parsing, usage
errors, authorization and the answer stay the core's, identical on every platform. The
free-text `/workflow do command: …` takes any chat command verbatim. Autocomplete asks the
core: the workflows the user may run, and the runs of this conversation they may see that
the subcommand acts on (`core/commands/suggestions.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

import discord
from discord import app_commands

from adapters.discord.inbound import place_of
from core.commands.model import SCHEDULE_ACTIONS, SPECS
from core.commands.quoting import quote_word, split_words
from core.errors import UsageError

if TYPE_CHECKING:
    from adapters.discord.client import BatonClient

Choice = app_commands.Choice[str]


class Workflows(Protocol):
    async def on_workflow(self, interaction: discord.Interaction, command: str) -> None: ...


def _words(*parts: str | None) -> str:
    return " ".join(p for p in parts if p)


def _q(text: str | None) -> str | None:
    return quote_word(text) if text else None


def _client(interaction: discord.Interaction) -> BatonClient:
    return interaction.client  # type: ignore[return-value]


async def workflow_choices(interaction: discord.Interaction, current: str) -> list[Choice]:
    """Workflow names the user may run."""
    asking = _client(interaction).handler.asking
    found = asking.suggest_workflows("discord", str(interaction.user.id), current)
    return [app_commands.Choice(name=label, value=value) for value, label in found]


async def run_choices(interaction: discord.Interaction, current: str) -> list[Choice]:
    """Runs of this conversation (a thread's: its channel's) the user may see, that the
    subcommand being typed acts on."""
    place = place_of(
        interaction.channel, channel_id=interaction.channel_id or 0, guild_id=interaction.guild_id)
    command = interaction.command.name if interaction.command is not None else ""
    found = _client(interaction).handler.asking.suggest_runs(
        "discord", place.conversation, str(interaction.user.id), current, command)
    return [app_commands.Choice(name=label, value=value) for value, label in found]


RUN = "the run: its id, or a prefix of it"


class WorkflowGroup(app_commands.Group):
    """`/workflow <subcommand> …`: every chat command, with its options typed."""

    def __init__(self, handler: Workflows) -> None:
        super().__init__(name="workflow", description="Start, watch, approve and resume Baton workflows")
        self.handler = handler

    async def _say(self, interaction: discord.Interaction, *parts: str | None) -> None:
        await self.handler.on_workflow(interaction, _words(*parts))

    @app_commands.command(name="do", description="Any chat command as you would type it: run hello hi · help")
    @app_commands.describe(command="e.g. run hello hi · resume <run> · approve <run> lgtm · status · help")
    async def do(self, interaction: discord.Interaction, command: str) -> None:
        await self._say(interaction, command)

    @app_commands.command(name="run", description=SPECS["run"].summary[:100])
    @app_commands.describe(name="the workflow", message="the text its steps get as inputs.message",
                           set="inputs as key=value, several separated by spaces",
                           force="start fresh even when an unfinished run of it is here")
    @app_commands.autocomplete(name=workflow_choices)
    async def run(self, interaction: discord.Interaction, name: str, message: str | None = None,
                  set: str | None = None, force: bool = False) -> None:
        try:
            sets = [f"--set {quote_word(w.text)}" for w in split_words(set or "")]
        except UsageError:  # an unbalanced quote: the core says so, as for typed text
            sets = [f"--set {set}"]
        flag = "--force" if force else None
        await self._say(interaction, "run", quote_word(name), flag, *sets, _q(message))

    @app_commands.command(name="resume", description=SPECS["resume"].summary)
    @app_commands.describe(run=RUN)
    @app_commands.autocomplete(run=run_choices)
    async def resume(self, interaction: discord.Interaction, run: str) -> None:
        await self._say(interaction, "resume", quote_word(run))

    @app_commands.command(name="approve", description=SPECS["approve"].summary)
    @app_commands.describe(run=RUN, comment="said with the approval")
    @app_commands.autocomplete(run=run_choices)
    async def approve(self, interaction: discord.Interaction, run: str, comment: str | None = None) -> None:
        await self._say(interaction, "approve", quote_word(run), _q(comment))

    @app_commands.command(name="reject", description=SPECS["reject"].summary)
    @app_commands.describe(run=RUN, reason="why")
    @app_commands.autocomplete(run=run_choices)
    async def reject(self, interaction: discord.Interaction, run: str, reason: str | None = None) -> None:
        await self._say(interaction, "reject", quote_word(run), _q(reason))

    @app_commands.command(name="abandon", description=SPECS["abandon"].summary)
    @app_commands.describe(run=RUN, reason="why")
    @app_commands.autocomplete(run=run_choices)
    async def abandon(self, interaction: discord.Interaction, run: str, reason: str | None = None) -> None:
        await self._say(interaction, "abandon", quote_word(run), _q(reason))

    @app_commands.command(name="cancel", description=SPECS["cancel"].summary)
    @app_commands.describe(run=RUN)
    @app_commands.autocomplete(run=run_choices)
    async def cancel(self, interaction: discord.Interaction, run: str) -> None:
        await self._say(interaction, "cancel", quote_word(run))

    @app_commands.command(name="status", description=SPECS["status"].summary)
    @app_commands.describe(run="default: the latest run here")
    @app_commands.autocomplete(run=run_choices)
    async def status(self, interaction: discord.Interaction, run: str | None = None) -> None:
        await self._say(interaction, "status", _q(run))

    @app_commands.command(name="plan", description=SPECS["plan"].summary)
    @app_commands.describe(run=RUN)
    @app_commands.autocomplete(run=run_choices)
    async def plan(self, interaction: discord.Interaction, run: str) -> None:
        await self._say(interaction, "plan", quote_word(run))

    @app_commands.command(name="resolve", description=SPECS["resolve"].summary)
    @app_commands.describe(run=RUN, node="the step", action="what became of it", output="its output (done)")
    @app_commands.autocomplete(run=run_choices)
    async def resolve(self, interaction: discord.Interaction, run: str, node: str,
                      action: Literal["done", "retry", "fail"], output: str | None = None) -> None:
        await self._say(interaction, "resolve", quote_word(run), quote_word(node), action,
                        f"--output {quote_word(output)}" if output is not None else None)

    @app_commands.command(name="invalidate", description=SPECS["invalidate"].summary)
    @app_commands.describe(run=RUN, node="the step", downstream="its dependents too")
    @app_commands.autocomplete(run=run_choices)
    async def invalidate(self, interaction: discord.Interaction, run: str, node: str,
                         downstream: bool = False) -> None:
        await self._say(interaction, "invalidate", quote_word(run), quote_word(node),
                        "--downstream" if downstream else None)

    @app_commands.command(name="args", description=SPECS["args"].summary)
    @app_commands.describe(run=RUN)
    @app_commands.autocomplete(run=run_choices)
    async def args(self, interaction: discord.Interaction, run: str) -> None:
        await self._say(interaction, "args", quote_word(run))

    @app_commands.command(name="audit", description=SPECS["audit"].summary)
    @app_commands.describe(run=RUN, since="admins: every run's audit over e.g. 30m, 12h, 7d, as a file",
                           format="the file's format (with since)")
    @app_commands.autocomplete(run=run_choices)
    async def audit(self, interaction: discord.Interaction, run: str | None = None, since: str | None = None,
                    format: Literal["jsonl", "csv"] | None = None) -> None:
        await self._say(interaction, "audit", _q(run),
                        f"--since {quote_word(since)}" if since is not None else None,
                        f"--format {format}" if format is not None else None)

    @app_commands.command(name="open", description=SPECS["open"].summary)
    @app_commands.describe(run="default: the latest run here")
    @app_commands.autocomplete(run=run_choices)
    async def open(self, interaction: discord.Interaction, run: str | None = None) -> None:
        await self._say(interaction, "open", _q(run))

    @app_commands.command(name="runs", description=SPECS["runs"].summary[:100])
    @app_commands.describe(open="your link to their page instead")
    async def runs(self, interaction: discord.Interaction, open: bool = False) -> None:
        await self._say(interaction, "runs", "--open" if open else None)

    @app_commands.command(name="queue", description=SPECS["queue"].summary[:100])
    @app_commands.describe(target="a workflow's name or a concurrency key (default: every key)")
    @app_commands.autocomplete(target=workflow_choices)
    async def queue(self, interaction: discord.Interaction, target: str | None = None) -> None:
        await self._say(interaction, "queue", _q(target))

    @app_commands.command(name="list", description=SPECS["list"].summary)
    async def list_(self, interaction: discord.Interaction) -> None:
        await self._say(interaction, "list")

    @app_commands.command(name="schedule", description=SPECS["schedule"].summary[:100])
    @app_commands.describe(action="add, list, show, pause, resume, run (fire now) or rm",
                           rest='add: <workflow> "<cron>" | every <duration> [--tz Z] [message] …; '
                                "others: the schedule's id [note]")
    @app_commands.choices(action=[app_commands.Choice(name=a, value=a) for a in SCHEDULE_ACTIONS])
    async def schedule(self, interaction: discord.Interaction, action: str, rest: str | None = None) -> None:
        await self._say(interaction, "schedule", action, rest)

    @app_commands.command(name="help", description=SPECS["help"].summary)
    @app_commands.describe(command="one command's usage")
    @app_commands.choices(command=[app_commands.Choice(name=n, value=n) for n in SPECS])
    async def help(self, interaction: discord.Interaction, command: str | None = None) -> None:
        await self._say(interaction, "help", command)
