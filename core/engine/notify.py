"""Which places hear of a run's event, decided in the unit of work that makes the event.

DESIGN.md, "Notifications". When a run comes to rest (failed, completed, paused at a gate,
needs_attention, cancelled), when a gate's first reminder fires (`gate_overdue`) and when a
run has waited in its concurrency queue too long (`queued_long`), the unit of work that
writes that change also writes one `notice` outbox row per place told (`rest`, `write`):

- the workflow's own `notify:` rules naming the event whose `when:` holds over the run's
  inputs (a `when:` that cannot be evaluated is never guessed: that rule is not told);
- the conversations subscribed to the event of this workflow (or of every workflow, `*`);
- never the conversation the run already reports in (no echo).

Each row has the unique key `notice:<run>:<event>[:<gate>]:<platform>:<conversation>`, so a
place hears of one event of one run once, however often the event is written. A notice row
therefore exists exactly when its event does: a crash right after the commit, before any
delivery, loses none. Sending a row, noise control and authorization are the delivery's
business (`core/commands/notices.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.engine.events import tell_rest
from core.errors import BatonError, WorkflowError
from core.store.port import Subscriptions
from core.store.records import Run, RunStatus
from core.store.unit_of_work import UnitOfWork
from core.workflows.catalog import Catalog
from core.workflows.notify_spec import parse_address

log = logging.getLogger("baton.notices")

NOTICE = "notice"  # the outbox kind of a notice row
#: the event a run coming to rest at a status tells
EVENT_OF = {"failed": "failed", "needs_attention": "needs_attention", "paused": "gate_waiting",
            "completed": "completed", "cancelled": "cancelled"}
GATE_EVENTS = ("gate_waiting", "gate_overdue")
#: set in a run's `run_finished` row whose unit wrote its notices (a row without it, written by
#: the store's own admission cancelling a run, has its notices written when it is delivered)
NOTICED = "noticed"


@dataclass(frozen=True, slots=True)
class Target:
    """A place told about the event, and on what: a subscription (`source`: its workflow or `*`,
    `by`: its creator) or the workflow's own rule (`by`: None). `window`: the rule's digest
    window; None for a subscription (the deliverer's setting)."""

    platform: str
    conversation: str
    source: str
    by: str | None
    window: float | None


def notice_key(run_id: str, event: str, node: str | None, platform: str, conversation: str,
               episode: str | None = None) -> str:
    """One notice per (run, event, place): a gate's events per gate, `queued_long` per queue
    episode (the time the run joined the queue: a run queued again may be told again)."""
    told = f"{event}:{node}" if event in GATE_EVENTS else event
    if episode is not None:
        told = f"{told}@{episode}"
    return f"notice:{run_id}:{told}:{platform}:{conversation}"


class Notifier:
    """Writes an event's notice rows into the caller's unit of work (see the module docstring)."""

    def __init__(
        self, *, subscribers: Subscriptions, catalog: Catalog, args_of: Callable[[Run], dict[str, Any]]
    ) -> None:
        self._subscribers = subscribers
        self._catalog = catalog
        self._args_of = args_of

    def rest(self, tx: UnitOfWork, run: Run, status: RunStatus, *, reason: str | None,
             node: str | None = None) -> None:
        """`run` comes to rest at `status` in `tx`: its own reply (`tell_rest`) and the notices
        of the event that status tells, in the same unit."""
        tell_rest(tx, run.id, status, reason=reason, node=node, noticed=True)
        event = EVENT_OF.get(RunStatus(status).value)
        if event is not None:
            self.write(tx, run, event, node=node, reason=reason)

    def write(self, tx: UnitOfWork, run: Run, event: str, *, node: str | None = None,
              reason: str | None = None, episode: str | None = None) -> int:
        """The notice rows of `event` of `run` in `tx`, one per place (none again for a place that
        has one: the unique key; `episode` tells one occurrence of a repeatable event from the
        next). How many places it names."""
        try:
            targets = self.targets(run, event)
        except Exception:  # a notice must never undo the change it tells
            log.exception("notice places not decided", extra={"action": "notices", "run_id": run.id})
            return 0
        for t in targets:
            payload = {"event": event, "node": node, "reason": reason, "by": t.by, "source": t.source,
                       "window": t.window, "episode": episode}
            key = notice_key(run.id, event, node, t.platform, t.conversation, episode)
            tx.enqueue_notice(run.id, NOTICE, platform=t.platform, conversation=t.conversation,
                              payload=payload, dedupe=key)
        if targets:
            log.info("notices queued", extra={"action": "notices", "run_id": run.id, "event": event,
                                              "places": len(targets)})
        return len(targets)

    def targets(self, run: Run, event: str) -> list[Target]:
        """Where `event` of `run` is told: the workflow's rules whose `when:` holds, then the
        subscriptions; one per place, never the run's own conversation."""
        found: dict[tuple[str, str], Target] = {}
        try:
            rules = self._catalog.get(run.workflow).notify
        except WorkflowError:  # gone or broken since: its subscriptions still hear
            rules = []
        args: dict[str, Any] | None = None
        for rule in rules:
            place = parse_address(rule.to)
            if event not in rule.on or place is None:
                continue
            if rule.when is not None:
                if args is None:
                    try:
                        args = self._args_of(run)
                    except BatonError as exc:
                        log.warning("notify when: the run's inputs not read: %s", exc.message,
                                    extra={"action": "notify_when", "run_id": run.id})
                        continue
                if not self._holds(rule.when, args, run):
                    continue
            found.setdefault(place, Target(*place, source=run.workflow, by=None, window=rule.window))
        for sub in self._subscribers.subscriptions(workflow=run.workflow):
            if sub.event == event:
                place = (sub.platform, sub.conversation)
                found.setdefault(place, Target(*place, sub.workflow, sub.created_by, None))
        found.pop((run.platform, run.conversation), None)  # no echo: the run reports there already
        return list(found.values())

    @staticmethod
    def _holds(when: str, args: dict[str, Any], run: Run) -> bool:
        from core.workflows.templating import evaluate_condition

        try:
            return evaluate_condition(when, {"inputs": args, "run": {"id": run.id}})
        except BatonError as exc:  # a condition is never guessed: that rule is not told
            log.warning("notify when: not evaluated: %s", exc.message,
                        extra={"action": "notify_when", "run_id": run.id})
            return False
