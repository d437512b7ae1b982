"""Which commands start a run where they were typed: before handing one to the handler, an
adapter checks that it can post there (Slack: membership and channel type; Discord: the
interaction's app permissions) and, if not, starts nothing and tells the user privately how to
fix it (DESIGN.md, Delivery). Pure: the checks themselves are the adapters'."""

from __future__ import annotations

from core.commands.model import RunCommand
from core.commands.parser import parse
from core.errors import BatonError


def starts_run(text: str) -> bool:
    """`text` (a typed command) would start a run in the conversation it was typed in. A command
    that does not parse starts nothing: the handler answers it with its usage."""
    try:
        return isinstance(parse(text), RunCommand)
    except BatonError:
        return False
