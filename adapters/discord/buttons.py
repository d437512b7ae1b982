"""Persistent buttons and select menus: one `DynamicItem` class matches every `baton:…`
button custom_id, another every `baton-menu:…` select menu.

Registered once at startup (`client.add_dynamic_items(WorkflowButton, WorkflowSelect)`), they
rebuild the clicked item from the message alone, so what was posted before a restart keeps
working. A button's custom_id, and each option's value of a select menu, carry their command
(`core.delivery.button_refs`, in at most `MAX_CUSTOM_ID` characters), laid out by the core
under Discord's limits (`RULES`: `core.commands.controls`). The click itself is
handled by the client (`Clicks`): `interaction_check` asks the core (the click is handled as
the clicking user's command; a refusal is answered ephemerally and nothing happens),
`callback` disables the used buttons and posts the core's replies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import discord

from adapters.discord.formatting import FORMAT
from core.commands.controls import MENU_PATTERN, Control, Rules
from core.delivery.button_refs import PATTERN

#: Discord's limits: 100 characters a custom_id; 5 buttons a row, 5 rows, 80 characters a
#: label; a select menu fills a row and holds 25 options of at most 100 characters (label and
#: value), placeholder 150.
MAX_CUSTOM_ID = 100
RULES = Rules(reference=MAX_CUSTOM_ID, per_row=5, rows=5, label=80, options=25, option=100, placeholder=150)

_STYLES = {"primary": discord.ButtonStyle.primary, "danger": discord.ButtonStyle.danger}


class Clicks(Protocol):
    async def check_click(self, interaction: discord.Interaction, item: Clicked) -> bool: ...

    async def run_click(self, interaction: discord.Interaction, item: Clicked) -> None: ...


class Clicked:
    """A button or a menu: its `encoded` command, handed to the client (`Clicks`); `outcome`
    is what the core answered in `interaction_check`, posted by `callback`."""

    outcome: Any = None

    @property
    def encoded(self) -> str:
        raise NotImplementedError

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        clicks: Clicks = interaction.client  # type: ignore[assignment]
        return await clicks.check_click(interaction, self)

    async def callback(self, interaction: discord.Interaction) -> None:
        clicks: Clicks = interaction.client  # type: ignore[assignment]
        await clicks.run_click(interaction, self)


class WorkflowButton(Clicked, discord.ui.DynamicItem[discord.ui.Button[Any]], template=PATTERN):
    """A button whose custom_id carries its command."""

    def __init__(self, custom_id: str, *, label: str, style: discord.ButtonStyle, row: int | None = None):
        super().__init__(discord.ui.Button(custom_id=custom_id, label=label, style=style, row=row))

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: Any, /
    ) -> WorkflowButton:
        button = item if isinstance(item, discord.ui.Button) else None
        return cls(
            match.string,
            label=(button.label if button is not None and button.label else match["action"]),
            style=(button.style if button is not None else discord.ButtonStyle.secondary),
        )

    @property
    def encoded(self) -> str:
        return self.item.custom_id or ""


class WorkflowSelect(Clicked, discord.ui.DynamicItem[discord.ui.Select[Any]], template=MENU_PATTERN):
    """A select menu whose options' values each carry a command, encoded like a button's."""

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: Any, /
    ) -> WorkflowSelect:
        if isinstance(item, discord.ui.Select):
            return cls(item)
        return cls(discord.ui.Select(custom_id=match.string, options=[discord.SelectOption(label="?")]))

    @property
    def encoded(self) -> str:
        """The encoded command of the option picked."""
        return self.item.values[0] if self.item.values else ""


def build_view(controls: Sequence[Control]) -> discord.ui.View | None:
    """A timeout-less view of the buttons and select menus the core laid out (None: none)."""
    if not controls:
        return None
    view = discord.ui.View(timeout=None)
    for c in controls:
        if c.options is None:
            style = _STYLES.get(c.style or "", discord.ButtonStyle.secondary)
            view.add_item(WorkflowButton(c.custom_id, label=c.label, style=style, row=c.row))
        else:
            options = [discord.SelectOption(label=label, value=value) for label, value in c.options]
            view.add_item(WorkflowSelect(discord.ui.Select(custom_id=c.custom_id, placeholder=c.label,
                                                           options=options, row=c.row)))
    return view


def used_view(message: discord.Message, chosen_custom_id: str, chooser: str) -> discord.ui.View:
    """The message's buttons, all disabled; the chosen one names who chose it.

    The view is stopped so discord.py does not listen to it: clicks on `baton:` ids are
    always routed to `WorkflowButton`.
    """
    view = discord.ui.View.from_message(message, timeout=None)
    for item in view.children:
        if isinstance(item, discord.ui.Button):
            item.disabled = True
            if item.custom_id == chosen_custom_id:
                item.label = FORMAT.said("chosen", item.label, chooser)[: RULES.label]
            else:
                item.style = discord.ButtonStyle.secondary
    view.stop()
    return view
