"""Console text -> ChatMessage (adapters/console/messages.py)."""

from __future__ import annotations

import uuid

import pytest

from adapters.console.messages import to_chat_message


@pytest.mark.parametrize(
    ("typed", "text"),
    [
        ("/workflow run hello hi", "run hello hi"),
        ("run hello hi", "run hello hi"),
        ("  status  ", "status"),
        ("Resume abc123", "Resume abc123"),
        ("approve abc123 looks good", "approve abc123 looks good"),
        ('run x --force "a \\"b\\""', 'run x --force "a \\"b\\""'),
    ],
)
def test_commands_are_recognised_with_or_without_the_prefix(typed: str, text: str) -> None:
    message = to_chat_message(typed, "console", "ana")
    assert message.is_command is True
    assert message.text == text


@pytest.mark.parametrize("typed", ["lgtm", "yes go ahead", "approve", "reject", "reject: too risky", "1"])
def test_everything_else_is_a_plain_reply(typed: str) -> None:
    message = to_chat_message(typed, "console", "ana")
    assert message.is_command is False
    assert message.text == typed


def test_the_console_is_a_direct_conversation_with_a_fresh_event_id() -> None:
    first = to_chat_message("status", "ops", "ana", "t1")
    second = to_chat_message("status", "ops", "ana", "t1")
    assert (first.platform, first.conversation, first.user, first.thread) == ("console", "ops", "ana", "t1")
    assert first.direct is True
    assert uuid.UUID(first.event_id)
    assert first.event_id != second.event_id


def test_a_given_event_id_is_kept() -> None:
    assert to_chat_message("status", "c", "u", event_id="evt-1").event_id == "evt-1"
