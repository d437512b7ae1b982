"""What the core makes of a reply for a platform, before its transport sees it (the delivery
service's `compose`), so that a reply crosses to the adapter once, made:

- `texts(...)`: a platform that posts a reply as plain text messages (Discord): the messages'
  texts, the file attached to the first (the reply's own, or its whole text when it is too long
  and the service says it may: `attach`), the key that makes a redelivered post land once, and
  who may be pinged (`Message`).
  (A platform that builds its own blocks, Slack, composes through `core.commands.block_messages`.)

Pure: the posting is the adapter's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.commands.controls import Control, Rules, laid_out
from core.commands.messages import Reply
from core.delivery.edits import Outgoing
from core.delivery.service import Compose
from core.redaction import Redactor
from core.render import Format, render_reply


@dataclass(frozen=True, slots=True)
class Content:
    """`chunks`: one message each; `file`: (name, bytes) attached to the first; `every`: every
    chunk, for when the platform refuses the file (nothing is lost)."""

    chunks: tuple[str, ...]
    file: tuple[str, bytes] | None
    every: tuple[str, ...]


def content(reply: Reply, fmt: Format, redactor: Redactor, *, attach: bool, attach_over: int) -> Content:
    """The messages of `reply`. More than `attach_over` characters in all, or a command too wide
    for one message, go as the first message with the whole text attached when `attach` (the file
    shows every command whole), else as that first message alone."""
    rendered = render_reply(reply, fmt, redactor)
    chunks = tuple(c for c in rendered.chunks if c.strip())
    if reply.file is not None:  # a file the reply carries (`audit --since`)
        return Content(chunks, (reply.file.name, reply.file.content or b""), chunks)
    if rendered.whole and sum(len(c) for c in chunks) <= attach_over:
        return Content(chunks, None, chunks)
    if not attach:
        return Content(chunks[:1], None, chunks)
    name = f"{reply.kind}-{reply.run_id}.txt" if reply.run_id else f"{reply.kind}.txt"
    return Content(chunks[:1], (name, rendered.text.encode("utf-8")), chunks)


def once_key(reply: Reply, length: int) -> str | None:
    """The key that makes a platform take a redelivered outbox row's post once (Discord's nonce):
    its key (`Reply.how.once`), the same on every redelivery, hashed when longer than `length`; None
    for any other reply."""
    if reply.how.once is None:
        return None
    key = reply.how.once.key
    return key if len(key) <= length else hashlib.sha256(key.encode()).hexdigest()[:length]


def pinged(reply: Reply, platform: str) -> list[str]:
    """The platform's ids of the people `reply` calls (`Reply.pings`: `<platform>:<id>`)."""
    prefix = f"{platform}:"
    return [p.removeprefix(prefix) for p in reply.pings if p.startswith(prefix) and p != prefix]


@dataclass(frozen=True, slots=True)
class Message:
    """A reply as plain text messages (`content`), with the key its first post carries (`nonce`:
    a redelivered outbox row posts once), the platform ids of the people it may ping, and its
    buttons and choice lists laid out (`controls`: `core.commands.controls`)."""

    content: Content
    nonce: str | None
    pings: tuple[str, ...]
    controls: tuple[Control, ...] = ()


def texts(fmt: Format, redactor: Redactor, *, attach_over: int, nonce_length: int,
          controls: Rules | None = None, keep: Callable[[str], str] = str) -> Compose:
    """The delivery service's `compose` of a platform posting plain text messages (`Message`);
    `controls`: its rules for buttons (`keep`: the store of commands too long for them)."""

    async def compose(reply: Outgoing, attach: bool) -> Any:
        assert isinstance(reply, Reply)
        said = content(reply, fmt, redactor, attach=attach, attach_over=attach_over)
        drawn = laid_out(reply, controls, keep, redactor) if controls is not None else ()
        return Message(said, once_key(reply, nonce_length), tuple(pinged(reply, fmt.name)), drawn)

    return compose

