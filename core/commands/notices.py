"""Notices: a run's events told to the conversations that asked, beyond the one it reports in.

DESIGN.md, "Notifications". Who hears: the workflow's own `notify:` rules (their `when:` over
the run's inputs) and the conversations subscribed with `subscribe` (`subscribing.py`), never
the conversation the run already reports in.

How a notice travels (`core/delivery/outbox.py` carries it):
1. The unit of work that makes the event writes one `notice` row per place told, each under a
   unique key (run, event, place), decided there (`core/engine/notify.py`, `Notifier`): a
   run coming to rest (`Notifier.rest`, with the run's own `run_finished` row), a gate's
   first reminder firing (`gate_overdue`, `deadlines.py`), a run found queued too long
   (`queued_long`, `queue_watch.py`). The notices exist exactly when the event does: a crash
   right after the commit loses none, and nothing waits for the run's own reply to be sent.
2. The one exception: a run the store's admission cancels (`cancel_running`,
   `replace_queued`) is told by a `run_finished` row the store writes, without its notices;
   delivering that row writes them (`fan_out`, the same keys: a redelivery adds none).
3. A `notice` row is sent by a process serving its platform (`deliver`): one line (the run,
   the workflow, who started it, the failing step and its first error line, or the gate's
   question and who may decide, the run's thread and page), a gate's Approve / Reject buttons
   kept as an offer (`offers.py`), so deciding the gate withdraws them there too.

Noise: notices of one workflow to one place form a stream. The first in a quiet window is sent;
the next ones within `window` seconds of the last are folded into one `notice_digest` row due
at the end of the window they fall in (one per window, a unique key), which tells how many and
which runs. The stream's state lives in `platform_state` and every step of it is idempotent,
so a notice redelivered after a crash is sent or folded once.

A subscription rests on its creator's right to view the workflow's runs: a notice that finds
the right gone stops the subscription with a notice instead, audited.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import time
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from core.commands import authz, queueing, replies
from core.commands.messages import Outbox, Reply
from core.commands.offers import GateOffers, OffersStore
from core.commands.queue_watch import episode_of
from core.commands.queueing import QueueStore
from core.config import ANYONE, Access
from core.delivery.outbox import once_of
from core.engine.engine import Engine
from core.engine.events import ENGINE_ACTOR
from core.engine.notify import EVENT_OF, GATE_EVENTS, NOTICE, NOTICED
from core.errors import BatonError, WorkflowError, headline
from core.store.port import Events, Subscriptions, Transactions
from core.store.records import Delivery, GateStatus, Run, RunStatus
from core.workflows.notify_spec import DEFAULT_DIGEST

log = logging.getLogger("baton.notices")

DIGEST = "notice_digest"
KINDS = (NOTICE, DIGEST)
OVERDUE_AFTER = "gate_reminder"  # the outbox row whose delivery tells `gate_overdue` (deadlines.py)
ERROR_CHARS = 200  # of a failing step's first error line
DECIDERS = 10  # people a gate's notice names as those who may decide


def first_line(text: str | None) -> str:
    """An error's first line (`headline`), as a notice shows it."""
    return headline(text, ERROR_CHARS)


def thread_url(run: Run) -> str | None:
    """A link to the run's thread that works from any platform, where one can be made."""
    if run.platform == "slack" and run.conversation:
        stamp = f"/p{run.thread.replace('.', '')}" if run.thread else ""
        return f"https://slack.com/archives/{run.conversation}{stamp}"
    return None


class NoticesStore(OffersStore, QueueStore, Transactions, Protocol):
    """The store roles `Notices` uses."""

    @property
    def events(self) -> Events: ...
    @property
    def subscribers(self) -> Subscriptions: ...


class Notices:
    def __init__(self, *, store: NoticesStore, engine: Engine, access: Access, offers: GateOffers,
                 outbox_of: Callable[[str], Outbox | None], pages: bool = False,
                 window: float = DEFAULT_DIGEST, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._engine = engine
        self._access = access
        self._offers = offers
        self._outbox_of = outbox_of
        self.pages = pages
        self.window = window  # a subscription's digest window (a rule says its own)
        self.clock = clock
        # one lock per stream, kept while a delivery holds or awaits it: nothing to bound by hand
        self._locks: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock]
        self._locks = weakref.WeakValueDictionary()

    # -- 2. the rows of an event written before they were decided in its unit -----------------
    def fan_out(self, row: Delivery, run: Run | None = None) -> int:
        """`row` (a run's `run_finished` row, or a gate's first reminder: `gate_overdue`) tells
        an event whose unit did not write its notices (`NOTICED` unset: a run the store's
        admission cancelled, or a row from before notices were decided in the event's unit):
        write them now (`Notifier.write`, the same unique keys: a redelivery adds none). How
        many places it names; 0 for a row whose unit wrote them."""
        if row.payload.get(NOTICED):
            return 0
        overdue = row.kind == OVERDUE_AFTER
        event = "gate_overdue" if overdue else EVENT_OF.get(str(row.payload.get("status")))
        if event is None:
            return 0
        run = run if run is not None else self._store.runs.get_run(
            row.run_id
        )  # the caller's, when it read it
        node = row.payload.get("node")
        if overdue and self._store.gates.get_gate(run.id, str(node)).status is not GateStatus.WAITING:
            return 0
        if event == "gate_waiting":
            gate = self._engine.gates.waiting(run)
            if gate is None:  # decided since: its buttons would be stale
                return 0
            node = gate.node_id
        at = None if node is None else str(node)
        with self._store.transaction() as tx:
            return self._engine.notifier.write(tx, run, event, node=at, reason=row.payload.get("reason"))

    # -- 3. deliver ---------------------------------------------------------------------------
    def _send(self, platform: str) -> Outbox:
        send = self._outbox_of(platform)
        if send is None:
            raise BatonError(f"no outbox for {platform} in this process")
        return send

    async def deliver(self, row: Delivery) -> None:
        """Send one `notice` row at its place (or fold it into its stream's digest)."""
        send = self._send(row.platform)
        run = self._store.runs.get_run(row.run_id)
        p = row.payload
        event = str(p["event"])
        by = p.get("by")
        if by and not authz.may_view_workflow(self._access, str(by), run.workflow):
            await self._stop(row, send, str(by), str(p.get("source") or run.workflow))
            return
        gate = self._store.gates.get_gate(run.id, str(p["node"])) if event in GATE_EVENTS else None
        if gate is not None and gate.status is not GateStatus.WAITING:
            log.info("notice superseded: the gate was decided", extra={"action": "notice", "run_id": run.id})
            return
        if event == "queued_long" and (run.status is not RunStatus.QUEUED
                                       or p.get("episode") not in (None, episode_of(run))):
            log.info("notice superseded: the run left the queue",
                     extra={"action": "notice", "run_id": run.id})
            return
        if not await self._first(row, run.workflow):
            return
        reply = replies.notice(run, event, self._facts(row, run, event, p), page=self.pages)
        subscriber = str(by) if by and str(by).startswith(f"{row.platform}:") else None
        reply = reply.at(
            platform=row.platform, conversation=row.conversation,
            requester=subscriber,  # told directly if refused
        ).sent(once=once_of(row), replace_key=f"offer:notice:{row.id}" if event in GATE_EVENTS else None)
        await send(self._offers.offer(reply, platform=row.platform, conversation=row.conversation,
                                      thread=None))

    def _facts(self, row: Delivery, run: Run, event: str, p: dict[str, Any]) -> dict[str, Any]:
        node = str(p.get("node") or "")
        facts: dict[str, Any] = {"node": node, "thread_url": thread_url(run), "to": row.conversation}
        if run.platform == "discord" and run.thread:
            facts["run_conversation"] = run.thread  # a Discord thread is a channel of its own
        if event == "failed":
            summary = self._engine.summary(run)
            node = summary.failed_node or node
            failed = next((n for n in summary.nodes if n.node_id == node), None)
            error = failed.error if failed and failed.error else p.get("reason")
            facts.update(node=node, error=first_line(error))
        elif event == "needs_attention":
            facts["error"] = first_line(p.get("reason"))
        elif event in GATE_EVENTS:
            question = self._store.gates.get_gate(run.id, node).prompt
            facts.update(question=question, deciders=self._deciders(run, node))
        elif event == "cancelled":
            facts["by"] = run.status_by or ""
        elif event == "queued_long":
            facts["queue"] = queueing.waiting(self._store, run, self.clock())
        return facts

    def _deciders(self, run: Run, node: str) -> list[str]:
        try:
            listed = self._engine.catalog.get(run.workflow).node(node).approvers
        except (WorkflowError, KeyError):
            listed = None
        if listed is None:
            approve = self._access.approve
            listed = [*approve.get(run.workflow, ()), *approve.get(ANYONE, ())]
        people = sorted(authz.members(self._access, listed))  # a group's members, by id
        return ["anyone" if who == ANYONE else who for who in people][:DECIDERS]

    async def _stop(self, row: Delivery, send: Outbox, by: str, source: str) -> None:
        """The subscription's creator may no longer view the runs: stop it, with a notice there."""
        here = self._store.subscribers.subscriptions(platform=row.platform, conversation=row.conversation)
        mine = [s for s in here if s.workflow == source and s.created_by == by]
        if not mine:
            return  # stopped already (by an earlier notice, or unsubscribed)
        told = replies.subscription_stopped(row.platform, row.conversation, source, by)
        await send(told.at(platform=row.platform, conversation=row.conversation).sent(once=once_of(row)))
        self._store.subscribers.unsubscribe(row.platform, row.conversation, source, [s.event for s in mine])
        self._store.events.audit(actor=ENGINE_ACTOR, action="subscription_stopped", run_id=row.run_id,
                                 details={"platform": row.platform, "conversation": row.conversation,
                                          "workflow": source, "by": by, "events": [s.event for s in mine]})
        log.info("subscription stopped: %s may no longer view %s", by, source,
                 extra={"action": "subscription_stopped", "run_id": row.run_id})

    # -- noise control ------------------------------------------------------------------------
    def _lock(self, platform: str, stream: str) -> asyncio.Lock:
        """The stream's lock; the caller's reference keeps it (and whoever waits on it keeps it
        too), so an idle stream's lock is dropped and one in use never is."""
        lock = self._locks.get((platform, stream))
        if lock is None:
            lock = self._locks[(platform, stream)] = asyncio.Lock()
        return lock

    def _state(self, platform: str, stream: str) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(self._store.state.get_state(platform, stream) or "{}")
        state.setdefault("folds", {})
        return state

    async def _first(self, row: Delivery, workflow: str) -> bool:
        """Whether `row` is sent now: the first notice of its stream (this workflow, this
        place) after a quiet `window`. Otherwise it is folded into the digest of the window it
        falls in (that digest's row written once), and False. Idempotent per row."""
        window = float(row.payload.get("window") or self.window)
        stream = f"notify:{row.conversation}:{workflow}"
        async with self._lock(row.platform, stream):
            state = self._state(row.platform, stream)
            folds: dict[str, list[list[Any]]] = state["folds"]
            folded = next((due for due, items in folds.items() if any(i[0] == row.id for i in items)), None)
            if state.get("row") == row.id:
                return True  # this very notice was sent before (a redelivery)
            now = self.clock()
            last = state.get("last")
            if folded is None and (last is None or now - float(last) >= window):
                state.update(anchor=now, last=now, row=row.id)
                self._store.state.put_state(row.platform, stream, json.dumps(state))
                return True
            if folded is None:
                anchor = float(state["anchor"])
                due = anchor + max(1, math.ceil((now - anchor) / window)) * window
                folded = f"{due:.3f}"
                state["folds"].setdefault(folded, []).append([row.id, row.run_id, str(row.payload["event"])])
                state["last"] = now
                self._store.state.put_state(row.platform, stream, json.dumps(state))
            with self._store.transaction() as tx:  # once per window, however often written
                tx.enqueue_notice(row.run_id, DIGEST, platform=row.platform, conversation=row.conversation,
                                  payload={"stream": stream, "due": folded, "workflow": workflow,
                                           "window": window},
                                  dedupe=f"digest:{row.platform}:{stream}:{folded}", due_at=float(folded))
            log.info("notice folded into the digest due at %s", folded,
                     extra={"action": "notice_folded", "run_id": row.run_id})
            return False

    async def deliver_digest(self, row: Delivery) -> None:
        """A window's folded notices, in one message; the window is then forgotten."""
        send = self._send(row.platform)
        stream, due = str(row.payload["stream"]), str(row.payload["due"])
        async with self._lock(row.platform, stream):
            items = self._state(row.platform, stream)["folds"].get(due, [])
        if items:
            digest = replies.notice_digest(str(row.payload["workflow"]), float(row.payload["window"]),
                                           [(str(i[1]), str(i[2])) for i in items])
            digest = dataclasses.replace(digest, data={**digest.data, "to": row.conversation})
            digest = digest.at(platform=row.platform, conversation=row.conversation)
            await send(digest.sent(once=once_of(row)))
        async with self._lock(row.platform, stream):
            state = self._state(row.platform, stream)
            if state["folds"].pop(due, None) is not None:
                self._store.state.put_state(row.platform, stream, json.dumps(state))


def is_notice(reply: Reply) -> bool:
    """A reply addressed to a subscribed place rather than the run's (the console prints those
    of every console conversation, marked with theirs)."""
    return reply.kind in (NOTICE, DIGEST, "subscription_stopped")
