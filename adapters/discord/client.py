"""The discord.py client: the `/workflow` application commands, button clicks and thread replies.

Each handler answers Discord within its 3 seconds (a deferral, or a form's modal), turns the
event into a `ChatMessage` (`inbound`), hands it to the core `Handler` and posts the replies
(`outbound`). Nothing here decides anything about runs.

- Intents: guilds, guild and direct messages, and message content (replies in run threads):
  nothing Baton does not use.
- The command tree (`commands.WorkflowGroup`) is synced at start only when it changed since the
  last sync of this application and scope (its hash is kept with the core, `remember`), or
  always with `baton discord sync` (`sync="always"`). A server Baton cannot register commands
  in (a wrong `BATON_DISCORD_GUILD_ID`) is a `ConfigurationError`.
- A `run` first checks that Baton can post where it was typed (`preflight.py`, from the
  interaction's app permissions and context): if not, nothing starts and the user alone is told.
- Whatever fails while answering a command is answered to the person (`on_tree_error`): the
  "thinking…" placeholder never stays.
- Every interaction is answered: a button or menu that is not Baton's (or a malformed one),
  and a form that is no longer open, are told so privately (`on_interaction`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from typing import TYPE_CHECKING, Literal

import discord
from discord import app_commands

from adapters.discord import preflight
from adapters.discord.buttons import Clicked, WorkflowButton, WorkflowSelect, build_view, used_view
from adapters.discord.commands import WorkflowGroup
from adapters.discord.formatting import FORMAT, refused
from adapters.discord.forms import FormModal, fits
from adapters.discord.inbound import chat_message, command_message, is_person
from adapters.discord.outbound import NO_MENTIONS, DiscordSender
from core.commands import replies
from core.commands.answering import acknowledged, form_refused, heard
from core.commands.controls import MENU_PATTERN
from core.commands.offers import retires
from core.commands.preflight import starts_run
from core.commands.replies import FORM_ACTION
from core.commands.voting import button_ballot
from core.delivery.button_refs import PATTERN, command_of, parse
from core.render import render

if TYPE_CHECKING:
    from core.commands.handler import Handler
    from core.commands.messages import Form, Reply
    from core.engine.ballots import Ballot

#: Seconds an opened form stays known after its modal's own timeout (a late submission of it
#: is discord.py's to drop, not a closed form to tell about).
FORM_MEMORY = 60.0
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
        self.sync = sync
        self.synced: int | None = None  # commands registered by this start (None: unchanged, skipped)
        self.tree = app_commands.CommandTree(self)
        self.tree.add_command(WorkflowGroup(self), guild=self.guild)
        self.tree.on_error = self.on_tree_error  # type: ignore[method-assign]
        #: custom_ids of the modals this process opened and may still be submitted
        self.open_forms: set[str] = set()

    async def setup_hook(self) -> None:
        self.add_dynamic_items(WorkflowButton, WorkflowSelect)
        self.handler.register_outbox("discord", self.sender.delivery.send, threads=True)
        await self.sync_commands()

    @property
    def _scope(self) -> str:
        return str(self.guild.id) if self.guild else "global"

    def commands_digest(self) -> str:
        """The command tree as Discord gets it, for this application and scope, as a digest."""
        payload = [c.to_dict(self.tree) for c in self.tree.get_commands(guild=self.guild)]
        text = json.dumps([self.application_id, self._scope, payload], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    async def sync_commands(self) -> None:
        """Register the commands when they changed since the last sync (or always, `sync`)."""
        key, digest = f"commands:{self._scope}", self.commands_digest()
        if self.sync == "changed" and self.handler.recall("discord", key) == digest:
            log.info("application commands unchanged; not synced",
                     extra={"action": "commands_unchanged", "scope": self._scope})
            return
        try:
            synced = await self.tree.sync(guild=self.guild)
        except (discord.Forbidden, discord.NotFound) as exc:
            if self.guild is None:
                raise
            raise refused("commands_refused", self.guild.id, exc.text or exc.status) from exc
        self.handler.remember("discord", key, digest)
        self.synced = len(synced)
        log.info("application commands synced",
                 extra={"action": "commands_synced", "scope": self._scope, "count": len(synced)})

    async def close(self) -> None:
        """Send the progress edits still waiting for their turn now (`Handler.wind_down`), then
        take no more background replies and close."""
        await self.handler.wind_down(self.sender.delivery)
        await super().close()

    # -- `/workflow …` -------------------------------------------------------------------------
    async def on_workflow(self, interaction: discord.Interaction, command: str, ballot: Ballot | None = None
                          ) -> None:
        """`command` as the user's, or the `ballot` a gate's form completed (`Handler.decide`:
        never read as a command; `command` is then the form's own, recorded for a late replay)."""
        refusal = preflight.refusal(interaction) if starts_run(command) else None
        if refusal is not None:  # before a run starts here: Baton could not post its story
            log.info("run not started: cannot post in the channel",
                     extra={"action": "preflight_refused", "channel": interaction.channel_id})
            await interaction.response.send_message(refusal, ephemeral=True, allowed_mentions=NO_MENTIONS)
            return
        if ballot is None and await self._open_form(interaction, command):
            return  # its modal is the answer
        answer = await acknowledged(self.handler, command_message(interaction, command),
                                    lambda: _acknowledge(interaction, thinking=True), ballot)
        if answer is not None:
            await self.sender.answer(interaction, answer, open_original=True)

    async def _open_form(self, interaction: discord.Interaction, command: str, ballot: Ballot | None = None
                         ) -> bool:
        """A `run` missing required inputs, or an approval of a gate with a form (`ballot`: a
        gate's button): its form as a modal, the interaction's first answer."""
        form = self.handler.asking.form_for(command_message(interaction, command), ballot)
        if form is None or not fits(form):
            return False  # the core answers (a form that needs more says what to type)
        try:
            modal = FormModal(form, lambda submitted, texts: self.on_form(submitted, form, texts))
            self.open_forms.add(modal.custom_id)
            asyncio.get_running_loop().call_later(
                (modal.timeout or 0) + FORM_MEMORY, self.open_forms.discard, modal.custom_id)
            await interaction.response.send_modal(modal)
        except (discord.HTTPException, discord.InteractionResponded) as exc:
            log.info("form not opened: %s", exc,
                     extra={"action": "form_skipped", "interaction": interaction.id})
            return False
        return True

    async def on_form(self, interaction: discord.Interaction, form: Form, values: dict[str, str]) -> None:
        """A form's modal submitted: the values checked by the core, then the command they
        complete handled as the submitting user's; wrong values are told to them alone."""
        result = self.handler.asking.read_form(command_message(interaction, form.command), values)
        if result.command is None:
            error = form_refused(form, result.errors)
            shown = await self.sender.delivery.compose(error, False)
            await interaction.response.send_message(
                self._text(error), ephemeral=True, allowed_mentions=NO_MENTIONS,
                view=build_view(shown.controls) or discord.ui.View())
            return
        await self.on_workflow(interaction, result.command, result.ballot)

    # -- buttons and menus -----------------------------------------------------------------------
    async def check_click(self, interaction: discord.Interaction, item: Clicked) -> bool:
        """Authorize through the core: the click (or option picked) runs as the clicking user's
        command. A refusal (any error reply) goes to that user alone and leaves the item as it is."""
        item.outcome = await self._click(interaction, item.encoded)
        return item.outcome is not None

    async def run_click(self, interaction: discord.Interaction, item: Clicked) -> None:
        answer, action, command = item.outcome
        # menus only decide gates: the core edits their messages, as every message offering one
        clicked = isinstance(item, WorkflowButton) and interaction.message is not None
        if clicked and interaction.message is not None and retires(action, command, answer):
            chooser = interaction.user.display_name or interaction.user.name
            view = used_view(interaction.message, item.encoded, chooser)
            await interaction.edit_original_response(view=view, allowed_mentions=NO_MENTIONS)
        await self.sender.answer(interaction, answer, open_original=False)

    def _kept(self, digest: str) -> bytes:
        """A long button command from the core's store (KeyError: it kept none under `digest`)."""
        command = self.handler.buttons.command(digest)
        if command is None:
            raise KeyError(digest)
        return command.encode("utf-8")

    async def _click(self, interaction: discord.Interaction, encoded: str
                     ) -> tuple[list[Reply], str, str] | None:
        """Handle the command `encoded` carries as the clicking user's: the answer, the action
        and the command; None when it was refused (told to that user alone), answered with a
        form, or could not be acknowledged."""
        ref = parse(encoded)
        if ref is None:  # `baton:…` but malformed: nothing to run, still answered
            await self._tell_stale(interaction, form=False)
            return None
        try:
            command = command_of(ref, self._kept)
        except KeyError:
            command = f"{ref.action} {ref.digest}"  # the core answers an unknown reference
        ballot = button_ballot(command)
        # "Run…", or Approve on a gate with a form: the form opened; the message keeps its button
        if ref.action in (FORM_ACTION, "approve") and await self._open_form(interaction, command, ballot):
            return None
        answer = await acknowledged(self.handler, command_message(interaction, command),
                                    lambda: _acknowledge(interaction, thinking=False), ballot)
        if answer is None:
            return None
        refusals = [r.sent(ephemeral=True) for r in answer if r.is_error]
        if refusals:
            await self.sender.answer(interaction, refusals, open_original=False)
            return None
        return answer, ref.action, command

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
            await self._tell_stale(interaction, form=False)
        elif interaction.type == discord.InteractionType.modal_submit and custom_id not in self.open_forms:
            await self._tell_stale(interaction, form=True)

    async def _tell_stale(self, interaction: discord.Interaction, *, form: bool) -> None:
        log.info("interaction Baton cannot act on: %s", _custom_id(interaction),
                 extra={"action": "interaction_unknown", "interaction": interaction.id})
        try:
            await interaction.response.send_message(
                self._text(replies.stale_control(form)), ephemeral=True, allowed_mentions=NO_MENTIONS)
        except (discord.HTTPException, discord.InteractionResponded) as exc:
            log.info("interaction not answered: %s", exc,
                     extra={"action": "interaction_skipped", "interaction": interaction.id})

    # -- plain messages (approval replies) ----------------------------------------------------
    async def on_message(self, message: discord.Message) -> None:
        me = self.user.id if self.user is not None else None
        if not is_person(message, me):
            return
        channel: object = message.channel
        if isinstance(channel, discord.PartialMessageable) and channel.guild_id is not None:
            channel = await self.fetch_channel(channel.id)  # an uncached thread: learn its parent
        chat = chat_message(message, channel, me)
        if not heard(chat):
            return  # ordinary channel chatter never reaches the core
        answer = await self.handler.handle(chat)
        for reply in answer:
            await self.sender.send_to(int(reply.to.thread) if reply.to.thread else message.channel.id, reply)

    def _text(self, reply: Reply) -> str:
        return "\n".join(render(reply, FORMAT, self.handler.redactor))

    # -- whatever failed while answering -----------------------------------------------------------
    async def on_tree_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        """A command failed on its way (an answer Discord refused, a bug): log it, and tell the
        person in one line rather than leave "thinking…" behind."""
        log.error("command failed: %s", error, exc_info=error,
                  extra={"action": "command_failed", "interaction": interaction.id})
        text = self._text(replies.unexpected())
        try:
            if not interaction.response.is_done():
                await interaction.response.send_message(
                    text, ephemeral=True, allowed_mentions=NO_MENTIONS)
            else:
                await interaction.edit_original_response(
                    content=text, view=None, allowed_mentions=NO_MENTIONS)
        except discord.HTTPException as exc:
            log.warning("the failure could not be told: %s", exc,
                        extra={"action": "command_failed_untold", "interaction": interaction.id})


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
