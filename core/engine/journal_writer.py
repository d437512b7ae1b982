"""`JournalWriter`: every journal write of one execution, through one object, in order.

    journal = JournalWriter(store.steps, run_id, window=0.01)
    entry_id = journal.start(step, attempt)           # `started`, committed (after what is pending)
    journal.finish(entry_id, status=..., ...)         # settles it (a CAS: started -> completed|failed)
    journal.result(done, durable=False)               # blob + `completed` entry: group-committed
    journal.result(done, durable=True)                # ... committed now, with what is pending
    journal.cached(entry); journal.flush_hits()       # cache hits copied into this run, batched
    journal.interrupted(entry, cls)                   # an orphaned `started` entry marked failed
    journal.flush()                                   # everything pending, committed

The order DESIGN.md promises lives here: nothing is journaled before a result it follows
(every write other than a pure result first commits what is pending), so a `started` entry
of an unsafe step is never durable before the results it consumed. Queued hand-offs to
workers (`core/engine/distributed`) are the dispatcher's; they flush through `flush()` first.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from core.engine.group_commit import PendingResults
from core.errors import RunStateError
from core.store.port import StepEntry
from core.store.records import JournalEntry, NodeStatus

if TYPE_CHECKING:
    from core.engine.steps import Step
    from core.store.port import Journal, StepResult

INTERRUPTED = "interrupted: the process running it stopped before it finished; re-run ({cls})"


class JournalWriter:
    def __init__(self, journal: Journal, run_id: str, window: float) -> None:
        self.journal = journal
        self.run_id = run_id
        self._pending = PendingResults(journal, window)  # pure results not yet committed
        self._hits: list[JournalEntry] = []  # cache hits not yet copied into this run

    def __len__(self) -> int:
        """How many results wait for their commit."""
        return len(self._pending)

    def start(self, step: Step, attempt: int) -> int:
        """A `started` entry, committed before anything it may cause (after what is pending)."""
        self._pending.flush()
        return self.journal.journal_start(StepEntry(
            run_id=self.run_id,
            node_id=step.node.id,
            cache_key=step.key,
            components=step.components,
            attempt=attempt,
            idempotency_key=step.idempotency_key,
            notes=step.notes,
        ))

    def finish(self, entry_id: int, *, status: NodeStatus, **result: Any) -> None:
        """Settle a `started` entry (`Journal.journal_finish`: output, error, tokens, artifacts)."""
        self.journal.journal_finish(entry_id, status=status, **result)

    def result(self, done: StepResult, *, durable: bool) -> None:
        """A step's blob and `completed` entry written together, with no `started` before them:
        with the next group commit, or (`durable`) now."""
        if durable:
            self._pending.commit_with(done)
        else:
            self._pending.add(done)

    def cached(self, entry: JournalEntry) -> None:
        """A completed entry of the lineage re-used by this run: copied in the next batch."""
        self._hits.append(entry)

    def flush_hits(self) -> None:
        if self._hits:
            self._pending.flush()
            self.journal.journal_record_cached(self.run_id, self._hits)
            self._hits = []

    def interrupted(self, entry: JournalEntry, cls: str) -> None:
        """An orphaned `started` entry (its process stopped) marked failed, so the step runs
        again; settled by someone meanwhile is fine: it re-runs anyway."""
        self._pending.flush()
        with contextlib.suppress(RunStateError):
            self.finish(entry.id, status=NodeStatus.FAILED, error=INTERRUPTED.format(cls=cls))

    def flush(self) -> None:
        """Commit every pending result (one transaction); on failure they stay pending."""
        self._pending.flush()
