"""A reply's buttons and choice lists laid out by a platform's rules (`Rules`, data its adapter
registers), each carrying its command's reference (`core.delivery.button_refs`), so that the
transport only draws them (Discord: a view of buttons and select menus; #27).

- What they show is redacted (`core.render.redacted`); a button carries `baton:<action>:…`, the
  command itself or a reference to it kept in the store when it is too long (`keep`).
- Buttons go `Rules.per_row` a row, at most `per_row * rows`; each choice list fills a row of
  its own after them (`MENU`: `baton-menu:<index>`), each option carrying a reference like a
  button's. Labels, options and placeholders are cut to the platform's lengths.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from core.commands.messages import Button, Reply
from core.delivery.button_refs import encode
from core.redaction import Redactor
from core.render import redacted

#: A choice list's custom_id; each option's value is made like a button's custom_id.
MENU_PATTERN = re.compile(r"baton-menu:(?P<index>[0-9]{1,2})")


@dataclass(frozen=True, slots=True)
class Rules:
    """What one message of the platform holds (Discord's in `adapters/discord/buttons.py`)."""

    reference: int  # characters a button's custom_id (an option's value) carries
    per_row: int  # buttons a row
    rows: int
    label: int  # characters of a button's label
    options: int  # options a choice list holds
    option: int  # characters of an option's label
    placeholder: int  # characters of a choice list's placeholder


@dataclass(frozen=True, slots=True)
class Control:
    """A button, or a choice list (`options`: (label, reference) each; `label`: its
    placeholder), on `row`, as the platform draws it."""

    custom_id: str
    label: str
    row: int
    style: str | None = None
    options: tuple[tuple[str, str], ...] | None = None


def laid_out(reply: Reply, rules: Rules, keep: Callable[[str], str], redactor: Redactor
             ) -> tuple[Control, ...]:
    """`reply`'s buttons and choice lists, through the redactor; `keep` stores a command too long
    for a reference and answers its digest."""
    shown = redacted(reply, redactor)

    def ref(item: Button, run: str | None = None) -> str:
        return encode(item.action, item.command, run, lambda b: keep(b.decode()), limit=rules.reference)

    buttons = shown.buttons[: rules.per_row * rules.rows]
    out = [Control(ref(b, reply.run_id), b.label[: rules.label], i // rules.per_row, b.style)
           for i, b in enumerate(buttons)]
    first_free = -(-len(buttons) // rules.per_row)
    for index, menu in enumerate(shown.menus[: rules.rows - first_free]):
        options = tuple((o.label[: rules.option], ref(o)) for o in menu.options[: rules.options])
        out.append(Control(f"baton-menu:{index}", menu.placeholder[: rules.placeholder], first_free + index,
                           options=options))
    return tuple(out)
