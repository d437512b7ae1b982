"""What is done with a request that must be acknowledged before it is answered (a Discord
interaction, a Slack command, click or form), written once for every platform: the steps
`requests.py` (Slack's) and `interactions.py` (Discord's) share (#27).

    if await answering.run_refused(message.text, refusal, tell, channel): return  # nothing starts
    answer = await answering.acknowledged(handler, message, acknowledge, ballot)
    click = await answering.clicked(handler, message, action, command, acknowledge)
    if click is not None and click.retires: ...  # the clicked message loses its buttons
    completed = await answering.submitted(handler, message, values, refuse)  # a form's values
    await answering.failure_told(error, tell, text)  # a crash: logged, told in one line

The platform says how to acknowledge (`acknowledge() -> bool`: False when it refused, e.g. a
redelivered request answered already; Slack's never refuses), whether it can post where a run
would start (`refusal`), how it tells the asker and in which words; the handler records,
handles or decides.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.commands import replies
from core.commands.messages import ChatMessage, Form, Reply
from core.commands.offers import retires
from core.commands.preflight import starts_run
from core.commands.voting import button_ballot
from core.errors import InputValidationError

if TYPE_CHECKING:
    from core.commands.handler import Handler
    from core.engine.ballots import Ballot

log = logging.getLogger("baton.answering")

#: The platform's own way of answering a message once it was accepted (message, ballot,
#: accepted): Slack's catches a crash and tells it; None is `answer`.
Answered = Callable[[ChatMessage, "Ballot | None", bool], Awaitable[list[Reply]]]


@dataclass(frozen=True, slots=True)
class Click:
    """A click handled: the core's answer, the button's action and the command it ran."""

    answer: list[Reply]
    action: str
    command: str

    @property
    def retires(self) -> bool:
        """Whether the clicked message loses its buttons (`offers.retires`)."""
        return retires(self.action, self.command, self.answer)


def heard(message: ChatMessage) -> bool:
    """Whether a message reaches the core at all: a command, or a plain message in a thread, in a
    direct message or mentioning the bot. Ordinary channel chatter never does (the core decides
    whether what it hears addresses a gate)."""
    return message.is_command or bool(message.thread or message.direct or message.mentions_bot)


async def run_refused(text: str, refusal: Callable[[], Awaitable[str | None]],
                      tell: Callable[[str], Awaitable[object]], channel: str | None) -> bool:
    """Whether `text` would start a run where Baton cannot post (`refusal()`: why, from the
    platform; None: it can): then nothing starts and the asker alone is told why (`tell`)."""
    if not starts_run(text):
        return False
    refused = await refusal()
    if refused is None:
        return False
    log.info("run not started: cannot post in the channel",
             extra={"action": "preflight_refused", "channel": channel})
    await tell(refused)
    return True


async def failure_told(error: BaseException, tell: Callable[[str], Awaitable[object]], text: str, *,
                       event_id: str | None = None, untold: tuple[type[BaseException], ...] = ()) -> None:
    """A request that failed on its way (a bug, an answer the platform refused): logged with its
    traceback and told to the asker in one line (`tell`, the platform's `text`) rather than left
    unanswered; a telling the platform refuses too (`untold`) is logged."""
    log.error("handling a request failed: %s", error, exc_info=error,
              extra={"action": "command_failed", "event_id": event_id})
    try:
        await tell(text)
    except untold as exc:
        log.warning("the failure could not be told: %s", exc, extra={"action": "command_failed_untold"})


async def acknowledged(handler: Handler, message: ChatMessage, acknowledge: Callable[[], Awaitable[bool]],
                       ballot: Ballot | None = None, answered: Answered | None = None) -> list[Reply] | None:
    """The answer to `message` (or to the `ballot` it casts: `Handler.decide`, never read as a
    command), recorded before the platform is acknowledged (`late_events.py`). None when the
    acknowledgement was refused: answered or expired already, never done late."""
    accepted = handler.accept(message)
    if not await acknowledge():
        if accepted:
            handler.finish(message)
        return None
    if answered is not None:
        return await answered(message, ballot, accepted)
    return await answer(handler, message, ballot, accepted=accepted)


async def clicked(handler: Handler, message: ChatMessage, action: str, command: str,
                  acknowledge: Callable[[], Awaitable[bool]],
                  answered: Answered | None = None) -> Click | None:
    """A button (`action`) clicked for `command`: the clicker's ballot on a gate
    (`voting.button_ballot`: never read as a command), else their command; acknowledged and
    answered as `acknowledged` (None: the acknowledgement was refused)."""
    answer = await acknowledged(handler, message, acknowledge, button_ballot(command), answered)
    return None if answer is None else Click(answer, action, command)


async def answer(handler: Handler, message: ChatMessage, ballot: Ballot | None = None, *,
                 accepted: bool = False) -> list[Reply]:
    """The core's answer to `message`, or to the `ballot` it casts (a gate's button or form:
    `Handler.decide`, never read as a command). `accepted`: `Handler.accept` claimed it."""
    if ballot is not None:
        return await handler.decide(ballot, message, accepted=accepted)
    return await handler.handle(message, accepted=accepted)


async def submitted(handler: Handler, message: ChatMessage, values: Mapping[str, str],
                    refuse: Callable[[Mapping[str, str]], Awaitable[object]],
                    ) -> tuple[ChatMessage, Ballot | None] | None:
    """A form submitted for the command `message.text`, its `values` checked by the core: the
    message they complete (the submitter's, its text the command to handle) and the ballot of a
    gate's form; None when they are refused (`refuse(errors)`: field, or "", -> what is wrong)."""
    result = handler.asking.read_form(message, dict(values))
    if result.command is None:
        await refuse(result.errors)
        return None
    return dataclasses.replace(message, text=result.command), result.ballot


def form_refused(form: Form, errors: Mapping[str, str]) -> Reply:
    """A submitted form's values refused (`errors`: field name, or "", -> what is wrong), told to
    the person alone, with the button that opens the form again."""
    problem = InputValidationError(
        " · ".join(f"{name}: {line}" if name else line for name, line in errors.items()),
        hint="Nothing has run. Run… opens the form again.")
    return dataclasses.replace(replies.error(problem), buttons=(replies.form_button(form),))
