"""A form at the console (a run's inputs, a gate's values): numbered prompts, one per field.

    1/2 replicas (integer) [3]:          Enter keeps the value shown (the default)
    2/2 window (one of: now, tonight):

The answers are checked by the core (`Handler.asking.read_form`), exactly as a Slack or
Discord form's are; a wrong value is said and only the wrong fields are asked again. Ctrl-D
(end of input) gives up: nothing is sent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

from core.commands.asking import Asking
from core.commands.forms import FormResult
from core.commands.messages import ChatMessage, Form, FormField

LineReader = Callable[[], Awaitable[str | None]]
Say = Callable[[str], Awaitable[None]]


def prompt(field: FormField, index: int, count: int) -> str:
    kind = f"one of: {', '.join(field.choices)}" if field.choices else field.type
    shown = f" [{field.value}]" if field.value else ""
    return f"{index}/{count} {field.name} ({kind}){shown}: "


async def fill(form: Form, asking: Asking, message: ChatMessage, read: LineReader, say: Say
               ) -> FormResult | None:
    """Ask every field of `form`; what the answers complete (to handle as `message`'s user: a
    run's command, or a gate's ballot), or None when input ended."""
    asked = list(form.fields)
    answers = {f.name: f.value for f in form.fields}
    await say(f"{form.title}: {len(asked)} value{'s' if len(asked) != 1 else ''} to fill in "
              "(Enter keeps the value in brackets).")  # fmt: skip
    while True:
        for index, field in enumerate(asked, 1):
            await say(prompt(field, index, len(asked)))
            line = await read()
            if line is None:
                return None
            if line.strip():
                answers[field.name] = line.strip()
        result = asking.read_form(dataclasses.replace(message, text=form.command), answers)
        if result.command is not None:
            return result
        for name, error in result.errors.items():
            await say(f"{name}: {error}" if name else error)
        asked = [f for f in form.fields if f.name in result.errors] or list(form.fields)
