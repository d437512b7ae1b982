"""`Reply` -> console text or JSON: the console's `send` side.

Buttons become numbered choices (`[1] Resume …`) under the rendered text; typing the
number runs the button's command (see `interactive.py`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import IO, Any

from adapters.console.messages import PLATFORM
from core.commands.messages import Button, Reply
from core.render import render


def reply_text(reply: Reply) -> str:
    """The reply rendered for the console (all chunks joined)."""
    return "\n".join(render(reply, PLATFORM)).rstrip("\n")


def choices_text(buttons: Sequence[Button], first: int = 1) -> str:
    """`[1] Resume  /workflow resume r_1` lines, numbered from `first`."""
    return "\n".join(
        f"[{n}] {button.label}  /workflow {button.command}" for n, button in enumerate(buttons, start=first)
    )


def reply_to_json(reply: Reply) -> dict[str, Any]:
    """The JSON object `baton say --json` prints for one reply."""
    return {
        "kind": reply.kind,
        "text": reply_text(reply),
        "run_id": reply.run_id,
        "run_status": reply.run_status,
        "buttons": [
            {"label": b.label, "command": b.command, "action": b.action, "style": b.style}
            for b in reply.buttons
        ],
        "is_error": reply.is_error,
        "thread": reply.thread,
        "replace_key": reply.replace_key,
        "ephemeral": reply.ephemeral,
    }


def replies_json(replies: Iterable[Reply]) -> str:
    return json.dumps([reply_to_json(r) for r in replies], ensure_ascii=False, indent=2)


def send(reply: Reply, stream: IO[str] | None = None) -> None:
    """Print one reply (and its numbered choices) for a person reading the terminal."""
    out = stream if stream is not None else sys.stdout
    text = reply_text(reply)
    if reply.buttons:
        text = f"{text}\n{choices_text(reply.buttons)}" if text else choices_text(reply.buttons)
    out.write(text + "\n")
    out.flush()
