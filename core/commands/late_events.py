"""Commands handled after a restart: the message recorded before the acknowledgement, and its
replies readdressed to where it was typed.

Slack and Discord never redeliver an event once it was acknowledged, and Baton acknowledges
first (within the platform's 3 seconds), then handles. So the adapter records the message with
its event id (`Handler.accept`, one write) BEFORE it acknowledges; a process that dies between
the two leaves the claim unfinished with the message in it. Another process (or this one after
a restart) re-claims it once it is `BATON_EVENT_STALE_SECONDS` old (a compare-and-swap: one
replica wins), handles it, and posts the answer where it was typed with a word that it comes
late (`bot/late_events.py`). Pure functions here: the payload written, the message read back,
the replies readdressed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.commands.messages import Attachment, ChatMessage, Reply
from core.delivery.envelope import Address

_FIELDS = ("platform", "conversation", "user", "text", "event_id", "thread", "is_command", "direct",
           "mentions_bot", "user_name", "principal")  # fmt: skip


def payload_of(message: ChatMessage) -> dict[str, Any]:
    """What is recorded of a message: its fields, attachments by name and address only (never
    their bytes: a file is read again from the platform)."""
    payload: dict[str, Any] = {name: getattr(message, name) for name in _FIELDS}
    payload["attachments"] = [{"name": a.name, "url": a.url} for a in message.attachments if a.url]
    return payload


def message_of(payload: dict[str, Any]) -> ChatMessage:
    """The message `payload_of` recorded."""
    fields = {name: payload[name] for name in _FIELDS if name in payload}
    attachments = tuple(Attachment(str(a["name"]), a.get("url")) for a in payload.get("attachments", ()))
    return ChatMessage(**fields, attachments=attachments)


def late_replies(message: ChatMessage, claimed_at: float, answer: Sequence[Reply]) -> list[Reply]:
    """`answer`, readdressed for the platform's outbox: posted where the message was typed (its
    thread), a reply meant for the asker alone sent to them directly; first, a word saying the
    command was handled after a restart. Nothing when there was nothing to say (a duplicate)."""
    if not answer:
        return []
    notice = Reply(
        kind="handled_late",
        data={"text": message.text, "user": f"{message.platform}:{message.user}", "at": claimed_at},
        to=Address(message.platform, message.conversation, message.thread),
        pings=(f"{message.platform}:{message.user}",),  # addressed to them: the one who must know
    )
    late = [notice]
    for reply in answer:
        if reply.how.ephemeral or reply.to.direct:
            told = reply.at(platform=message.platform, conversation=message.user, thread=None, direct=True)
            late.append(told.sent(ephemeral=False, starts_thread=False))
        else:
            late.append(reply.at(
                platform=reply.to.platform or message.platform,
                conversation=reply.to.conversation or message.conversation,
                thread=reply.to.thread if reply.to.conversation else (reply.to.thread or message.thread),
            ))  # fmt: skip
    return late
