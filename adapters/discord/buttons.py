"""Persistent buttons and select menus: one `DynamicItem` class matches every `baton:…`
button custom_id, another every `baton-menu:…` select menu.

Registered once at startup (`client.add_dynamic_items(WorkflowButton, WorkflowSelect)`), they
rebuild the clicked item from the message alone, so what was posted before a restart keeps
working. A select menu's option values are encoded like button custom_ids (`custom_ids`).
The click itself is handled by the client (`ClickHandler`): `interaction_check` asks the core
(the click is handled as the clicking user's command; a refusal is answered ephemerally and
nothing happens), `callback` disables the used buttons and posts the core's replies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import discord

from adapters.discord.custom_ids import MENU_PATTERN, PATTERN, encode
from core.commands.messages import Button, Menu

#: Discord's limits: 5 buttons a row, 5 rows, 80 characters a label; a select menu fills a
#: row and holds 25 options of at most 100 characters (label and value), placeholder 150.
_PER_ROW = 5
_ROWS = 5
_MAX_BUTTONS = 25
_MAX_LABEL = 80
_MAX_OPTIONS = 25
_MAX_OPTION = 100
_MAX_PLACEHOLDER = 150

_STYLES = {"primary": discord.ButtonStyle.primary, "danger": discord.ButtonStyle.danger}


class ClickHandler(Protocol):
    async def check_click(self, interaction: discord.Interaction, button: WorkflowButton) -> bool: ...

    async def run_click(self, interaction: discord.Interaction, button: WorkflowButton) -> None: ...

    async def check_choice(self, interaction: discord.Interaction, menu: WorkflowSelect) -> bool: ...

    async def run_choice(self, interaction: discord.Interaction, menu: WorkflowSelect) -> None: ...


class WorkflowButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=PATTERN):
    """A button whose custom_id carries its command (see `custom_ids`)."""

    def __init__(self, custom_id: str, *, label: str, style: discord.ButtonStyle, row: int | None = None):
        super().__init__(discord.ui.Button(custom_id=custom_id, label=label, style=style, row=row))
        #: What the core answered in `interaction_check`; posted by `callback`.
        self.outcome: Any = None

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
    def custom_id_value(self) -> str:
        return self.item.custom_id or ""

    @property
    def label(self) -> str:
        return self.item.label or ""

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        clicks: ClickHandler = interaction.client  # type: ignore[assignment]
        return await clicks.check_click(interaction, self)

    async def callback(self, interaction: discord.Interaction) -> None:
        clicks: ClickHandler = interaction.client  # type: ignore[assignment]
        await clicks.run_click(interaction, self)


class WorkflowSelect(discord.ui.DynamicItem[discord.ui.Select[Any]], template=MENU_PATTERN):
    """A select menu whose options' values each carry a command, encoded like a button's."""

    def __init__(self, select: discord.ui.Select[Any]) -> None:
        super().__init__(select)
        self.outcome: Any = None

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: Any, /
    ) -> WorkflowSelect:
        if isinstance(item, discord.ui.Select):
            return cls(item)
        return cls(discord.ui.Select(custom_id=match.string, options=[discord.SelectOption(label="?")]))

    @property
    def chosen(self) -> str:
        """The encoded command of the option picked."""
        return self.item.values[0] if self.item.values else ""

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        clicks: ClickHandler = interaction.client  # type: ignore[assignment]
        return await clicks.check_choice(interaction, self)

    async def callback(self, interaction: discord.Interaction) -> None:
        clicks: ClickHandler = interaction.client  # type: ignore[assignment]
        await clicks.run_choice(interaction, self)


def build_view(
    buttons: Sequence[Button], run_id: str | None, put: Callable[[bytes], str], menus: Sequence[Menu] = ()
) -> discord.ui.View | None:
    """A timeout-less view of the reply's buttons and select menus (None when it has none)."""
    if not buttons and not menus:
        return None
    view = discord.ui.View(timeout=None)
    for index, button in enumerate(buttons[:_MAX_BUTTONS]):
        custom_id = encode(button.action, button.command, run_id, put)
        view.add_item(
            WorkflowButton(
                custom_id,
                label=button.label[:_MAX_LABEL],
                style=_STYLES.get(button.style or "", discord.ButtonStyle.secondary),
                row=index // _PER_ROW,
            )
        )
    first_free = -(-min(len(buttons), _MAX_BUTTONS) // _PER_ROW)
    for index, menu in enumerate(menus[: _ROWS - first_free]):
        options = [
            discord.SelectOption(label=o.label[:_MAX_OPTION], value=encode(o.action, o.command, None, put))
            for o in menu.options[:_MAX_OPTIONS]
        ]
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
                item.label = f"{item.label} · {chooser}"[:_MAX_LABEL]
            else:
                item.style = discord.ButtonStyle.secondary
    view.stop()
    return view
