"""Where a reply goes (`Address`) and how it is delivered (`Mode`): the envelope around what it
says (`core.commands.messages.Reply`).

    Reply("gate", data, to=Address(platform="slack", conversation="C1", thread="1.2"),
          how=Mode(replace_key="gate:r1", edit_only=True))

Both are read by delivery (`core.delivery.service`, `fallbacks`, `transport`) and by the
adapters' transports; the commands layer builds them. Every field is optional: an empty
`Address()` means "where the message came from", an empty `Mode()` "post it, once, for everyone".
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Once:
    """How a message of an outbox row lands once, however often the row is delivered: `key`
    (`outbox:<row>[:<part>]`, the same on every redelivery: Discord's nonce, Slack's message
    metadata) and `since`, the earliest an earlier attempt may have reached the platform
    (`core.delivery.outbox.once_of`): a platform without a key to deduplicate on (Slack) looks
    for the message under `key` before posting it again. None: the row's first attempt."""

    key: str
    since: float | None = None


@dataclass(frozen=True, slots=True)
class Address:
    """Where a reply goes. None (the default of each field): where the message it answers came
    from."""

    platform: str | None = None
    conversation: str | None = None
    thread: str | None = None  # where to post; None: where the message came from
    requester: str | None = None  # who started the run (`slack:U1`): told directly when nowhere else can be
    #: `conversation` is a person's platform user id: sent to them directly (a DM), never in a thread
    direct: bool = False


@dataclass(frozen=True, slots=True)
class Mode:
    """How a reply is delivered: posted anew or as an edit, seen by everyone or by the asker
    only, and how an outbox row's message lands once."""

    replace_key: str | None = None  # edit the message last sent with this key instead of posting
    edit_only: bool = False  # only edit the message sent under `replace_key`; never post anew
    starts_thread: bool = False  # the adapter should report the posted message's id as the run's thread
    ephemeral: bool = False  # only the asking user should see it (refusals, help)
    #: an outbox row's message: how it lands once however often the row is delivered (its key,
    #: and since when an earlier attempt may have reached the platform); None: no row's
    once: Once | None = None
