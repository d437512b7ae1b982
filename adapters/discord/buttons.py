"""Persistent buttons: one `DynamicItem` class matches every `baton:…` custom_id.

Registered once at startup (`client.add_dynamic_items(WorkflowButton)`), it rebuilds the
clicked button from the custom_id alone, so buttons posted before a restart keep working.
The click itself is handled by the client (`ClickHandler`): `interaction_check` asks the core
(the click is handled as the clicking user's command; a refusal is answered ephemerally and
nothing happens), `callback` disables the used buttons and posts the core's replies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import discord

from adapters.discord.custom_ids import PATTERN, encode
from core.commands.messages import Button

#: Discord's limits: 5 buttons a row, 5 rows, 80 characters a label.
_PER_ROW = 5
_MAX_BUTTONS = 25
_MAX_LABEL = 80

_STYLES = {"primary": discord.ButtonStyle.primary, "danger": discord.ButtonStyle.danger}


class ClickHandler(Protocol):
    async def check_click(self, interaction: discord.Interaction, button: WorkflowButton) -> bool: ...

    async def run_click(self, interaction: discord.Interaction, button: WorkflowButton) -> None: ...


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


def build_view(
    buttons: Sequence[Button], run_id: str | None, put: Callable[[bytes], str]
) -> discord.ui.View | None:
    """A timeout-less view of the reply's buttons (None when it has none)."""
    if not buttons:
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
