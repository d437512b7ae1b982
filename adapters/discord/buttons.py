"""Persistent buttons and select menus: one `DynamicItem` class matches every `baton:…`
button custom_id, another every `baton-menu:…` select menu.

Registered once at startup (`client.add_dynamic_items(WorkflowButton, WorkflowSelect)`), they
rebuild the clicked item from the message alone, so what was posted before a restart keeps
working. A button's custom_id, and each option's value of a select menu, carry their command
(`core.delivery.button_refs`, in at most `MAX_CUSTOM_ID` characters). The click itself is
handled by the client (`Clicks`): `interaction_check` asks the core (the click is handled as
the clicking user's command; a refusal is answered ephemerally and nothing happens),
`callback` disables the used buttons and posts the core's replies.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import discord

from adapters.discord.formatting import said
from core.commands.messages import Button, Menu
from core.delivery.button_refs import PATTERN, encode

#: Discord's limits: 100 characters a custom_id; 5 buttons a row, 5 rows, 80 characters a
#: label; a select menu fills a row and holds 25 options of at most 100 characters (label and
#: value), placeholder 150.
MAX_CUSTOM_ID = 100
_PER_ROW = 5
_ROWS = 5
_MAX_BUTTONS = 25
_MAX_LABEL = 80
_MAX_OPTIONS = 25
_MAX_OPTION = 100
_MAX_PLACEHOLDER = 150
#: A select menu's custom_id; each option's value is made like a button's custom_id.
MENU_PATTERN = re.compile(r"baton-menu:(?P<index>[0-9]{1,2})")

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


def build_view(
    buttons: Sequence[Button], run_id: str | None, put: Callable[[bytes], str], menus: Sequence[Menu] = ()
) -> discord.ui.View | None:
    """A timeout-less view of the reply's buttons and select menus (None when it has none);
    `put` keeps a command too long for a custom_id."""
    if not buttons and not menus:
        return None

    def ref(item: Button, run: str | None = None) -> str:
        return encode(item.action, item.command, run, put, limit=MAX_CUSTOM_ID)

    view = discord.ui.View(timeout=None)
    for index, button in enumerate(buttons[:_MAX_BUTTONS]):
        style = _STYLES.get(button.style or "", discord.ButtonStyle.secondary)
        view.add_item(WorkflowButton(ref(button, run_id), label=button.label[:_MAX_LABEL], style=style,
                                     row=index // _PER_ROW))
    first_free = -(-min(len(buttons), _MAX_BUTTONS) // _PER_ROW)
    for index, menu in enumerate(menus[: _ROWS - first_free]):
        options = [discord.SelectOption(label=o.label[:_MAX_OPTION], value=ref(o))
                   for o in menu.options[:_MAX_OPTIONS]]
        select: discord.ui.Select[Any] = discord.ui.Select(
            custom_id=f"baton-menu:{index}", placeholder=menu.placeholder[:_MAX_PLACEHOLDER],
            options=options, row=first_free + index,
        )  # fmt: skip
        view.add_item(WorkflowSelect(select))
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
                item.label = said("chosen", item.label, chooser)[:_MAX_LABEL]
            else:
                item.style = discord.ButtonStyle.secondary
    view.stop()
    return view
