"""`Form` -> a Discord modal: at most five text fields, sent as an interaction's first answer.

Discord's modals hold five text inputs, so a form with more fields shows its first five (the
required ones come first, `core.commands.forms`); the rest keep what was typed or their
defaults. A form that needs more than five answers is not shown as a modal at all (the core's
`Interactions`): the reply's text says which `--set` to type. Choices (`enum:`) are listed in
the placeholder (`templates/discord/_said.j2`) and checked by the core like any other value.
The submitted texts go back to the core unchanged. Each modal's custom_id is its form's id
(the core's, one per form opened, so that forms open at once stay apart).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import discord

from adapters.discord.formatting import FORMAT
from core.commands.interactions import FORM_OPEN
from core.commands.messages import Form, FormField
from core.splitting import fit

FIELDS = 5  # text inputs a Discord modal holds
TITLE = 45  # characters of a modal's title and of a field's label
PLACEHOLDER = 100

#: What to do with the submitted texts ({field name: text}), on the submit interaction.
Submit = Callable[[discord.Interaction, dict[str, str]], Awaitable[None]]


def _placeholder(field: FormField) -> str:
    return fit(FORMAT.said("placeholder", field.choices, field.type, field.description), PLACEHOLDER)


class FormModal(discord.ui.Modal):
    """The modal of one form; `submit` gets the texts when the person sends it."""

    def __init__(self, form: Form, form_id: str, submit: Submit) -> None:
        super().__init__(title=fit(form.title, TITLE), custom_id=form_id, timeout=FORM_OPEN)
        self.submit = submit
        #: fields past the first five keep the text they start from (typed, or the default)
        self.kept = {f.name: f.value for f in form.fields[FIELDS:] if f.value}
        self.inputs: dict[str, discord.ui.TextInput[Any]] = {}
        for field in form.fields[:FIELDS]:
            text_input: discord.ui.TextInput[Any] = discord.ui.TextInput(
                label=fit(FORMAT.said("field_label", field.label, field.type), TITLE),
                style=discord.TextStyle.paragraph if field.multiline else discord.TextStyle.short,
                required=field.required, default=field.value or None, placeholder=_placeholder(field),
                custom_id=f"field:{field.name}",
            )
            self.inputs[field.name] = text_input
            self.add_item(text_input)

    async def on_submit(self, interaction: discord.Interaction, /) -> None:
        typed = {name: item.value for name, item in self.inputs.items()}
        await self.submit(interaction, {**self.kept, **typed})
