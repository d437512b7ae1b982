"""Console text -> `ChatMessage`: pure translation, no I/O.

The console is a direct conversation with the bot: whatever the user types is either a
command (`/workflow run hello hi`, or just `run hello hi`) or a plain reply that the
conversation layer classifies (an approval like "lgtm").
"""

from __future__ import annotations

import uuid

from core.commands.messages import ChatMessage
from core.commands.parser import as_command

PLATFORM = "console"


def split_command(text: str) -> tuple[bool, str]:
    """`(is_command, text for the handler)`: the console is a direct conversation, so a line
    is a command exactly when the core reads one in a direct message (`parser.as_command`)."""
    command = as_command(text)
    return (True, command) if command is not None else (False, text.strip())


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
