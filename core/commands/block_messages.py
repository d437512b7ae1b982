"""What the core makes of a reply for a platform that builds its own blocks (Slack), before its
transport sees it (the delivery service's `compose`): the reply laid out by the platform's
rules (`Rules`, data its adapter registers), so that the adapter only writes the blocks.

- Text is never cut: each rendered chunk is split into sections of `Rules.section` characters
  at line breaks (`split_lines`), empty ones dropped.
- A text longer than `Rules.upload_over` characters in all, or of more sections than
  `Rules.sections` (room is left for a note, the buttons and the choice lists), or holding a
  command too wide for one section, shows only its first chunk; when the service says it may
  (`attach`), its whole text is uploaded as a file (`Layout.upload`, the format's escaping
  undone) and a note (the format's sentence `uploaded`) says so.
- Buttons and options carry their command, or a reference to it when it is longer than the
  platform lets them carry (`ButtonCommands.value`); what they show is redacted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from core.commands.messages import Attachment, Button, Menu, Reply
from core.delivery.buttons import ButtonCommands
from core.delivery.edits import Outgoing
from core.delivery.names import Names
from core.delivery.redelivery import payload
from core.delivery.service import Compose
from core.redaction import Redactor
from core.render import Format, Rendered, redacted, render_reply, sentence
from core.splitting import fit


@dataclass(frozen=True, slots=True)
class Rules:
    """How one message of the platform holds a reply (characters; Slack's in `adapters/slack`)."""

    section: int  # per section of text
    upload_over: int  # in all, above which the whole text is uploaded as a file
    sections: int  # sections of text in one message
    fallback: int  # of the notification text
    value: int  # a button's value
    option_value: int  # a choice list option's value
    unescape: Callable[[str], str] = str  # the format's escaping undone, for the uploaded file


@dataclass(frozen=True, slots=True)
class Layout:
    """One message: its `sections` of text, its notification text (`fallback`), a `note` under
    them, its buttons and choice lists (each carrying its value as `command`), the whole text
    to upload (`upload`, as `filename`; None: nothing), the file the reply carries, and what an
    outbox row's message carries for a redelivery to find it (`once`: `redelivery.payload`)."""

    sections: tuple[str, ...]
    fallback: str
    buttons: tuple[Button, ...] = ()
    menus: tuple[Menu, ...] = ()
    note: str | None = None
    upload: str | None = None
    filename: str = ""
    file: Attachment | None = None
    once: dict[str, Any] | None = None


def split_lines(text: str, limit: int) -> list[str]:
    """Split at line breaks (hard-split a single over-long line) so each part fits `limit`."""
    parts: list[str] = []
    rest = text
    while len(rest) > limit:
        cut = rest.rfind("\n", 0, limit)
        if cut <= 0:
            parts.append(rest[:limit])
            rest = rest[limit:]
        else:
            parts.append(rest[:cut])
            rest = rest[cut + 1 :]
    if rest.strip():
        parts.append(rest)
    return parts


def sections(chunks: Sequence[str], limit: int) -> list[str]:
    """Every rendered chunk as section-sized texts, empty chunks dropped."""
    return [part for chunk in chunks for part in split_lines(chunk, limit)]


def laid_out(reply: Reply, text: Rendered, fmt: Format, rules: Rules, redactor: Redactor,
             buttons: ButtonCommands, *, attach: bool) -> Layout:
    """`reply`, rendered as `text`, as one message by `rules`."""
    chunks = list(text.chunks)
    too_long = (sum(map(len, chunks)) > rules.upload_over
                or len(sections(chunks, rules.section)) > rules.sections
                or not text.whole)  # a command too wide for a section
    upload = attach and too_long
    filename = f"{reply.kind}-{reply.run_id or 'baton'}.txt"
    shown = redacted(reply, redactor)
    chunks = chunks[:1] if too_long else chunks

    def carried(button: Button, limit: int) -> Button:
        return dataclasses.replace(button, command=buttons.value(button.command, limit))

    return Layout(
        sections=tuple(sections(chunks, rules.section)),
        fallback=fit("\n".join(c for c in chunks if c.strip()) or " ", rules.fallback),
        buttons=tuple(carried(b, rules.value) for b in shown.buttons),
        menus=tuple(Menu(m.placeholder, tuple(carried(o, rules.option_value) for o in m.options))
                    for m in shown.menus),
        note=sentence(fmt, "uploaded", len(text.text), filename) if upload else None,
        upload=rules.unescape(text.text) if upload else None,
        filename=filename,
        file=reply.file,
        once=None if reply.how.once is None else payload(reply.how.once),
    )


def blocks(fmt: Format, rules: Rules, redactor: Redactor, names: Names, buttons: ButtonCommands) -> Compose:
    """The delivery service's `compose` of a platform building its own blocks (`Layout`), the
    people the reply names shown by name (never pinged)."""

    async def compose(reply: Outgoing, attach: bool) -> Layout:
        assert isinstance(reply, Reply)
        text = render_reply(reply, fmt, redactor, names=await names.names_for(reply.data))
        return laid_out(reply, text, fmt, rules, redactor, buttons, attach=attach)

    return compose
