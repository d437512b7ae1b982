"""Console text -> `ChatMessage`: pure translation, no I/O.

The console is a direct conversation with the bot: whatever the user types is either a
command (`/workflow run hello hi`, or just `run hello hi`) or a plain reply that the
conversation layer classifies (an approval like "lgtm").
"""

from __future__ import annotations

import uuid

from core.commands.messages import ChatMessage

PLATFORM = "console"
COMMAND_PREFIX = "/workflow"
#: The `/workflow` subcommands of DESIGN.md; a line starting with one of them is a command.
SUBCOMMANDS: frozenset[str] = frozenset(
    {
        "run", "resume", "approve", "reject", "abandon", "cancel", "resolve", "invalidate",
        "plan", "status", "runs", "open", "list", "args", "audit", "help",
    }
)  # fmt: skip
#: Words that are also natural-language decisions: alone, they are a reply to a gate.
_DECISION_WORDS = frozenset({"approve", "reject"})


def split_command(text: str) -> tuple[bool, str]:
    """`(is_command, text for the handler)`: a command loses its `/workflow` prefix."""
    stripped = text.strip()
    head, _, rest = stripped.partition(" ")
    if head == COMMAND_PREFIX:
        return True, rest.strip()
    word = head.lower()
    if word in SUBCOMMANDS and not (word in _DECISION_WORDS and not rest.strip()):
        return True, stripped
    return False, stripped


def to_chat_message(
    text: str,
    conversation: str,
    user: str,
    thread: str | None = None,
    *,
    event_id: str | None = None,
    user_name: str | None = None,
) -> ChatMessage:
    """One line typed at the console as the platform-neutral message."""
    is_command, body = split_command(text)
    return ChatMessage(
        platform=PLATFORM,
        conversation=conversation,
        user=user,
        text=body,
        event_id=event_id or str(uuid.uuid4()),
        thread=thread,
        is_command=is_command,
        direct=True,
        user_name=user_name,
    )
