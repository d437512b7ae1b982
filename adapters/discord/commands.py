"""`/workflow` as Discord subcommands with typed options and autocomplete, one per command of
`core.commands.options.TYPED` (the free-text `/workflow do command: …` takes any chat command
verbatim). Each subcommand hands the chat command its values spell (`options.spell`) to the
client (`on_workflow`): parsing, usage errors, authorization and the answer stay the core's.
Autocomplete asks the core: the workflows the user may run, and the runs of this conversation
they may see that the subcommand acts on (`core/commands/suggestions.py`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Literal, Protocol

import discord
from discord import app_commands

from adapters.discord.formatting import FORMAT
from adapters.discord.inbound import place_of
from core.commands.options import TYPED, Option, Typed, spell

if TYPE_CHECKING:
    from adapters.discord.client import BatonClient

Choice = app_commands.Choice[str]


class Workflows(Protocol):
    async def on_workflow(self, interaction: discord.Interaction, command: str) -> None: ...


def _suggests(what: str) -> Callable[[discord.Interaction, str], Coroutine[Any, Any, list[Choice]]]:
    """Autocomplete of an option, asking the core what it suggests (`Asking.suggest`)."""

    async def choices(interaction: discord.Interaction, current: str) -> list[Choice]:
        place = place_of(  # a thread's conversation is its channel's
            interaction.channel, channel_id=interaction.channel_id or 0, guild_id=interaction.guild_id)
        command = interaction.command.name if interaction.command is not None else ""
        client: BatonClient = interaction.client  # type: ignore[assignment]
        found = client.handler.asking.suggest(what, "discord", place.conversation, str(interaction.user.id),
                                              current, command)
        return [app_commands.Choice(name=label, value=value) for value, label in found]

    return choices


def _parameter(option: Option) -> inspect.Parameter:
    kind: Any = bool if option.spelling == "switch" else str
    if option.choices:
        kind = Literal[option.choices]
    if option.required:
        return inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY, annotation=kind)
    default = False if option.spelling == "switch" else None
    return inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY,
                             annotation=kind if default is False else kind | None, default=default)


def subcommand(typed: Typed, workflows: Workflows) -> app_commands.Command[Any, ..., None]:
    """`/workflow <typed.name>`: its options as Discord's, its values spelled as a chat command."""

    async def callback(interaction: discord.Interaction, **values: Any) -> None:
        await workflows.on_workflow(interaction, spell(typed, values))

    first = inspect.Parameter("interaction", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              annotation=discord.Interaction)
    callback.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [first, *(_parameter(o) for o in typed.options)])
    app_commands.describe(**{o.name: o.describe for o in typed.options})(callback)
    app_commands.autocomplete(**{o.name: _suggests(o.suggest) for o in typed.options if o.suggest})(callback)
    return app_commands.Command(name=typed.name, description=typed.describe, callback=callback)


class WorkflowGroup(app_commands.Group):
    """`/workflow <subcommand> …`: every chat command, with its options typed."""

    def __init__(self, workflows: Workflows) -> None:
        super().__init__(name="workflow", description=FORMAT.said("commands_described"))
        for typed in TYPED.values():
            self.add_command(subcommand(typed, workflows))
