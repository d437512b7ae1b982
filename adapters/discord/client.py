"""The discord.py client: the `/workflow` application commands, button clicks and thread replies.

Each interaction is handed to the core (`core.commands.interactions`) as an `Asked`: what
Discord does for it (a deferral within its 3 seconds, a form's modal, a private answer, the
clicked buttons disabled, its responses as places the delivery service posts at). The core
decides the rest (a `run` that cannot post where it was typed, forms, clicks, the answer); a
thread reply becomes a `ChatMessage` (`inbound`) handed to the core `Handler`.

- Intents: guilds, guild and direct messages, and message content (replies in run threads):
  nothing Baton does not use.
- The command tree (`commands.WorkflowGroup`) is synced at start only when it changed since the
  last sync of this application and scope (its hash is kept with the core, `remember`), or
  always with `baton discord sync` (`sync="always"`). A server Baton cannot register commands
  in (a wrong `BATON_DISCORD_GUILD_ID`) is a `ConfigurationError`.
- Whether Baton can post where a `run` was typed comes from the interaction's app permissions
  and context (`preflight.py`).
- Whatever fails while answering a command is handed to the core (`on_tree_error`).
- Every interaction is answered: a button or menu that is not Baton's (or a malformed one),
  and a form that is no longer open, are told so privately (`on_interaction`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

import discord
from discord import app_commands

from adapters.discord import preflight
from adapters.discord.buttons import Clicked, WorkflowButton, WorkflowSelect, build_view, used_view
from adapters.discord.commands import WorkflowGroup
from adapters.discord.formatting import FORMAT
from adapters.discord.forms import FIELDS, FormModal
from adapters.discord.inbound import chat_message, command_message, is_person
from adapters.discord.outbound import (
    FOLLOW_UP_TTL,
    NO_MENTIONS,
    TRANSIENT,
    DiscordSender,
    Sends,
    followup_send,
    original_edit,
)
from core.commands.controls import MENU_PATTERN, Control
from core.commands.interactions import Interactions
from core.commands.lifecycle import registered, stopped
from core.delivery.button_refs import PATTERN

if TYPE_CHECKING:
    from core.commands.handler import Handler
    from core.commands.messages import ChatMessage, Form

log = logging.getLogger("baton.discord")

Sync = Literal["changed", "always"]


def intents() -> discord.Intents:
    """What Baton uses and no more: guilds (channels, threads), messages in guilds and in direct
    messages, and the privileged message content (the words of a reply in a run's thread)."""
    return discord.Intents(guilds=True, guild_messages=True, dm_messages=True, message_content=True)


class BatonClient(discord.Client):
    def __init__(
        self,
        *,
        handler: Handler,
        guild_id: int | None,
        sync: Sync = "changed",
        **options: object,
    ) -> None:
        super().__init__(intents=intents(), allowed_mentions=NO_MENTIONS, **options)  # type: ignore[arg-type]
        self.handler = handler
        self.guild = discord.Object(guild_id) if guild_id else None
        self.sender = DiscordSender(self, handler)
        self.interactions = Interactions(handler, self.sender.delivery, FORMAT)
        self.sync = sync
        self.synced: int | None = None  # commands registered by this start (None: unchanged, skipped)
        self.tree = app_commands.CommandTree(self)
        self.tree.add_command(WorkflowGroup(self), guild=self.guild)
        self.tree.on_error = self.on_tree_error  # type: ignore[method-assign]

    async def setup_hook(self) -> None:
        self.add_dynamic_items(WorkflowButton, WorkflowSelect)
        self.handler.register_outbox("discord", self.sender.delivery.send, threads=True)
        await self.sync_commands()

    @property
    def _scope(self) -> str:
        return str(self.guild.id) if self.guild else "global"

    async def sync_commands(self) -> None:
        """Register the commands when the tree, as Discord gets it for this application and scope,
        changed since the last sync (or always, `sync`): `core.commands.lifecycle.registered`."""
        tree = [c.to_dict(self.tree) for c in self.tree.get_commands(guild=self.guild)]
        payload = [self.application_id, self._scope, tree]
        self.synced = await registered(self.handler, "discord", self._scope, payload, self._register,
                                       always=self.sync == "always")

    async def _register(self) -> int:
        try:
            return len(await self.tree.sync(guild=self.guild))
        except (discord.Forbidden, discord.NotFound) as exc:
            if self.guild is None:
                raise
            raise stopped(FORMAT, "commands_refused", self.guild.id, exc.text or exc.status) from exc

    async def close(self) -> None:
        """Send the progress edits still waiting for their turn now (`Handler.wind_down`), then
        take no more background replies and close."""
        await self.handler.wind_down(self.sender.delivery)
        await super().close()

    # -- `/workflow …`, buttons and menus, forms: the core's `Interactions` ---------------------
    async def on_workflow(self, interaction: discord.Interaction, command: str) -> None:
        await self.interactions.command(Asked(self, interaction), command)

    async def check_click(self, interaction: discord.Interaction, item: Clicked) -> bool:
        """Authorize through the core (`Interactions.click`): False leaves the item as it is."""
        item.outcome = await self.interactions.click(Asked(self, interaction), item.encoded)
        return item.outcome is not None

    async def run_click(self, interaction: discord.Interaction, item: Clicked) -> None:
        # menus only decide gates: the core edits their messages, as every message offering one
        clicked = isinstance(item, WorkflowButton) and interaction.message is not None
        asked = Asked(self, interaction)
        await self.interactions.clicked(asked, item.outcome, item.encoded, withdraw=clicked)

    # -- interactions nothing else answers ------------------------------------------------------
    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """Every interaction gets an answer: a component whose custom_id is none of Baton's
        buttons or menus, or a submission of a form this process has not open (timed out, or
        opened before a restart), is told so privately. discord.py drops both silently, and
        Discord then shows "This interaction failed"."""
        custom_id = _custom_id(interaction)
        if interaction.type == discord.InteractionType.component:
            if (PATTERN.fullmatch(custom_id) or MENU_PATTERN.fullmatch(custom_id)) and _shown(
                    interaction.message, custom_id):
                return  # a WorkflowButton / WorkflowSelect answers it
            await self.interactions.stale(Asked(self, interaction), form=False)
        elif (interaction.type == discord.InteractionType.modal_submit
              and not self.interactions.is_open(custom_id)):
            await self.interactions.stale(Asked(self, interaction), form=True)

    # -- plain messages (approval replies) ----------------------------------------------------
    async def on_message(self, message: discord.Message) -> None:
        me = self.user.id if self.user is not None else None
        if not is_person(message, me):
            return
        channel: object = message.channel
        if isinstance(channel, discord.PartialMessageable) and channel.guild_id is not None:
            channel = await self.fetch_channel(channel.id)  # an uncached thread: learn its parent
        await self.interactions.said(chat_message(message, channel, me), str(message.channel.id))

    # -- whatever failed while answering -----------------------------------------------------------
    async def on_tree_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        """A command failed on its way (an answer Discord refused, a bug): told in one line."""
        await self.interactions.failed(Asked(self, interaction), error)


def _custom_id(interaction: discord.Interaction) -> str:
    data: dict[str, object] = dict(interaction.data or {})
    return str(data.get("custom_id", ""))


def _shown(message: discord.Message | None, custom_id: str) -> bool:
    """Whether the clicked message shows the item (discord.py rebuilds a dynamic item from it,
    and drops the click unanswered when it cannot)."""
    if message is None:
        return False
    view = discord.ui.View.from_message(message, timeout=None)
    return any(getattr(item, "custom_id", None) == custom_id for item in view.walk_children())


class Asked:
    """One interaction, as the core's `Interactions` asks it (`core.commands.interactions.Asked`)."""

    follow_up_ttl = FOLLOW_UP_TTL
    form_fields = FIELDS
    refused: tuple[type[BaseException], ...] = (discord.HTTPException, discord.InteractionResponded)
    errors: tuple[type[BaseException], ...] = (discord.HTTPException, *TRANSIENT)

    def __init__(self, client: BatonClient, interaction: discord.Interaction) -> None:
        self.client, self.interaction = client, interaction
        public = followup_send(interaction, ephemeral=False)
        self.public = self.follow_up = Sends(public, public)
        self.original = Sends(original_edit(interaction), public)
        private = followup_send(interaction, ephemeral=True)
        self.private = Sends(private, private)
        self.channel = str(interaction.channel_id) if interaction.channel_id else None

    def message(self, text: str) -> ChatMessage:
        return command_message(self.interaction, text)

    async def refusal(self) -> str | None:
        return preflight.refusal(self.interaction)

    async def open_form(self, form: Form, form_id: str, submit: Any) -> None:
        """Its modal, the interaction's first answer."""
        modal = FormModal(form, form_id, lambda done, texts: submit(Asked(self.client, done), texts))
        await self.interaction.response.send_modal(modal)

    async def acknowledge(self, *, thinking: bool) -> None:
        """A deferral, within Discord's 3 s."""
        await self.interaction.response.defer(thinking=thinking)

    async def tell(self, text: str, controls: tuple[Control, ...] | None = None) -> None:
        view = discord.utils.MISSING if controls is None else build_view(controls) or discord.ui.View()
        await self.interaction.response.send_message(text, ephemeral=True, allowed_mentions=NO_MENTIONS,
                                                     view=view)

    async def replace(self, text: str) -> None:
        """Told anyway: the deferred response (or, where there is none yet, the first) says `text`."""
        if not self.interaction.response.is_done():
            await self.tell(text)
        else:
            await self.interaction.edit_original_response(content=text, view=None,
                                                          allowed_mentions=NO_MENTIONS)

    async def delete_original(self) -> None:
        await self.interaction.delete_original_response()

    async def withdraw(self, custom_id: str) -> None:
        if self.interaction.message is not None:
            user = self.interaction.user
            view = used_view(self.interaction.message, custom_id, user.display_name or user.name)
            await self.interaction.edit_original_response(view=view, allowed_mentions=NO_MENTIONS)
