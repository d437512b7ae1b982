"""`Form` -> a Discord modal: at most five text fields, sent as an interaction's first answer.

Discord's modals hold five text inputs, so a form with more fields shows its first five (the
required ones come first, `core.commands.forms`); the rest keep what was typed or their
defaults. A form that needs more than five answers is not shown as a modal at all: the
reply's text says which `--set` to type. Choices (`enum:`) are listed in the placeholder
(`templates/discord/_said.j2`) and checked by the core like any other value. The submitted
texts go back to the core unchanged. Each modal has its own custom_id (`PREFIX` + random),
so forms open at once stay apart.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import discord

from adapters.discord.formatting import said
from core.commands.messages import Form, FormField
from core.splitting import fit

FIELDS = 5  # text inputs a Discord modal holds
TITLE = 45  # characters of a modal's title and of a field's label
PLACEHOLDER = 100
#: Every modal Baton opens has its own custom_id under this prefix: discord.py keeps one open
#: modal per custom_id, so two people's forms open at once must never share one.
PREFIX = "baton-form:"

#: What to do with the submitted texts ({field name: text}), on the submit interaction.
Submit = Callable[[discord.Interaction, dict[str, str]], Awaitable[None]]


def fits(form: Form) -> bool:
    """Whether a modal can ask everything the form needs (its required fields)."""
    return sum(1 for f in form.fields if f.required) <= FIELDS


def _placeholder(field: FormField) -> str:
    return fit(said("placeholder", field.choices, field.type, field.description), PLACEHOLDER)


class FormModal(discord.ui.Modal):
    """The modal of one form; `submit` gets the texts when the person sends it."""

    def __init__(self, form: Form, submit: Submit) -> None:
        super().__init__(title=fit(form.title, TITLE), custom_id=PREFIX + secrets.token_hex(12),
                         timeout=900)
        self.submit = submit
        #: fields past the first five keep the text they start from (typed, or the default)
        self.kept = {f.name: f.value for f in form.fields[FIELDS:] if f.value}
        self.inputs: dict[str, discord.ui.TextInput[Any]] = {}
        for field in form.fields[:FIELDS]:
            text_input: discord.ui.TextInput[Any] = discord.ui.TextInput(
                label=fit(said("field_label", field.label, field.type), TITLE),
                style=discord.TextStyle.paragraph if field.multiline else discord.TextStyle.short,
                required=field.required, default=field.value or None, placeholder=_placeholder(field),
                custom_id=f"field:{field.name}",
            )
            self.inputs[field.name] = text_input
            self.add_item(text_input)

    async def on_submit(self, interaction: discord.Interaction, /) -> None:
        typed = {name: item.value for name, item in self.inputs.items()}
        await self.submit(interaction, {**self.kept, **typed})
