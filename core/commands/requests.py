"""A chat platform's requests (a command, a button click, a form submitted, a message), answered
the same way on every platform: the policy chat adapters used to write each their own.

    requests = Requests(handler, delivery, asker, fmt, names, follow_up=(ttl, uses), home=publish)
    await requests.command(message, origin, ack, refusal=preflight)     # `/workflow …`
    await requests.click(value, read, ack, withdraw)                     # a button or option
    await requests.form(metadata, read, values, refuse, ack)             # a form submitted
    await requests.process(message, origin)                               # a plain message
    await requests.home_opened(user)                                      # a person's home

- A command, click or form is recorded before the platform is acknowledged (`Handler.accept`:
  a process dying after the acknowledgement leaves it to the next one, `late_events.py`).
- A `run` first asks the adapter whether Baton can post where it was typed (`refusal`): if
  not, nothing starts and the asker alone is told what to do.
- A click's value is its command, or a reference to one (`ButtonCommands`); a reference nobody
  kept is told to the clicker (`button_expired`). A click is the clicker's ballot on a gate
  (`voting.button_ballot`), else their command; its message loses its buttons when the answer
  retires them (`offers.retires`: the adapter's `withdraw`).
- A form carries where it was asked for and the command it completes (`FormPlace`, kept as a
  button's value is); its values are checked by the core before the platform is answered (the
  errors go back onto the fields), then the command they complete is handled as the
  submitter's; a form nobody kept any more is told so on its fields (`form_expired`).
- A crash while handling is logged and told to the asker in one line (`internal_error`); one
  while publishing a person's home (`home`: Slack's App Home, kept current by the core) is logged.
- Each answer goes where it was asked (`Origin`) unless it says otherwise: a form as the
  platform's form (its text, which says what to type, when that cannot open), an ephemeral
  answer to the asker alone, the rest through the delivery service, with the asker's follow-up
  kept as the run's. One the platform refused is told to the asker; a run that started is
  never told "try again" (`started_unseen`).

The steps Discord's `interactions.py` takes too (the preflight refusal, a click, a form's
values, a crash told) are `answering.py`'s; what is this module's is an acknowledgement sent at
once and never refused (Slack's 3 s, `acked`), a form's place carried back, and answers through
the asker's follow-up. The adapter's side is `Asker`: tell the asker alone, open a form, post
what the asker alone sees. The sentences are the platform's format's (`templates/<platform>/_said.j2`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

from core.commands import answering
from core.commands.messages import ChatMessage, Form, Reply
from core.delivery.failures import CallFailed
from core.delivery.names import Names
from core.delivery.service import DeliveryService
from core.render import Format, render

if TYPE_CHECKING:
    from core.commands.handler import Handler
    from core.engine.ballots import Ballot

log = logging.getLogger("baton.requests")

Ack = Callable[[], Awaitable[object]]  # the platform told the request arrived


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a request came from: where its answers go by default. `follow_up`: the platform's
    way back to the asker (Slack's response URL); `trigger`: what opens a form (a trigger id)."""

    channel: str
    user: str
    thread: str | None = None
    follow_up: str | None = None
    trigger: str | None = None


@dataclass(frozen=True, slots=True)
class FormPlace:
    """What a submitted form needs to be handled like the command that asked for it."""

    command: str
    channel: str
    thread: str | None = None

    def encode(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> FormPlace | None:
        try:
            data = json.loads(text)
            return cls(str(data["command"]), str(data["channel"]), data.get("thread"))
        except (ValueError, KeyError, TypeError):
            return None


def acked(ack: Ack) -> Callable[[], Awaitable[bool]]:
    """`ack` as an acknowledgement `answering.acknowledged` takes: one the platform never
    refuses (Slack's, sent within its 3 seconds)."""
    async def acknowledge() -> bool:
        await ack()
        return True
    return acknowledge


class Asker(Protocol):
    """What the platform does for a request's asker (a chat adapter's side)."""

    async def tell(self, origin: Origin, text: str) -> None:
        """Tell the asker alone (never raises: a failure is logged)."""
        ...

    async def open_form(self, form: Form, origin: Origin, place: str) -> bool:
        """Open `form` for the asker (`place`: what its submission carries back); False when it
        cannot be (the reply's text is posted instead)."""
        ...

    async def ephemeral(self, origin: Origin, channel: str, thread: str | None, message: Any) -> None:
        """Post `message` (what the delivery service composed) for the asker alone."""
        ...


class Host(Protocol):
    """What a chat adapter needs of the runtime (`bot.app.Baton`; adapters never import `bot`)."""

    @property
    def handler(self) -> Handler: ...

    @property
    def stopping(self) -> asyncio.Event: ...

    def watch_platform(self, platform: str, probe: Callable[[], Awaitable[bool]]) -> None:
        """Connected: `probe` tells the readiness check whether the connection still stands."""


Publish = Callable[[str, list[str]], Awaitable[object]]  # (user, their home rendered): shown to them


class Requests:
    def __init__(self, handler: Handler, delivery: DeliveryService, asker: Asker, fmt: Format, names: Names,
                 *, follow_up: tuple[float, int | None], form_place_limit: int,
                 home: Publish | None = None) -> None:
        self.handler = handler
        self.delivery = delivery
        self.asker = asker
        self.names = names
        self._fmt = fmt
        self._follow_up = follow_up  # (seconds a follow-up lives, uses)
        self._form_place_limit = form_place_limit  # characters a form carries back
        self._publish = home
        if home is not None:  # published again whenever what it shows changes
            handler.register_home(fmt.name, self.home)

    # -- requests ----------------------------------------------------------------------------
    async def command(self, message: ChatMessage, origin: Origin, ack: Ack, *,
                      refusal: Callable[[], Awaitable[str | None]] | None = None) -> None:
        """A command typed (`/workflow …`); `refusal`: why Baton cannot post where it was typed."""
        self.names.remember(message.user, message.user_name)  # display only, never authorization
        accepted = self.handler.accept(message)
        await ack()
        if refusal is not None and await answering.run_refused(  # before a run starts here
                message.text, refusal, lambda text: self.asker.tell(origin, text), origin.channel):
            if accepted:
                self.handler.finish(message)
            return
        await self.process(message, origin, accepted=accepted)

    async def click(self, value: str, read: Callable[[str], tuple[ChatMessage, Origin]], ack: Ack,
                    action: str, label: str, withdraw: Callable[[Origin, str], Awaitable[None]]) -> None:
        """A button (or option) clicked carrying `value`; `read(command)`: the click as the
        clicker's message; `action`, `label`: the button's name and what it showed; `withdraw`:
        its message loses its buttons, with a line saying who chose what (the format's `chose`)."""
        command = self.handler.buttons.command_of(value)
        message, origin = read(command or "")
        self.names.remember(message.user, message.user_name)
        if command is None:
            await ack()
            await self.asker.tell(origin, self._fmt.said("button_expired"))
            return
        click = await answering.clicked(self.handler, message, action, command, acked(ack),
                                        self._answered(origin))
        if click is None:  # never: Slack's acknowledgement is not refused
            return
        if click.retires:
            chooser = self.names.known(origin.user) or origin.user
            await withdraw(origin, self._fmt.said("chose", chooser, label))
        await self.deliver(click.answer, origin)

    async def form(self, metadata: str, read: Callable[[FormPlace], tuple[ChatMessage, Origin]],
                   values: Mapping[str, str], refuse: Callable[[Mapping[str, str]], Awaitable[None]],
                   ack: Ack) -> None:
        """A form submitted: `metadata`, what it carried back (`open_form`'s `place`); `read`:
        the submission at its place; `refuse(errors)`: the errors shown on its fields."""
        place = FormPlace.decode(self.handler.buttons.command_of(metadata) or "")
        if place is None:
            await refuse({"": self._fmt.said("form_expired")})
            return
        message, origin = read(place)
        self.names.remember(message.user, message.user_name)
        completed = await answering.submitted(self.handler, message, values, refuse)
        if completed is None:
            return
        message, ballot = completed
        answer = await answering.acknowledged(self.handler, message, acked(ack), ballot,
                                              self._answered(origin))
        await self.deliver(answer or [], origin)

    async def process(self, message: ChatMessage, origin: Origin, *, accepted: bool = False,
                      ballot: Ballot | None = None) -> list[Reply]:
        """Handle `message` and deliver its answer."""
        replies = await self.handle(message, origin, accepted=accepted, ballot=ballot)
        await self.deliver(replies, origin)
        return replies

    def _answered(self, origin: Origin) -> answering.Answered:
        """`handle`, for `answering.acknowledged`: a crash told at `origin`."""
        return lambda message, ballot, accepted: self.handle(message, origin, accepted=accepted,
                                                             ballot=ballot)

    async def handle(self, message: ChatMessage, origin: Origin, *, accepted: bool = False,
                     ballot: Ballot | None = None) -> list[Reply]:
        """The core's answer to one message, or to the `ballot` a gate's button or form stands for
        (`Handler.decide`: never read as a command); a crash is logged and told as one line."""
        try:
            return await answering.answer(self.handler, message, ballot, accepted=accepted)
        except Exception as exc:
            await answering.failure_told(exc, lambda text: self.asker.tell(origin, text),
                                         self._fmt.said("internal_error"), event_id=message.event_id)
            return []

    async def home_opened(self, user: str) -> None:
        """`user` looks at their home: what the core shows them, published (a crash logged)."""
        try:
            await self.home(user, self.handler.home_opened(self._fmt.name, user))
        except Exception:
            log.exception("home not published", extra={"action": f"{self._fmt.name}_home"})

    async def home(self, user: str, reply: Reply) -> None:
        """`reply`, a person's home (`Handler.home_opened`), rendered and published for them."""
        if self._publish is not None:
            names = await self.names.names_for(reply.data)
            await self._publish(user, render(reply, self._fmt, self.handler.redactor, names=names))

    # -- answers -------------------------------------------------------------------------------
    async def deliver(self, replies: list[Reply], origin: Origin) -> None:
        """Each answer where it was asked, in order; one the platform refused told to the asker."""
        for reply in replies:
            try:
                await self._answer(reply, origin)
            except CallFailed as exc:
                started = reply.how.starts_thread and reply.run_id
                # a run that started must not be started again: say so, never "try again"
                # (the service told the core no thread will come: it reports in the channel)
                told = self._fmt.said("started_unseen", reply.run_id, exc.error) if started else exc.user_text
                await self.asker.tell(origin, told)

    async def _answer(self, reply: Reply, origin: Origin) -> None:
        if reply.form is not None and origin.trigger is not None and await self.asker.open_form(
                reply.form, origin, self._form_place(reply.form, origin)):
            return  # the form asks; its text would only repeat it
        channel = reply.to.conversation or origin.channel
        if not channel:
            log.warning("reply without a conversation dropped",
                        extra={"action": f"{self._fmt.name}_send", "run_id": reply.run_id})
            return
        thread = reply.to.thread or origin.thread
        if reply.how.ephemeral:
            await self.asker.ephemeral(origin, channel, thread, await self.delivery.compose(reply, True))
            return
        ttl, uses = self._follow_up
        follow_up = (origin.follow_up, ttl, uses) if origin.follow_up else None
        await self.delivery.answer(reply.at(conversation=channel, thread=thread), channel,
                                   follow_up=follow_up)

    def _form_place(self, form: Form, origin: Origin) -> str:
        """What a form carries back: where it was asked for and the command it completes (a long
        one kept through the core, like a long button's)."""
        return self.handler.buttons.value(FormPlace(form.command, origin.channel, origin.thread).encode(),
                                          self._form_place_limit)
