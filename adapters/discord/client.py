"""The discord.py client: the `/workflow` application command, button clicks and thread replies.

Each handler answers Discord within its 3 seconds (a deferral), turns the event into a
`ChatMessage` (`inbound`), hands it to the core `Handler` and posts the replies (`outbound`).
Nothing here decides anything about runs.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands

from adapters.discord.buttons import WorkflowButton, WorkflowSelect, used_view
from adapters.discord.custom_ids import command_of, parse
from adapters.discord.inbound import chat_message, command_message, is_person, strip_mentions
from adapters.discord.outbound import NO_MENTIONS, DiscordSender
from core.commands.messages import reusable
from core.commands.offers import DECIDING

if TYPE_CHECKING:
    from core.commands.handler import Handler
    from core.commands.messages import Reply

log = logging.getLogger("baton.discord")


def intents() -> discord.Intents:
    """Guilds and messages, plus the privileged message content intent (thread replies)."""
    wanted = discord.Intents.default()
    wanted.message_content = True
    return wanted


class BatonClient(discord.Client):
    def __init__(
        self,
        *,
        handler: Handler,
        get_blob: Callable[[str], bytes],
        put_blob: Callable[[bytes], str],
        guild_id: int | None,
        edit_interval: float = 1.0,
        **options: object,
    ) -> None:
        super().__init__(intents=intents(), allowed_mentions=NO_MENTIONS, **options)  # type: ignore[arg-type]
        self.handler = handler
        self.get_blob = get_blob
        self.guild = discord.Object(guild_id) if guild_id else None
        self.sender = DiscordSender(
            self, put_blob, handler.attach_thread, redactor=handler.redactor, edit_interval=edit_interval,
            remember=lambda key, value: handler.remember("discord", key, value),
            recall=lambda key: handler.recall("discord", key),
        )
        self.tree = app_commands.CommandTree(self)
        self.tree.add_command(self._workflow_command(), guild=self.guild)

    def _workflow_command(self) -> app_commands.Command[Any, ..., None]:
        @app_commands.command(name="workflow", description="Start, watch, approve and resume Baton workflows")
        @app_commands.describe(command="e.g. run hello hi · resume <run> · approve <run> · help")
        async def workflow(interaction: discord.Interaction, command: str) -> None:
            await self.on_workflow(interaction, command)

        return workflow

    async def setup_hook(self) -> None:
        self.add_dynamic_items(WorkflowButton, WorkflowSelect)
        self.handler.register_outbox("discord", self.sender.outbox, threads=True)
        synced = await self.tree.sync(guild=self.guild)
        log.info("application commands synced", extra={
            "action": "commands_synced", "scope": str(self.guild.id) if self.guild else "global",
            "count": len(synced)})

    async def close(self) -> None:
        await self.sender.aclose()
        await super().close()

    # -- `/workflow command: …` ---------------------------------------------------------------
    async def on_workflow(self, interaction: discord.Interaction, command: str) -> None:
        if not await _acknowledge(interaction, thinking=True):
            return
        replies = await self.handler.handle(command_message(interaction, command))
        await self.sender.answer(interaction, replies, open_original=True)

    # -- buttons ------------------------------------------------------------------------------
    async def check_click(self, interaction: discord.Interaction, button: WorkflowButton) -> bool:
        """Authorize through the core: the click runs as the clicking user's command. A
        refusal (any error reply) goes to that user alone and leaves the buttons as they are."""
        outcome = await self._click(interaction, button.custom_id_value)
        button.outcome = outcome
        return outcome is not None

    async def run_click(self, interaction: discord.Interaction, button: WorkflowButton) -> None:
        replies, command = button.outcome
        ref = parse(button.custom_id_value)
        keep = ref is not None and reusable(ref.action)
        # a gate decided: the core edits every message that offered it (offers.py), this one too
        decided = command.split(" ", 1)[0] in DECIDING
        if interaction.message is not None and not keep and not decided:
            chooser = interaction.user.display_name or interaction.user.name
            view = used_view(interaction.message, button.custom_id_value, chooser)
            await interaction.edit_original_response(view=view, allowed_mentions=NO_MENTIONS)
        await self.sender.answer(interaction, replies, open_original=False)

    async def check_choice(self, interaction: discord.Interaction, menu: WorkflowSelect) -> bool:
        """An option picked in a select menu: its command, as a click on a button would."""
        outcome = await self._click(interaction, menu.chosen)
        menu.outcome = outcome
        return outcome is not None

    async def run_choice(self, interaction: discord.Interaction, menu: WorkflowSelect) -> None:
        replies, _ = menu.outcome  # menus only decide gates: the core edits their messages
        await self.sender.answer(interaction, replies, open_original=False)

    async def _click(self, interaction: discord.Interaction, encoded: str) -> tuple[list[Reply], str] | None:
        """Handle the command `encoded` carries as the clicking user's; None when it was refused
        (told to that user alone) or the interaction could not be acknowledged."""
        ref = parse(encoded)
        if ref is None or not await _acknowledge(interaction, thinking=False):
            return None
        try:
            command = command_of(ref, self.get_blob)
        except KeyError:
            command = f"{ref.action} {ref.digest}"  # the core answers an unknown reference
        replies = await self.handler.handle(command_message(interaction, command))
        refusals = [dataclasses.replace(r, ephemeral=True) for r in replies if r.is_error]
        if refusals:
            await self.sender.answer(interaction, refusals, open_original=False)
            return None
        return replies, command

    # -- plain messages (approval replies) ----------------------------------------------------
    async def on_message(self, message: discord.Message) -> None:
        me = self.user.id if self.user is not None else None
        if not is_person(message, me):
            return
        channel: object = message.channel
        if isinstance(channel, discord.PartialMessageable) and channel.guild_id is not None:
            channel = await self.fetch_channel(channel.id)  # an uncached thread: learn its parent
        in_thread = isinstance(channel, discord.Thread)
        direct = message.guild is None and not in_thread
        if not (in_thread or direct or strip_mentions(message.content, me)[1]):
            return  # ordinary channel chatter never reaches the core
        replies = await self.handler.handle(chat_message(message, channel, me))
        for reply in replies:
            await self.sender.post(int(reply.thread) if reply.thread else message.channel.id, reply)


async def _acknowledge(interaction: discord.Interaction, *, thinking: bool) -> bool:
    """Defer within Discord's 3 s. False when Discord refuses: a redelivered interaction that
    was answered already (or one that expired), whose work must not be done twice."""
    try:
        await interaction.response.defer(thinking=thinking)
    except (discord.HTTPException, discord.InteractionResponded) as exc:
        log.info("interaction not acknowledged: %s", exc,
                 extra={"action": "interaction_skipped", "interaction": interaction.id})
        return False
    return True
