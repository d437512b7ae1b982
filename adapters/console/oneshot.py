"""`baton say`: handle one message, print the replies, and never leave a run orphaned.

This process is the only executor of the runs it starts or continues, so it always drives
them to rest before exiting. With `wait=True` the background replies (progress, the final
summary) are part of the output; without it only the immediate replies are, and what this
process alone would tell (notices, a gate's reminders, escalations and timeouts).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from adapters.console.messages import PLATFORM
from core.commands import replies
from core.commands.messages import ChatMessage, Reply
from core.commands.notices import is_notice
from core.store.records import RunStatus

if TYPE_CHECKING:
    from core.commands.handler import Handler
    from core.engine.engine import Engine
    from core.redaction import Redactor
    from core.store.port import Leases, Runs


#: the replies a gate's deadlines send (`core/engine/deadlines.py`): shown with or without `wait`
_DUE = frozenset({"gate_reminder", "gate_escalated", "gate_timed_out"})


class OneShotStore(Protocol):
    """The store roles a one-shot `say` reads: the runs, and those this process leads."""

    @property
    def runs(self) -> Runs: ...
    @property
    def leases(self) -> Leases: ...


class Baton(Protocol):
    """What the console needs of `bot.app.Baton` (adapters never import `bot`)."""

    @property
    def store(self) -> OneShotStore: ...
    @property
    def engine(self) -> Engine: ...
    @property
    def handler(self) -> Handler: ...
    @property
    def redactor(self) -> Redactor: ...
    @property
    def stopping(self) -> asyncio.Event: ...


@dataclass
class Transcript:
    """Replies in the order a reader should see them. A reply with a `replace_key` replaces
    the earlier one with that key (the progress message is edited, not re-posted) and moves
    to the end, so the newest state is always last."""

    replies: list[Reply] = field(default_factory=list)

    def add(self, reply: Reply) -> None:
        if reply.how.edit_only and not any(r.how.replace_key == reply.how.replace_key for r in self.replies):
            return  # an edit of a message shown by another call
        if reply.how.replace_key is not None:
            self.replies = [r for r in self.replies if r.how.replace_key != reply.how.replace_key]
        self.replies.append(reply)


def _active(reply: Reply, *, queued: bool = False) -> bool:
    """A reply about a run that may still be moving (an error reply never is: its run id may
    be one that does not exist, as typed). `queued`: a run waiting in its concurrency queue
    counts (`--wait`); otherwise it is left there: it is not orphaned, whichever process
    frees its slot, or any process's recovery, starts it."""
    if reply.is_error or reply.run_id is None:
        return False
    moving = (None, RunStatus.PENDING, RunStatus.RUNNING) + ((RunStatus.QUEUED,) if queued else ())
    return reply.run_status in moving


async def drive_to_rest(baton: Baton, run_ids: set[str]) -> list[str]:
    """Wait until `run_ids` and every run this process holds a lease on have come to rest
    (or the process is asked to stop). Returns the runs waited for, in order."""
    waited: list[str] = []
    pending = set(run_ids)
    while not baton.stopping.is_set():
        await baton.engine.take_admitted()  # a slot this process freed: the run it admitted is ours
        pending |= {run.id for run in baton.store.leases.runs_leased_by(baton.engine.owner)}
        pending -= set(waited)
        if not pending:
            break
        run_id = sorted(pending)[0]
        waiter = asyncio.ensure_future(baton.engine.wait(run_id))
        stopper = asyncio.ensure_future(baton.stopping.wait())
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if not waiter.done():
            waiter.cancel()
            break
        waiter.result()
        waited.append(run_id)
    return waited


async def say(
    baton: Baton,
    message: ChatMessage,
    *,
    wait: bool,
    on_reply: Callable[[Reply], None] | None = None,
) -> list[Reply]:
    """Handle `message`; return the replies to print (the immediate ones, plus the background
    ones when `wait`). `on_reply` sees each reply as it arrives (for streaming output)."""
    transcript = Transcript()
    background = wait

    def keep(reply: Reply) -> None:
        transcript.add(reply)
        if on_reply is not None:
            on_reply(reply)

    async def outbox(reply: Reply) -> None:
        # a notice to another console conversation is shown too, marked with it: one terminal.
        # Without `wait`, the runs' own progress stays unshown, but never what this process is
        # the only one to tell: a notice, or a gate's reminder, escalation or timeout that came
        # due (delivered here, it would otherwise reach nobody)
        told = background or is_notice(reply) or reply.kind in _DUE
        if told and (reply.to.conversation in (None, message.conversation) or is_notice(reply)):
            keep(reply)

    baton.handler.register_outbox(PLATFORM, outbox)
    immediate = await baton.handler.handle(message)
    for reply in immediate:
        keep(reply)
    waited = await drive_to_rest(baton, {r.run_id for r in immediate if _active(r, queued=wait) and r.run_id})
    if wait:
        for run_id in waited:
            if not _ends_with_rest(transcript.replies, run_id):
                keep(_resting_reply(baton, run_id))
    return transcript.replies


def _ends_with_rest(replies: list[Reply], run_id: str) -> bool:
    about = [r for r in replies if r.run_id == run_id and r.run_status is not None]
    return bool(about) and RunStatus(about[-1].run_status or "pending").resting


def _resting_reply(baton: Baton, run_id: str) -> Reply:
    """The run's status as a reply, when the handler's background replies did not end with
    the resting status (e.g. the run rested before anything was reported)."""
    return replies.status(baton.store.runs.get_run(run_id), baton.engine.summary(run_id))
