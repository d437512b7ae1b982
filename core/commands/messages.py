"""The platform-neutral conversation: what comes in (`ChatMessage`) and what goes out (`Reply`).

An adapter turns a platform event into a `ChatMessage`, calls
`core.commands.handler.Handler.handle(message)`, and sends each `Reply` it gets back
(rendered with `core.render.render(reply, platform)`). Replies about background work
(progress, completion, a gate waiting) arrive later through the `Outbox` the adapter
registered for its platform.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.delivery.envelope import Address, Mode


@dataclass(frozen=True, slots=True)
class Attachment:
    name: str
    url: str | None = None
    content: bytes | None = None


@dataclass(frozen=True, slots=True)
class ChatMessage:
    platform: str  # "console" | "slack" | "discord"
    conversation: str  # channel / DM id
    user: str  # immutable platform user id (never a display name)
    text: str  # for commands: everything after `/workflow`
    event_id: str  # the platform's id for this event; duplicates are processed once
    thread: str | None = None  # thread id (Slack thread_ts, Discord thread channel id)
    is_command: bool = True  # a slash command or button click; False for a plain chat reply
    direct: bool = False  # a direct conversation with the bot (the console is one)
    mentions_bot: bool = False
    user_name: str | None = None  # display only; never used to authorize
    attachments: tuple[Attachment, ...] = ()
    #: who acts when it is not the platform's user: an agent through MCP (`mcp:ci-agent`),
    #: whose runs report in `conversation`; None: `f"{platform}:{user}"`
    principal: str | None = None


#: Buttons whose click changes nothing ("Open run" answers the clicker with their own link,
#: "Run…" opens a form):
#: adapters leave them in place after a click, for the next person who reads the message.
REUSABLE_ACTIONS = frozenset({"open", "form"})


def reusable(action: str) -> bool:
    """Whether a button with this action name stays usable after it was clicked."""
    return action in REUSABLE_ACTIONS


@dataclass(frozen=True, slots=True)
class Button:
    label: str
    command: str  # the exact `/workflow …` text (without the leading `/workflow `) it runs
    style: str | None = None  # "primary" | "danger" | None
    action: str = ""  # a short stable name, e.g. "resume", "abandon", "force", "approve"

    @property
    def reusable(self) -> bool:
        return reusable(self.action)


@dataclass(frozen=True, slots=True)
class Menu:
    """A choice list: picking an option runs its command, as a button would (a Slack
    static_select, a Discord select menu, numbered choices on the console). Used instead of
    buttons when there are more choices than a row of buttons holds."""

    placeholder: str
    options: tuple[Button, ...]


@dataclass(frozen=True, slots=True)
class FormField:
    name: str
    label: str
    type: str  # string | integer | number | boolean | object | array
    required: bool = False
    value: str = ""  # the text shown to start from (what was given, else the default)
    choices: tuple[str, ...] = ()  # the allowed values as the user types them (`enum:`)
    description: str = ""

    @property
    def multiline(self) -> bool:
        return self.type in ("object", "array")


@dataclass(frozen=True, slots=True)
class Form:
    """What to ask, and what the answers complete: `command` is the `/workflow` text (without
    the prefix) that, with the values, makes the command to run (`read_form`)."""

    kind: str
    title: str
    submit: str
    command: str
    fields: tuple[FormField, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class Reply:
    """What is said (the template `kind`, its `data`, the choices it offers), with where it goes
    (`to`, an `Address`) and how it is delivered (`how`, a `Mode`: an edit, only for the asker,
    once per outbox row). Core builds all three; delivery turns them into platform operations."""

    kind: str  # template name: templates/<platform>/<kind>.j2
    data: Mapping[str, Any] = field(default_factory=dict)
    buttons: tuple[Button, ...] = ()
    menus: tuple[Menu, ...] = ()
    form: Form | None = None  # values to ask for in the platform's form, when it has one (forms.py)
    run_id: str | None = None
    run_status: str | None = None  # the run's status when this reply was made
    is_error: bool = False
    #: a file sent with the reply (`audit --since`): the console writes it and prints its path,
    #: Slack uploads it in the reply's thread, Discord attaches it to the message
    file: Attachment | None = None
    #: the people this reply calls (`slack:U1`): its template mentions them with `ping`, which
    #: notifies them (Discord: the adapter allows exactly these mentions). Only a reply that is
    #: addressed to them and asks them to act: a gate's reminder or escalation (the approvers it
    #: waits on), "handled after a restart" (who typed the command). Everyone else a reply names
    #: is shown by name, never pinged (`templates/<platform>/_fmt.j2`, `user`)
    pings: tuple[str, ...] = ()
    #: where it goes; the empty `Address()`: where the message it answers came from
    to: Address = field(default_factory=Address)
    #: how it is delivered; the empty `Mode()`: posted anew, for everyone
    how: Mode = field(default_factory=Mode)

    def at(self, **where: Any) -> Reply:
        """This reply sent elsewhere: its `to` with the given `Address` fields changed."""
        return dataclasses.replace(self, to=dataclasses.replace(self.to, **where))

    def sent(self, **mode: Any) -> Reply:
        """This reply delivered otherwise: its `how` with the given `Mode` fields changed."""
        return dataclasses.replace(self, how=dataclasses.replace(self.how, **mode))


Outbox = Callable[[Reply], Awaitable[None]]
