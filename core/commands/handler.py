"""`Handler.handle(message) -> list[Reply]`: the platform-neutral conversation.

For every incoming message: claim its event id (a duplicate gets `[]`; a claim whose
replica died before finishing it is re-claimed after `Store.claim_event`'s stale window),
reload the catalog,
then either a command (parse -> authorize -> act) or a plain reply that may decide an
approval gate (DESIGN.md "Natural-language approval"). Every `BatonError` becomes one error
reply (cause + next step); anything else is logged with its traceback and answered with a
generic one-line error. Commands, refusals and decisions are audited, with every secret
the runtime's redactor knows hidden in what is written.

Background replies (progress, completion, a gate waiting) go to the outbox each adapter
registered (`progress.ProgressReporter`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from core.commands import actions, authz, replies, subscribing
from core.commands.actions import Context
from core.commands.approval import DecisionKind, classify
from core.commands.asking import Asking
from core.commands.home import Homes, Publisher
from core.commands.input_text import InvalidInput, check_message, check_value
from core.commands.late_events import late_replies, message_of, payload_of
from core.commands.messages import ChatMessage, Outbox, Reply
from core.commands.model import SPECS
from core.commands.pages import RunPages
from core.commands.parser import as_command, closest_command, parse
from core.commands.progress import ProgressReporter
from core.commands.resolution import gates_addressed
from core.commands.scheduler import Scheduler
from core.config import Access
from core.delivery.buttons import ButtonCommands
from core.delivery.edits import Edits
from core.delivery.service import Compose, DeliveryService
from core.delivery.transport import Transport
from core.engine.ballots import Ballot
from core.engine.engine import Engine
from core.errors import BatonError, PermissionDenied, UsageError
from core.redaction import Redactor
from core.store.port import Store
from core.store.records import OpenEvent, Run
from core.workflows.catalog import Catalog
from core.workflows.notify_spec import DEFAULT_DIGEST

log = logging.getLogger("baton.handler")
ACTIONS = {**actions.ACTIONS, **subscribing.ACTIONS}  # what each parsed command does
_AUDIT_TEXT = 500  # characters of the command text kept in the audit trail
#: Seconds a stopping chat adapter waits for the progress edits and replies still being sent.
CLOSE_GRACE = 5.0


class Handler:
    def __init__(self, *, store: Store, engine: Engine, catalog: Catalog, access: Access,
                 redactor: Redactor, event_stale_after: float = 60.0, pages: RunPages | None = None,
                 clock: Callable[[], float] = time.time, notify_window: float = DEFAULT_DIGEST,
                 outbox_lease_seconds: float = 60.0) -> None:
        self.store = store
        self.clock = clock  # when votes are cast (a gate's escalation), injectable for tests
        #: personal links to run pages (`open`, `runs --open`); None: BATON_WEB_PORT is off
        self.pages = pages
        #: the runtime's one redactor: hides secrets in the audit trail this handler writes
        self.redactor = redactor
        #: seconds after which an event claimed but never finished (its replica died) is
        #: handled again when the platform redelivers it (BATON_EVENT_STALE_SECONDS in `build_baton`)
        self.event_stale_after = event_stale_after
        self.engine = engine
        self.catalog = catalog
        self.access = access
        #: the one edit-in-place component every adapter shares (pace, where keyed messages
        #: are, the size policy, where a run reports after a fallback)
        self.edits = Edits(remember=self.remember, recall=self.recall)
        #: the one store of long button commands every adapter shares
        self.buttons = ButtonCommands(store.blobs.put_blob, store.blobs.get_blob)
        self.progress = ProgressReporter(store=store, engine=engine, edits=self.edits,
                                         pages=pages is not None, access=access, notify_window=notify_window,
                                         outbox_lease_seconds=outbox_lease_seconds, clock=clock)
        #: people's homes (Slack's App Home), kept current on the engine's events
        self.homes = Homes(store=store, catalog=catalog, access=access, pages=pages)
        engine.subscribe(self.homes.on_event)
        #: read-only questions (autocomplete, forms) adapters ask before or instead of `handle`
        self.asking = Asking(store=store, catalog=catalog, access=access, gates=engine.gates)
        #: schedules: fired by a loop of the bot (`bot/schedule_loop.py`) or `schedule run`,
        #: their runs announced (a thread each) through this handler's progress reporter
        self.scheduler = Scheduler(store=store, engine=engine, catalog=catalog, access=access,
                                   replica=engine.owner, progress=self.progress, clock=clock)

    def register_outbox(self, platform: str, outbox: Outbox, *, threads: bool = False) -> None:
        """Background replies of `platform` go to `outbox`. `threads=True`: the adapter opens a
        thread for each run a command starts outside one (`Reply.how.starts_thread`) and reports it
        with `attach_thread`; until then that run's background replies wait (bounded)."""
        self.progress.register_outbox(platform, outbox, threads=threads)

    def register_transport(self, transport: Transport, *, threads: bool = False,
                           compose: Compose | None = None) -> DeliveryService:
        """`transport`'s platform is delivered by one `DeliveryService` (places, edits in place,
        fallbacks, threads): its background replies and the answers the adapter hands it.
        `compose`: what the core makes of a reply for the platform (`core.commands.text_messages`)."""
        delivery = self.delivery_service(transport, compose)
        self.register_outbox(transport.platform, delivery.send, threads=threads)
        return delivery

    def delivery_service(self, transport: Transport, compose: Compose | None = None) -> DeliveryService:
        """A `DeliveryService` for `transport` sharing this handler's edits and threads (its
        outbox registered by the caller)."""
        if compose is None:
            return DeliveryService(transport, self.edits, self.attach_thread)
        return DeliveryService(transport, self.edits, self.attach_thread, compose)

    async def attach_thread(self, run_id: str, thread: str | None) -> None:
        """The `starts_thread` reply of `run_id` was posted and opened `thread`. None: it was
        posted but no thread could be opened (a DM); the run is reported where it was asked."""
        if thread is not None:
            self.store.runs.set_thread(run_id, thread)
        await self.progress.thread_attached(run_id)

    def remember(self, platform: str, key: str, value: str) -> None:
        """Keep a small value an adapter needs after a restart (e.g. the id of the message that
        shows a run's progress), in the store."""
        self.store.state.put_state(platform, key, value)

    def recall(self, platform: str, key: str) -> str | None:
        """What `remember` kept under that key, also by an earlier process; None if nothing."""
        return self.store.state.get_state(platform, key)

    def register_home(self, platform: str, publish: Publisher) -> None:
        """`platform` shows people a home (`home.py`): `publish(user, reply)` shows them its new
        state whenever a run or gate it lists changes."""
        self.homes.register(platform, publish)

    def home_opened(self, platform: str, user: str) -> Reply:
        """`user` (the platform's id) looks at their home: what to show them, kept current."""
        return self.homes.opened(platform, user)

    async def announce(self, reply: Reply) -> bool:
        """Post `reply` where its `platform`, `conversation` and `thread` say, through that
        platform's outbox (a decision taken on a run's page is told in the run's thread);
        False when the platform registered no outbox in this process. A reply offering a gate's
        buttons (a reminder, an escalation, in a thread or directly) is kept as an offer first,
        so that deciding the gate withdraws them there too."""
        reply = self.progress.offers.offer(reply, platform=reply.to.platform or "",
                                           conversation=reply.to.conversation, thread=reply.to.thread)
        return await self.progress.post(reply)

    async def drain(self) -> None:
        """Wait until every background reply produced so far was handed to its outbox."""
        await self.progress.drain()
        await self.homes.drain()

    async def wind_down(self, delivery: DeliveryService, *, close: bool = True,
                        grace: float = CLOSE_GRACE) -> None:
        """A chat adapter stops taking input: the progress edits waiting for their turn go now,
        background replies are handed over (within `grace` seconds) and sent. `close`: then
        `delivery` takes no more (the outbox keeps them for the next process); else it still
        sends (Slack's Web API outlives its input)."""
        self.progress.hurry()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.drain(), grace)
        await (delivery.aclose() if close else delivery.idle())

    def accept(self, message: ChatMessage) -> bool:
        """Record a command before the platform is acknowledged (`late_events.py`): its event
        id claimed with the message itself, so that a process dying between the acknowledgement
        and the end of the handling leaves it for the next one. False: a duplicate (already
        handled, or being handled); the adapter acknowledges it and does nothing more. A message
        refused at the edge (`check_message`) is not recorded: `handle` answers it."""
        try:
            check_message(message)
        except InvalidInput:
            return True
        try:
            return self.store.events.claim_event(message.platform, message.event_id,
                                                 stale_after=self.event_stale_after,
                                                 payload=payload_of(message))
        except BatonError as exc:  # the store is unreachable: `handle` answers with the error
            log.warning("event not recorded: %s", exc.message, extra={"action": "accept_event",
                                                                     "event_id": message.event_id})
            return True

    def finish(self, message: ChatMessage) -> None:
        """An accepted message the adapter answered itself (a refusal before handling): done."""
        try:
            self.store.events.finish_event(message.platform, message.event_id)
        except BatonError as exc:
            log.warning("could not mark the event handled: %s", exc.message,
                        extra={"action": "finish_event", "event_id": message.event_id})

    async def handle_late(self, event: OpenEvent) -> list[Reply]:
        """A recorded command whose process died before it was handled (re-claimed by the
        caller): handled now, and its replies readdressed to where it was typed, after a word
        that it comes late (the platform's own answer, an interaction's, is long gone)."""
        message = message_of(event.payload)
        answer = await self.handle(message, accepted=True)
        return late_replies(message, event.at, answer)

    async def handle(self, message: ChatMessage, *, accepted: bool = False) -> list[Reply]:
        """The answer to one message. `accepted`: `accept` already claimed its event."""
        try:  # NUL, lone surrogates, invalid UTF-8: one line back, nothing claimed or stored
            check_message(message)
        except InvalidInput as exc:
            log.info("input refused: %s", exc.message, extra={"action": "input_refused"})
            return [replies.error(exc)]
        if not message.is_command and (message.direct or message.mentions_bot):
            command = self._typed_command(message.text)  # `status`, `help`… written to the bot
            if command is not None:
                message = dataclasses.replace(message, text=command, is_command=True)
        thread_runs: list[Run] | None = None
        if not (message.is_command or message.direct or message.mentions_bot):
            # chatter: it counts only in a run's thread, and elsewhere leaves nothing behind
            thread_runs = self._thread_runs(message)
            if not thread_runs:
                return []
        if not message.is_command or message.thread is not None:
            return await self._handle(message, thread_runs, accepted=accepted)
        async with self.progress.starting(message.platform, message.conversation) as answered:
            answered.extend(await self._handle(message, accepted=accepted))
            return list(answered)

    async def decide(self, ballot: Ballot, origin: ChatMessage, *, accepted: bool = False) -> list[Reply]:
        """The answer to a ballot cast without command text: on the run's page, with a gate
        message's button, in a gate's form, by an agent. `origin` says who cast it and where
        (its platform and user, or `principal`, are the voter: the ballot's `user` and `at`
        are set from them and the handler's clock), and its event id makes a redelivery a
        duplicate (`accepted`: `accept` claimed it already). Authorized, decided and audited
        like a typed `approve` / `reject`; nothing in it is parsed as a command."""
        uid = origin.principal or authz.user_id(origin.platform, origin.user)
        ballot = dataclasses.replace(ballot, user=uid, at=self.clock())
        said = "\n".join([ballot.comment, *(v for v in ballot.texts.values() if isinstance(v, str))])
        message = dataclasses.replace(origin, text=said, is_command=True)
        try:  # NUL, lone surrogates, invalid UTF-8 in a comment or a value (an agent's JSON too)
            check_message(message)
            check_value(list(ballot.texts.values()), "A value")
        except InvalidInput as exc:
            log.info("input refused: %s", exc.message, extra={"action": "input_refused"})
            return [replies.error(exc)]

        async def act(ctx: Context) -> list[Reply]:
            verb = "reject" if ballot.rejects else "approve"
            details: dict[str, object] = {"command": verb, "source": ballot.source.value,
                                          "choice": ballot.choice, "text": self._text(ballot.comment)}
            self._audit(ctx, "command", ballot.run, details, defer=True)
            return await actions.vote_on(ctx, ballot)

        if message.thread is not None:
            return await self._handle(message, accepted=accepted, act=act)
        async with self.progress.starting(message.platform, message.conversation) as answered:
            answered.extend(await self._handle(message, accepted=accepted, act=act))
            return list(answered)

    def _typed_command(self, text: str) -> str | None:
        """The command a message to the bot spells (`parser.as_command`), unless it starts
        with `approve` / `reject` and what follows names no run: "reject it, too risky" is a
        reply to the waiting gate."""
        command = as_command(text)
        words = [w for w in (command or "").split() if w.partition("=")[0] != "--force"]
        if len(words) > 1 and words[0].lower() in ("approve", "reject"):
            named = actions.run_word(words[1])  # "approve a small change": no run, a reply
            try:
                self.store.runs.find_run(named or "")
            except BatonError:
                return None
        return command

    def _thread_runs(self, message: ChatMessage) -> list[Run]:
        if message.thread is None:
            return []
        try:
            return self.store.runs.runs_in_thread(message.platform, message.conversation, message.thread)
        except BatonError as exc:  # the store is unreachable: nothing to decide now
            log.warning("thread not looked up: %s", exc.message, extra={"action": "thread_runs"})
            return []

    async def _handle(
        self, message: ChatMessage, thread_runs: list[Run] | None = None, *, accepted: bool = False,
        act: Callable[[Context], Awaitable[list[Reply]]] | None = None,
    ) -> list[Reply]:
        uid = message.principal or authz.user_id(message.platform, message.user)
        ctx = Context(self.store, self.engine, self.catalog, self.access, message, uid, self.redactor,
                      announced=self.progress.announced, pages=self.pages, thread_runs=thread_runs,
                      clock=self.clock, restate=self.progress.offers.restate, scheduler=self.scheduler)
        try:
            claimed = accepted or self.store.events.claim_event(message.platform, message.event_id,
                                                                stale_after=self.event_stale_after)
        except BatonError as exc:  # the store is unreachable: nothing was claimed
            return [replies.error(exc)]
        if not claimed:
            log.info("duplicate event ignored",
                     extra={"action": "duplicate", "event_id": message.event_id})
            return []
        answer = [  # a reply offering a gate's buttons is kept, to withdraw them once it is decided
            self.progress.offers.offer(r, platform=message.platform, conversation=message.conversation,
                                       thread=message.thread)
            for r in await self._answer(ctx, act)  # every Exception becomes a reply in there
        ]
        # Handled (an error reply included): every redelivery is a duplicate from now on. A
        # task cancelled mid-way (shutdown) leaves the claim unfinished, so it is re-claimed.
        try:
            with self.store.transaction() as tx:  # the message's audit row goes with it: one change
                if ctx.pending_audit is not None:
                    tx.audit(**ctx.pending_audit)
                tx.finish_event(message.platform, message.event_id)
        except BatonError as exc:
            log.warning("could not mark the event handled: %s", exc.message,
                        extra={"action": "finish_event", "event_id": message.event_id})
        return answer

    async def _answer(self, ctx: Context, act: Callable[[Context], Awaitable[list[Reply]]] | None = None
                      ) -> list[Reply]:
        message = ctx.message
        try:
            self.catalog.reload()
            if act is not None:  # a ballot (`decide`)
                return await act(ctx)
            if message.is_command:
                return await self._command(ctx)
            return await self._plain(ctx)
        except PermissionDenied as exc:
            details: dict[str, object] = {"text": self._text(message.text), "reason": exc.message}
            self._audit(ctx, "refused", ctx.run_ref, details)
            return [replies.error(exc, self._run_named(ctx))]
        except BatonError as exc:
            run = self._run_named(ctx)
            extra: dict[str, object] = {"action": "command_error", "run_id": run.id if run else None,
                                        "error": type(exc).__name__}
            log.info("answered with an error: %s", exc.message, extra=extra)
            return [replies.error(exc, run)]
        except Exception:
            log.exception("message failed", extra={"action": "handle", "event_id": message.event_id})
            return [replies.unexpected()]

    async def _command(self, ctx: Context) -> list[Reply]:
        text = ctx.message.text
        try:
            command = parse(text)
        except BatonError as exc:
            self._audit(ctx, "command", None, {"text": self._text(text), "error": exc.message})
            raise
        name = type(command).__name__.removesuffix("Command").lower()
        ctx.run_ref = actions.run_of(command)
        self._audit(ctx, "command", ctx.run_ref, {"command": name, "text": self._text(text)}, defer=True)
        answer = await ACTIONS[type(command)](ctx, command)
        started = next((r.run_id for r in answer if r.kind == "run_started"), None)
        if ctx.pending_audit is not None and started is not None:
            ctx.pending_audit["run_id"] = started  # `audit <run>` shows the command that started it
        return answer

    async def _plain(self, ctx: Context) -> list[Reply]:
        """A plain reply: it counts only where it clearly addresses a waiting gate."""
        msg = ctx.message
        gates = self.store.gates.waiting_gates(platform=msg.platform, conversation=msg.conversation)
        thread_runs = ctx.thread_runs if ctx.thread_runs is not None else self._thread_runs(msg)
        addressed = gates_addressed(
            gates, thread_runs={r.id for r in thread_runs}, direct=msg.direct, mentions_bot=msg.mentions_bot
        )
        decision = classify(msg.text)
        if not addressed:
            return self._no_gate(ctx, decision.kind, thread_runs)
        self._audit(ctx, "nl_decision", addressed[0][0].id if len(addressed) == 1 else None,
                    {"text": self._text(msg.text), "decision": str(decision.kind),
                     "gates": [r.id for r, _ in addressed]}, defer=True)
        if len(addressed) > 1:
            return [replies.which_gate(addressed, str(decision.kind))]
        run, gate = addressed[0]
        if decision.kind is DecisionKind.UNCLEAR:
            return [replies.approval_question(run, gate)]
        return await actions.decide(ctx, run, decision.kind is DecisionKind.APPROVE, decision.comment)

    def _no_gate(self, ctx: Context, kind: DecisionKind, thread_runs: list[Run]) -> list[Reply]:
        msg = ctx.message
        if kind is not DecisionKind.UNCLEAR:
            for run in thread_runs:
                gate = self.engine.gates.decided(run)
                if gate is not None:  # a late "lgtm" in the thread of a decided gate
                    return [replies.error(self.engine.gates.refusal(run, gate), run)]
        if msg.direct or msg.mentions_bot:
            word = msg.text.split(maxsplit=1)[0] if msg.text.strip() else ""
            meant = closest_command(word) if kind is DecisionKind.UNCLEAR else None
            if meant is not None:  # "runn hello" typed where commands need no prefix
                return [replies.error(UsageError(
                    f"`{word}` is not a command; did you mean `{meant}`?",
                    hint=f"Type `/workflow {SPECS[meant].usage}`, or `/workflow help` for all commands."))]
            return [replies.no_gate_hint()]
        return []  # ordinary chatter: never an approval, never an answer

    def _text(self, text: str) -> str:
        """What the audit keeps of a message: redacted first, so a cut never halves a secret."""
        return self.redactor.redact(text)[:_AUDIT_TEXT]

    def _run_named(self, ctx: Context) -> Run | None:
        """The run the failed message was about, so the error reply can carry its id."""
        if ctx.run_ref is None:
            return None
        try:
            return ctx.find(ctx.run_ref)
        except BatonError:
            return None

    def _audit(self, ctx: Context, action: str, run_ref: str | None, details: dict[str, object],
               *, defer: bool = False) -> None:
        """`defer`: written when the message is marked handled, in the same round trip (so after
        the rows the action itself writes, and once even when the event is redelivered)."""
        run_id = None
        if run_ref is not None:
            try:
                run_id = ctx.lookup(run_ref).id  # remembered: the action looks it up again
            except BatonError:
                details = {**details, "run": run_ref}
        row: dict[str, Any] = {"actor": ctx.uid, "action": action, "run_id": run_id, "details": {
            "platform": ctx.message.platform, "conversation": ctx.message.conversation,
            "event_id": ctx.message.event_id, **self.redactor.redact_value(details)}}
        if ctx.pending_audit is not None:  # an earlier row of this message stays first
            self.store.events.audit(**ctx.pending_audit)
            ctx.pending_audit = None
        if defer:
            ctx.pending_audit = row
        else:
            self.store.events.audit(**row)
