"""A platform's requests that are answered in a response of their own (a Discord interaction:
a command, a button or menu clicked, a form submitted), answered the same way whatever the
platform: the policy its adapter used to write (#27). The adapter's side is `Asked`, one
request: it acknowledges, opens a form, tells the asker alone, withdraws the clicked buttons,
and names the places of the request's responses, which the delivery service posts at.

    interactions = Interactions(handler, delivery, FORMAT)
    await interactions.command(asked, "run notes")      # `/workflow run notes`
    click = await interactions.click(asked, custom_id)  # a button: None when answered already
    await interactions.clicked(asked, click, withdraw=True)
    await interactions.form(asked, form, values)        # a form's modal submitted

- A `run` first asks whether Baton can post where it was typed (`Asked.refusal`): if not,
  nothing starts and the asker alone is told.
- A `run` missing required inputs, or an approval of a gate with a form, opens the form as the
  request's first answer when the platform can ask every required field (`Asked.form_fields`);
  else the core answers (its text says what to type). Each form opened has an id of its own
  (`FORM_PREFIX` + random: forms open at once stay apart), known for `FORM_OPEN` seconds and
  `FORM_MEMORY` more (`is_open`: a submission of one no longer known is told stale). A form's
  values refused are told to the asker alone, with the button that opens it again.
- A click carries its command (`core.delivery.button_refs`): a malformed one is told stale, a
  reference nobody kept is answered by the core. A refusal (an error) goes to the clicker alone
  and leaves the buttons; a click whose answer retires them (`offers.retires`) withdraws them.
- The answer (`answer`): the first public reply replaces the deferred response when it is still
  open (`original`), the rest follow it (`public`); an ephemeral reply goes to the asker alone
  (`private`: the deferral, public, is deleted first); a reply aimed at another thread goes
  there, and is shown here without its buttons when it was typed here. A reply starting a run
  keeps the request's follow-up as that run's (a fallback place, `follow_up_ttl` seconds); when
  its answer fails (`Asked.errors`), its first message goes to the channel, where its thread
  opens. A deferred response nothing replaced is deleted: no "thinking…" stays behind.

The steps Slack's `requests.py` takes too (the preflight refusal, a click, a form's values, a
failure told) are `answering.py`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from core.commands import answering, replies
from core.commands.controls import Control
from core.commands.messages import ChatMessage, Form, Reply
from core.commands.replies import FORM_ACTION
from core.commands.voting import button_ballot
from core.delivery.button_refs import command_of, parse
from core.delivery.service import DeliveryService
from core.render import Format, render

if TYPE_CHECKING:
    from core.commands.handler import Handler
    from core.engine.ballots import Ballot

log = logging.getLogger("baton.interactions")

FORM_PREFIX = "baton-form:"
FORM_OPEN = 900.0  # seconds a form waits for its answer
#: Seconds an opened form stays known after that (a late submission of it is the platform's to
#: drop, not a closed form to tell about).
FORM_MEMORY = 60.0


class Asked(Protocol):
    """One request, on the platform's side. `original`, `public`, `private`: the places of its
    responses (the deferred one then its follow-ups, its follow-ups, the asker's alone);
    `follow_up`: its way back, kept as a run's; `channel`: where it was asked (None: unknown);
    `refused`: the platform refusing a response (answered already, expired); `errors`: the
    platform's failures of an answer."""

    original: Any
    public: Any
    private: Any
    follow_up: Any
    follow_up_ttl: float
    form_fields: int  # the fields a form shown by the platform holds
    channel: str | None
    refused: tuple[type[BaseException], ...]
    errors: tuple[type[BaseException], ...]

    def message(self, text: str) -> ChatMessage:
        """The request as the asker's command `text`."""
        ...

    async def refusal(self) -> str | None:
        """Why Baton cannot post where the request was made (None: it can)."""
        ...

    async def open_form(self, form: Form, form_id: str, submit: Any) -> None:
        """Open `form` (as `form_id`, for `FORM_OPEN` seconds) as the first answer;
        `submit(asked, values)` when it is sent."""
        ...

    async def acknowledge(self, *, thinking: bool) -> None:
        """Acknowledge in time (`thinking`: a deferred response shows)."""
        ...

    async def tell(self, text: str, controls: tuple[Control, ...] | None = None) -> None:
        """The first answer, to the asker alone (`controls`: with these buttons)."""
        ...

    async def replace(self, text: str) -> None:
        """Tell the asker `text` in the request's response, answered already or not."""
        ...

    async def delete_original(self) -> None: ...

    async def withdraw(self, custom_id: str) -> None:
        """The clicked message's buttons disabled, `custom_id`'s naming who chose it."""
        ...


class Interactions:
    def __init__(self, handler: Handler, delivery: DeliveryService, fmt: Format) -> None:
        self.handler = handler
        self.delivery = delivery
        self.fmt = fmt
        self._open_forms: set[str] = set()  # the forms this process opened that may be submitted

    def text(self, reply: Reply) -> str:
        return "\n".join(render(reply, self.fmt, self.handler.redactor))

    # -- requests --------------------------------------------------------------------------
    async def command(self, asked: Asked, command: str, ballot: Ballot | None = None) -> None:
        """`command` as the asker's, or the `ballot` a gate's form completed (`Handler.decide`:
        never read as a command; `command` is then the form's own, recorded for a late replay)."""
        if await answering.run_refused(command, asked.refusal, asked.tell, asked.channel):
            return  # before a run starts here: Baton could not post its story
        if ballot is None and await self._open_form(asked, command):
            return  # its form is the answer
        answer = await answering.acknowledged(self.handler, asked.message(command),
                                              lambda: self._acknowledge(asked, thinking=True), ballot)
        if answer is not None:
            await self.answer(asked, answer, open_original=True)

    async def _open_form(self, asked: Asked, command: str, ballot: Ballot | None = None) -> bool:
        form = self.handler.asking.form_for(asked.message(command), ballot)
        if form is None or sum(1 for f in form.fields if f.required) > asked.form_fields:
            return False  # the core answers (a form that needs more says what to type)
        form_id = FORM_PREFIX + secrets.token_hex(12)
        self._open_forms.add(form_id)
        asyncio.get_running_loop().call_later(FORM_OPEN + FORM_MEMORY, self._open_forms.discard, form_id)
        try:
            await asked.open_form(form, form_id, lambda done, values: self.form(done, form, values))
        except asked.refused as exc:
            log.info("form not opened: %s", exc, extra={"action": "form_skipped"})
            return False
        return True

    async def _acknowledge(self, asked: Asked, *, thinking: bool) -> bool:
        """False when the platform refuses: a redelivered request that was answered already (or
        one that expired), whose work must not be done twice."""
        try:
            await asked.acknowledge(thinking=thinking)
        except asked.refused as exc:
            log.info("interaction not acknowledged: %s", exc, extra={"action": "interaction_skipped"})
            return False
        return True

    def is_open(self, form_id: str) -> bool:
        """Whether a form submitted as `form_id` is one this process opened and still knows."""
        return form_id in self._open_forms

    async def form(self, asked: Asked, form: Form, values: Mapping[str, str]) -> None:
        """A form submitted: its values checked, then the command they complete handled as the
        submitter's; wrong values are told to them alone."""
        async def refuse(errors: Mapping[str, str]) -> None:
            error = answering.form_refused(form, errors)
            await asked.tell(self.text(error), (await self.delivery.compose(error, False)).controls)

        completed = await answering.submitted(self.handler, asked.message(form.command), values, refuse)
        if completed is not None:
            message, ballot = completed
            await self.command(asked, message.text, ballot)

    async def click(self, asked: Asked, custom_id: str) -> answering.Click | None:
        """Handle the command `custom_id` carries as the clicker's; None when it was refused
        (told to them alone), answered with a form, or could not be acknowledged."""
        ref = parse(custom_id)
        if ref is None:  # ours but malformed: nothing to run, still answered
            await self.stale(asked, form=False)
            return None
        try:
            command = command_of(ref, self._kept)
        except KeyError:
            command = f"{ref.action} {ref.digest}"  # the core answers an unknown reference
        # "Run…", or Approve on a gate with a form: the form opened; the message keeps its button
        if ref.action in (FORM_ACTION, "approve") and await self._open_form(
                asked, command, button_ballot(command)):
            return None
        click = await answering.clicked(self.handler, asked.message(command), ref.action, command,
                                        lambda: self._acknowledge(asked, thinking=False))
        if click is None:
            return None
        refusals = [r.sent(ephemeral=True) for r in click.answer if r.is_error]
        if refusals:
            await self.answer(asked, refusals, open_original=False)
            return None
        return click

    async def clicked(self, asked: Asked, click: answering.Click, custom_id: str, *, withdraw: bool) -> None:
        """`click`'s answer posted; its buttons withdrawn first when it retires them (`withdraw`:
        a button's message; a menu decides gates, whose messages the core edits)."""
        if withdraw and click.retires:
            await asked.withdraw(custom_id)
        await self.answer(asked, click.answer, open_original=False)

    def _kept(self, digest: str) -> bytes:
        """A long button command from the core's store (KeyError: it kept none under `digest`)."""
        command = self.handler.buttons.command(digest)
        if command is None:
            raise KeyError(digest)
        return command.encode("utf-8")

    async def stale(self, asked: Asked, *, form: bool) -> None:
        """A control or form Baton cannot act on: told to the asker alone, if it still can be."""
        try:
            await asked.tell(self.text(replies.stale_control(form)))
        except asked.refused as exc:
            log.info("interaction not answered: %s", exc, extra={"action": "interaction_skipped"})

    async def failed(self, asked: Asked, error: BaseException) -> None:
        """A request failed on its way (an answer the platform refused, a bug): logged, and told
        to the asker in one line rather than leave "thinking…" behind."""
        await answering.failure_told(error, asked.replace, self.text(replies.unexpected()),
                                     untold=asked.refused)

    async def said(self, message: ChatMessage, here: str) -> None:
        """A plain message (a reply in a run's thread), if it reaches the core at all (`heard`:
        ordinary channel chatter never does): its answer in its run's thread, else `here`."""
        if answering.heard(message):
            for reply in await self.handler.handle(message):
                await self.delivery.answer(reply, reply.to.thread or here)

    # -- the answer ------------------------------------------------------------------------------
    async def answer(self, asked: Asked, answer: Sequence[Reply], *, open_original: bool) -> None:
        """Replies to a request, where it was asked (see the module's docstring)."""
        for reply in answer:
            follow_up = (asked.follow_up, asked.follow_up_ttl, None)
            if reply.to.thread is not None and reply.to.thread != asked.channel:
                await self.delivery.answer(reply, reply.to.thread, follow_up=follow_up)  # the run's thread
                if open_original and not reply.how.ephemeral:  # typed here: answered here too
                    shown = dataclasses.replace(reply, buttons=(), menus=()).sent(starts_thread=False)
                    await self.delivery.answer(shown, asked.original)
                    open_original = False
            elif reply.how.ephemeral:
                if open_original:  # a deferral is public; only a new follow-up can be private
                    await asked.delete_original()
                    open_original = False
                await self.delivery.answer(reply, asked.private, follow_up=follow_up)
            else:
                answering, open_original = open_original, False
                starts = bool(reply.how.starts_thread and reply.run_id and asked.channel)
                try:
                    await self.delivery.answer(reply, asked.original if answering else asked.public,
                                               follow_up=follow_up, thread_or_none=not starts)
                except asked.errors as exc:
                    if not starts:
                        raise
                    # the run started: its first message goes to the channel, its thread opens there
                    log.warning("the answer to a command that started a run failed (%s); posting it in "
                                "the channel", exc, extra={"action": "answer_failed", "run_id": reply.run_id})
                    await self.delivery.answer(reply, asked.channel or "0")  # no thread if this fails too
                    if answering:  # no "thinking…" left behind
                        with contextlib.suppress(*asked.errors):
                            await asked.delete_original()
        if open_original:
            await asked.delete_original()
