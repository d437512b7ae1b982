"""Text Baton refuses at the edge: NUL bytes, lone surrogates and invalid UTF-8 (pure).

Such text cannot be stored (UTF-8 columns), passed to a step (argv and environment hold no
NUL) or shown back faithfully, so it is refused where it enters, with one line and before
anything is stored. Invalid UTF-8 reaches Python as lone surrogates: a command line decodes
undecodable bytes as U+DC80..U+DCFF, and JSON (Slack, Discord, `--args`) may spell one as
`\\ud800`; both are refused the same way.

    text_problem("run hello \\x00")          # 'a NUL byte'
    check_message(message)                  # raises InvalidInput naming the field
"""

from __future__ import annotations

from typing import Any

from core.commands.messages import ChatMessage
from core.errors import UsageError


class InvalidInput(UsageError):
    """The input holds characters Baton does not accept."""


def text_problem(text: str) -> str | None:
    """What is wrong with `text` ("a NUL byte"), or None when it is fine (or not text at all:
    that is the caller's bug, reported where it breaks)."""
    if not isinstance(text, str):
        return None
    if "\x00" in text:
        return "a NUL byte"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "invalid UTF-8 (a lone surrogate)"
    return None


def value_problem(value: Any) -> str | None:
    """The first problem in any string of a JSON value (keys included), or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem is not None:
                return problem
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def refuse(what: str, problem: str) -> InvalidInput:
    """One line: what holds which problem, and what to do."""
    return InvalidInput(
        f"{what} contains {problem}, which Baton does not accept; remove it and send it again.", hint=""
    )


def check_text(text: str, what: str) -> None:
    problem = text_problem(text)
    if problem is not None:
        raise refuse(what, problem)


def check_value(value: Any, what: str) -> None:
    """`check_text` for every string of a JSON value (an agent's form values)."""
    problem = value_problem(value)
    if problem is not None:
        raise refuse(what, problem)


def check_message(message: ChatMessage) -> None:
    """Raise `InvalidInput` when any text field of `message` holds what Baton refuses."""
    check_text(message.text, "The message")
    fields = {
        "user id": message.user,
        "conversation id": message.conversation,
        "thread id": message.thread,
        "event id": message.event_id,
        "user name": message.user_name,
    }
    for what, value in fields.items():
        if value is not None:
            check_text(value, f"The {what}")
