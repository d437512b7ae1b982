"""The store port: small role protocols, and `Store`, which holds one of each as an attribute.

    Store.blobs         Blobs          content-addressed bytes (args, outputs, artifacts)
         .runs          Runs           lookups and the compare-and-swap status change
         .leases        Leases         who executes a running run; recovery of lapsed ones
         .steps         Journal        step executions of a run and its lineage
         .gates         Gates          approval gates: open, find (waiting / decided), list
         .ballots       Ballots        votes on a gate (one per person), durable deadlines
         .events        Events         the audit trail and incoming chat events' dedupe
         .state         PlatformState  small values chat adapters (and Baton) keep
         .outbox        Deliveries     state-carrying replies, claimed with a lease, sent once
         .retention     Retention      pruning old runs (tombstones, pins), the blob sweep
         .schedules     Schedules      schedules (YAML and chat) and their fires
         .subscribers   Subscriptions  conversations subscribed to workflows' events
         .views         Views          what a page or a command reads together, in one query
         .transactions  Transactions   `transaction()`: a unit of work (`unit_of_work.py`)
    Store.transaction(), .batch()      units of work, across roles (`Transactions`)
    Store.migrate(), .ping(), .close() the database itself
    SqlStore.dispatch   Dispatch       queued steps of distributed execution (PostgreSQL)

No role's method is on `Store` itself: a caller names the role (`store.runs.get_run(…)`,
`ctx.store.events.audit(…)`). A consumer takes the role it uses (`PendingResults(store.steps)`,
`Pruner(store.retention, …)`, `Deliverer(store.outbox, …)`) or a protocol that bundles the role
attributes it uses (`CommandStore`, `GateStore`, …: properties typed as the roles, plus
`Transactions` when it opens units of work). Only composition roots (`bot/app.py`, `Engine`,
`Handler`) hold the whole `Store`.
What writes go together is the caller's choice, made with a
unit of work, never a new method here. Implementations:
`SqlStore` (`repository.py`: SQLite or PostgreSQL) and `MemoryStore` (`memory.py`), which
pass the same contract suite (tests/integration/store/).

Calls are synchronous and short; async code calls them directly and never holds a
transaction across an `await`. Every status change is a compare-and-swap:
    UPDATE runs SET status=:to, version=version+1, ...
     WHERE id=:id AND status IN (:allowed) [AND version=:version]
Zero rows means another actor won: the store reads the run and raises `RunNotResumable` /
`InvalidTransition` carrying the current status and `status_by`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.store.records import (
    NO_NOTES,
    AuditEvent,
    Delivery,
    Fire,
    Gate,
    GateDeadline,
    GateVote,
    JournalEntry,
    KeyNotes,
    NodeStatus,
    OpenEvent,
    PruneCounts,
    Run,
    RunStatus,
    Schedule,
    Subscription,
)

# the parameter records of `Runs.transition`, `UnitOfWork.transition` and `UnitOfWork.create_run`
from core.store.records import NewRun as NewRun
from core.store.records import Transition as Transition
from core.store.unit_of_work import Batch, UnitOfWork

#: A run page's change marker: equal values, nothing the page shows changed.
Pulse = tuple[object, ...]
#: Called inside the hand-off transaction once, after every entry of the batch is written:
#: (driver connection, the new entry ids in hand-off order) -> the ids of the jobs it
#: deferred on that connection, in the same order.
Defer = Callable[[Any, list[int]], list[int]]


def digest_bytes(data: bytes) -> str:
    """The content address of a blob: its sha256, in hex."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class StepEntry:
    """One step's journal entry, written before the step may run: `started` when it runs
    in this process (`Journal.journal_start`), `queued` with its job when it is handed to
    the job queue (`Dispatch.journal_queue_many`)."""

    run_id: str
    node_id: str
    cache_key: str
    components: dict[str, Any]
    attempt: int
    idempotency_key: str | None
    notes: KeyNotes = NO_NOTES


@dataclass(frozen=True, slots=True)
class StepResult:
    """A step that completed without a `started` entry before it (its re-run is safe)."""

    run_id: str
    node_id: str
    cache_key: str
    components: dict[str, Any]
    attempt: int
    idempotency_key: str | None
    output: bytes
    tokens_in: int = 0
    tokens_out: int = 0
    notes: KeyNotes = NO_NOTES
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", digest_bytes(self.output))


class Blobs(Protocol):
    def put_blob(self, data: bytes) -> str:
        """Store bytes once, return their sha256 hex digest."""

    def get_blob(self, digest: str) -> bytes:
        """Raise KeyError when unknown."""

    def get_blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        """Many in one query (unknown digests are absent)."""


class Runs(Protocol):
    def get_run(self, run_id: str) -> Run:
        """Exact id; RunNotFound."""

    def find_run(self, id_or_prefix: str) -> Run:
        """Exact id or unique prefix; RunNotFound / AmbiguousRunId."""

    def runs_with_args(self, prefix: str, limit: int = 1000) -> list[Run]:
        """Runs whose args digest starts with the hex `prefix` (an args handle): one run per
        distinct (args digest, workflow, requester), which is all a view check needs; at most
        `limit`. Only runs' args: a handle never names a step's output or any other blob."""

    def recent_runs(
        self, *, platform: str | None = None, conversation: str | None = None, limit: int = 20,
        requester: str | None = None, workflow: str | None = None, status: str | None = None,
    ) -> list[Run]:
        """Newest first; `requester`: only the runs that user started; `workflow`, `status`:
        only the runs of that workflow, with that status (the limit counts only those)."""

    def runs_in_thread(self, platform: str, conversation: str, thread: str) -> list[Run]:
        """Newest first."""

    def child_runs(self, parent_runs: Sequence[str]) -> list[Run]:
        """The sub-runs that `workflow:` steps of these runs started (`Run.parent_run`),
        newest first."""

    def paused_parents(self, limit: int = 500) -> list[Run]:
        """Paused runs that started sub-runs, longest paused first: the ones a child's rest
        may have left waiting when the process that should have woken them died."""

    def adopt_child(self, run_id: str, parent_run: str) -> Run:
        """A child of an earlier run of a lineage now belongs to `parent_run`, the run that
        resumed it (its cancel reaches the child; the child's rest wakes it). The version does
        not change."""

    def set_thread(self, run_id: str, thread: str) -> Run:
        """Attach a thread (its gates move with it); the version does not change."""

    def transition(self, change: Transition) -> Run:
        """CAS status change (`Transition`: what, from where, by whom, and the lease)."""


class Leases(Protocol):
    def renew_leases(self, owner: str, lease_seconds: float) -> int:
        """One UPDATE for every running run this owner holds; returns how many."""

    def lapsed_runs(self, now: float | None = None) -> list[Run]:
        """Running runs whose lease expired (their owner died), soonest expired first."""

    def runs_leased_by(self, owner_prefix: str) -> list[Run]:
        """Running runs whose lease_owner starts with `owner_prefix` (taken literally)."""

    def take_over(self, run: Run, new_owner: str, lease_seconds: float) -> Run:
        """CAS on `run.version` and its lease as read: exactly one process wins the
        recovery; the others (or a take-over of a lease renewed meanwhile) get RunNotResumable
        naming the holder."""

    def release_leases(self, owner: str) -> int:
        """Let every running run this owner holds lapse now, so a peer recovers it at once
        (graceful shutdown); how many."""


class Journal(Protocol):
    def journal_start(self, step: StepEntry) -> int:
        """Write a `started` entry (committed before the side effect); returns its id."""

    def journal_finish(
        self,
        entry_id: int,
        *,
        status: NodeStatus,
        output_digest: str | None = None,
        error: str | None = None,
        tokens_in: int = 0,
        tokens_out: int = 0,
        artifacts: dict[str, str] | None = None,
        blobs: Sequence[bytes] = (),
    ) -> None:
        """Settle a `started` entry once (completed | failed); settling it again raises
        InvalidTransition. `blobs` (the bytes `output_digest` and `artifacts` name) are stored
        in the same transaction (one commit instead of a `put_blob` each)."""

    def journal_complete_many(self, results: Sequence[StepResult]) -> None:
        """The output blobs and `completed` entries of steps whose re-run is safe
        (pure/idempotent: no `started` entry precedes them), all in ONE transaction."""

    def journal_record_cached(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        """Copy the stored rows of these entries (by id) into `run_id`'s journal, in one
        transaction: `completed`, no tokens spent, `cached_from` = the run that computed the
        result, and `notes.saved_tokens` = the tokens an original spent (what re-use saves)."""

    def journal(self, run_ids: Sequence[str]) -> list[JournalEntry]:
        """Every entry of these runs, in one query, oldest first."""

    def journal_outline(self, run_ids: Sequence[str]) -> list[JournalEntry]:
        """`journal(run_ids)` without the entries' key components, for the views that show
        a run rather than decide a step (its page, `Engine.inspect` without a plan): each
        entry's `components` are empty, except a decision marker's (cache key ""), whose
        components are its decision; its `notes` are read as `journal` reads them. Nothing
        that looks results up by key may use it (the key components are what differ)."""

    def lineage(self, run_id: str) -> list[str]:
        """`run_id`, then the run it was resumed from, and so on (oldest last); RunNotFound."""


class Gates(Protocol):
    def open_gate(self, run_id: str, node_id: str, prompt: str, cache_key: str = "",
                  decided_before: float | None = None) -> Gate:
        """A waiting gate for this question. Idempotent for the same `cache_key` (or when
        none is given); a gate decided for another key, or decided before `decided_before`
        (its node was invalidated then), is re-opened without its decision."""

    def get_gate(self, run_id: str, node_id: str) -> Gate:
        """RunNotFound when the run has no such gate."""

    def waiting_gate(self, run_id: str) -> Gate | None:
        """The gate of the run that has waited longest (the first question asked is the
        one a plain approve or reject answers), or None."""

    def decided_gate(self, run_id: str) -> Gate | None:
        """The gate of the run decided last (who won a race), or None."""

    def waiting_gates(
        self, *, platform: str, conversation: str, thread: str | None = None
    ) -> list[tuple[Run, Gate]]:
        """Gates waiting in that conversation (and thread, when given), newest first."""

    def waiting_gates_on(self, platform: str, limit: int = 100) -> list[tuple[Run, Gate]]:
        """The newest `limit` gates waiting in any conversation of `platform` (a person's home)."""

    def run_gates(self, run_id: str) -> list[Gate]:
        """Every gate of the run, waiting or decided, oldest first (one query)."""


class Ballots(Protocol):
    def cast_vote(self, vote: GateVote) -> bool:
        """Record a vote; False when that person's same ballot was there (it counts once)."""
        ...

    def gate_votes(self, run_id: str, node_id: str, opened_at: float) -> list[GateVote]:
        """The votes on one opening of a gate (`opened_at`: its `created_at`), in cast order."""
        ...

    def plan_deadlines(
        self, run_id: str, node_id: str, opened_at: float, due: Sequence[tuple[str, float]]
    ) -> None:
        """Keep an opening's deadlines ((name, due_at), …) once; planning again changes nothing."""
        ...

    def due_deadlines(self, now: float, limit: int = 100) -> list[GateDeadline]:
        """Deadlines due at `now` and not fired, earliest first."""
        ...

    def gate_deadlines(self, run_id: str, node_id: str, opened_at: float) -> list[GateDeadline]: ...

    def fire_deadline(self, deadline: GateDeadline, by: str) -> bool:
        """Mark it fired; True for exactly one caller (compare-and-swap on `fired_at`)."""
        ...


class Events(Protocol):
    def audit(
        self, *, actor: str, action: str, run_id: str | None = None, details: dict[str, Any] | None = None
    ) -> None: ...

    def audit_log(self, run_id: str) -> list[AuditEvent]:
        """The run's audit trail, oldest first."""

    def audit_since(self, since: float) -> list[AuditEvent]:
        """Every audit row written at or after `since` (epoch seconds), any run, oldest first."""

    def claim_event(
        self,
        platform: str,
        event_id: str,
        *,
        stale_after: float = 60.0,
        payload: dict[str, Any] | None = None,
    ) -> bool:
        """True the first time an incoming event id is seen, and for a redelivery of one
        whose claim was never finished and is older than `stale_after` seconds (the claimer
        died; exactly one concurrent re-claimer wins); False for a duplicate. `payload`: the
        message itself, recorded with a first claim (before the platform is acknowledged), so
        that `open_events` can hand it to another process if this one dies."""

    def open_events(self, before: float, limit: int = 100) -> list[OpenEvent]:
        """Recorded events (with a payload) claimed before `before` and never finished, oldest
        first: their claimer died between the acknowledgement and the end of the handling."""

    def finish_event(self, platform: str, event_id: str) -> None:
        """The claimed event was handled: from now on every redelivery is a duplicate."""

    def forget_events(self, before: float) -> int:
        """Drop processed-event ids recorded before `before` (epoch seconds); how many."""


class PlatformState(Protocol):
    def put_state(self, platform: str, key: str, value: str) -> None:
        """Keep a small text value under (platform, key), replacing what was there."""

    def get_state(self, platform: str, key: str) -> str | None:
        """The value kept under (platform, key), or None."""

    def keep_state(self, platform: str, key: str, value: str) -> str:
        """The value under (platform, key); `value` is written only when there was none, so
        racing processes all get the first one. Under platform `"baton"` (Baton's own values,
        e.g. the run pages' signing key) housekeeping never drops it."""

    def forget_state(self, before: float) -> int:
        """Drop chat adapters' values last written before `before` (epoch seconds), never
        Baton's own (platform `"baton"`); how many."""


class Deliveries(Protocol):
    """The outbox. Rows are written by a unit of work (`UnitOfWork.enqueue_delivery`) together
    with the state change they tell; a deliverer claims them, sends them, and settles them."""

    def claim_deliveries(
        self, owner: str, platforms: Iterable[str], *, lease_seconds: float, limit: int = 20,
        run_id: str | None = None,
    ) -> list[Delivery]:
        """Rows due now for these platforms (of `run_id` only, when given), undelivered and
        unleased (or their lease lapsed), each the oldest undelivered row of its run, at most
        `limit`, soonest due first: each
        leased to `owner` for `lease_seconds` with a compare-and-swap (of claimers racing,
        exactly one gets a row) and its `attempts` counted."""

    def settle_delivery(self, delivery_id: int, owner: str) -> bool:
        """Mark it delivered; False when `owner` no longer holds its claim (a peer took over)."""

    def defer_delivery(self, delivery_id: int, owner: str, *, due_at: float, error: str) -> bool:
        """Give the claim up and try again at `due_at` (a backoff), noting `error`; False when
        `owner` no longer holds the claim."""

    def release_deliveries(self, owner: str) -> int:
        """Let every claim `owner` holds lapse now, so a peer delivers those rows at once
        (shutdown, or `owner` is a process that died); how many."""

    def renew_delivery(self, delivery_id: int, owner: str, lease_seconds: float) -> bool:
        """Extend `owner`'s claim on the row to `lease_seconds` from now (the sender's heartbeat
        while a send takes long); False when `owner` no longer holds it."""

    def delivery_claimants(self, prefix: str) -> list[str]:
        """The owners, starting with `prefix`, that hold a live claim on an undelivered row
        (a restarted process looks for those of its replica's dead processes)."""

    def deliveries(self, run_id: str) -> list[Delivery]:
        """Every row of the run, delivered or not, oldest first."""

    def undelivered(self, limit: int = 100) -> list[Delivery]:
        """Rows not delivered yet, any run, oldest first."""

    def forget_deliveries(self, before: float) -> int:
        """Drop rows delivered before `before` (epoch seconds); how many."""


class Retention(Protocol):
    """What `baton prune` and housekeeping delete (DESIGN.md "Retention"). A run is prunable
    when it is over (`PRUNABLE`), last changed before the cut-off, not pinned, no existing
    run was resumed from it (its children go first, so a lineage never breaks), and the run
    whose `workflow:` step started it is gone (a parent goes first: while it lives it may
    resume and must find its completed child, not start it again)."""

    def prunable_runs(self, before: float, limit: int = 500) -> list[str]:
        """Ids of prunable runs last changed before `before`, oldest first, at most `limit`."""

    def prune_counts(self, run_ids: Sequence[str]) -> PruneCounts:
        """What `prune_runs(run_ids)` would delete now (a dry run deletes nothing)."""

    def prune_runs(self, run_ids: Sequence[str]) -> PruneCounts:
        """In ONE transaction: of these runs, those still prunable are deleted with their
        journal, gates, votes, deadlines and outbox rows; each leaves a tombstone, and the
        blobs it referenced become sweep candidates. The audit trail stays."""

    def pruned_among(self, run_ids: Sequence[str]) -> set[str]:
        """Those of `run_ids` that were pruned (a tombstone): a directory of one, on any
        machine, may go."""

    def pin_run(self, run_id: str, by: str) -> bool:
        """Exempt the run from pruning; False when it was pinned already. RunNotFound."""

    def unpin_run(self, run_id: str) -> bool:
        """Make it prunable again; False when it was not pinned."""

    def is_pinned(self, run_id: str) -> bool: ...

    def sweep_blobs(self, marked_before: float, limit: int = 1000) -> int:
        """Delete the sweep candidates marked before `marked_before` that nothing references
        any more (no run's args, no step's output or artifact); unmark those referenced again.
        How many blobs were deleted."""

    def forget_audit(self, before: float) -> int:
        """Drop audit rows written before `before`; how many."""

    def count_audit(self, before: float) -> int:
        """How many audit rows were written before `before` (what `forget_audit` would drop)."""
class Schedules(Protocol):
    """Schedules and what became of their due times. A fire's row is usually written by the
    unit of work that starts its run (`UnitOfWork.record_fire`): (schedule, due time) is
    unique, so of replicas, restarts and repeated ticks one starts the run."""

    def add_schedule(self, schedule: Schedule) -> bool:
        """Insert it; False when a schedule has that id already."""

    def get_schedule(self, schedule_id: str) -> Schedule:
        """ScheduleNotFound when there is none."""

    def list_schedules(self) -> list[Schedule]:
        """Every schedule, by id."""

    def change_schedule(self, schedule: Schedule, **changes: Any) -> Schedule:
        """Compare-and-swap on `schedule.version` (ScheduleChanged; ScheduleNotFound when gone):
        the schedule with `changes`, its version one more."""

    def remove_schedule(self, schedule: Schedule) -> None:
        """Compare-and-swap on `schedule.version`, as `change_schedule`."""

    def sync_schedules(self, schedules: Sequence[Schedule]) -> tuple[list[str], list[str]]:
        """Make the `yaml` schedules exactly these (new added, changed definitions updated with
        their state kept, the rest removed): (added or changed ids, removed ids)."""

    def advance_schedules(self, untils: Mapping[str, float]) -> None:
        """Each schedule's `evaluated_until` moves forward to its value, never back (one write)."""

    def record_fire(self, fire: Fire) -> bool:
        """Write a fire alone (a skip, a miss); False when that due time has one already."""

    def schedule_fires(self, schedule_id: str, limit: int = 10) -> list[Fire]:
        """Its latest fires, latest due time first."""

    def latest_fires(self, schedule_ids: Iterable[str]) -> dict[str, float]:
        """The latest due time each of these schedules has a fire for (one read for a tick's
        many; a schedule never fired is not in it)."""

    def active_runs(self, started_by: str, statuses: Iterable[RunStatus] = ...) -> list[Run]:
        """Runs with that `started_by` in `statuses` (default: pending, running, paused,
        needs_attention), oldest first."""


class Subscriptions(Protocol):
    """Conversations subscribed to workflows' events (`core/commands/notices.py`): one row per
    place, workflow (`*`: every one) and event."""

    def subscribe(
        self, platform: str, conversation: str, workflow: str, events: Iterable[str], *, by: str
    ) -> list[Subscription]:
        """Subscribe the place to each event of `workflow` (a row kept as it is when it exists,
        its creator then `by`); the place's rows for that workflow now."""

    def unsubscribe(
        self, platform: str, conversation: str, workflow: str | None = None,
        events: Iterable[str] | None = None,
    ) -> int:
        """Drop the place's rows (of `workflow` only, of those `events` only, when given); how many."""

    def subscriptions(
        self, *, platform: str | None = None, conversation: str | None = None, workflow: str | None = None
    ) -> list[Subscription]:
        """The rows of that place (and of `workflow` or `*`, when given), in a stable order."""


class Views(Protocol):
    """Reads that a page or a command always makes together, answered by one query."""

    def command_runs(
        self, origin_event: str, workflow: str, platform: str, conversation: str
    ) -> tuple[Run | None, list[Run]]:
        """What a `run` command reads: the run its chat event already started (a redelivery),
        and the failed, paused and needs_attention runs of `workflow` in that conversation,
        newest first (the fresh-run prompt)."""

    def gate_and_args(self, run: Run) -> tuple[Gate | None, bytes]:
        """What an approval reads: `waiting_gate(run.id)` and the run's args blob (KeyError
        when it is missing)."""

    def run_pulse(self, run_id: str) -> Pulse | None:
        """A value that changes whenever anything a run's page shows changes (status, journal,
        audit), in one indexed query; None when there is no such run."""

    def key_runs(self, *, key: str | None = None, workflow: str | None = None, limit: int = 500) -> list[Run]:
        """The runs that hold or wait for a slot of a concurrency key (running, needs_attention,
        paused, queued), of `key` or of `workflow` (None: of every key); queued ones in queue
        order after the others. What `queue` and a queued run's message show."""

    def queued_runs(self, *, after: tuple[float, str] | None, up_to: float, limit: int = 500) -> list[Run]:
        """Runs `queued` since a time in (`after`, `up_to`]: `queued_at` at most `up_to`, and
        (`queued_at`, id) past `after` (None: from the first), in that order. What the
        `queued_long` watch reads (`core/commands/queue_watch.py`)."""


class Transactions(Protocol):
    def transaction(self) -> AbstractContextManager[UnitOfWork]:
        """A unit of work: its writes commit together when the block ends, or none does."""

    def batch(self) -> AbstractContextManager[Batch]:
        """Units of work that commit together (`Batch`): one commit for many (a tick's fires)."""


class Roles(Protocol):
    """The store's roles as attributes, each typed as its narrow protocol: a composition root
    hands a consumer the role(s) it uses (`PendingResults(store.steps, …)`), never the whole
    store. Named after their protocol, but where the protocol has a method of that name:
    `steps` (`Journal`), `events` (`Events`: the audit trail too), `state` (`PlatformState`),
    `outbox` (`Deliveries`), `subscribers` (`Subscriptions`)."""

    @property
    def blobs(self) -> Blobs: ...
    @property
    def runs(self) -> Runs: ...
    @property
    def leases(self) -> Leases: ...
    @property
    def steps(self) -> Journal: ...
    @property
    def gates(self) -> Gates: ...
    @property
    def ballots(self) -> Ballots: ...
    @property
    def events(self) -> Events: ...
    @property
    def state(self) -> PlatformState: ...
    @property
    def outbox(self) -> Deliveries: ...
    @property
    def retention(self) -> Retention: ...
    @property
    def schedules(self) -> Schedules: ...
    @property
    def subscribers(self) -> Subscriptions: ...
    @property
    def views(self) -> Views: ...
    @property
    def transactions(self) -> Transactions: ...


class Store(Roles, Transactions, Protocol):
    """The whole store: its roles (`Roles`), units of work across them (`Transactions`:
    `transaction()`, `batch()`), and what concerns the database itself."""

    def migrate(self) -> str | None:
        """Bring the schema to the newest revision (idempotent, safe to race); the revision the
        database was at before (None: it had no schema)."""

    def ping(self) -> None:
        """Raise when the store does not answer (readiness checks)."""

    def close(self) -> None: ...


class Dispatch(Protocol):
    """The journal's hand-off to distributed workers (`BATON_EXECUTOR=procrastinate`); the
    workers' own writes (claim, result) are `core/store/worker_journal.py`'s."""

    def journal_queue_many(self, handoffs: Sequence[StepEntry], defer: Defer) -> list[tuple[int, int]]:
        """A `queued` entry and its job per hand-off, all in one transaction: (entry id, job id)."""

    def journal_unqueue(self, entry_id: int, error: str) -> bool:
        """CAS queued -> failed (its job vanished); False when a worker claimed it first."""

    def journal_entries(self, entry_ids: Iterable[int]) -> dict[int, JournalEntry]:
        """These entries by id, in one query (ids that do not exist are absent)."""

    def journal_settled(self, entry_ids: Iterable[int]) -> dict[int, tuple[JournalEntry, bytes | None]]:
        """Those of these entries that are settled (neither `queued` nor `started`), each with
        its output blob's bytes (None when it has no output), in one query."""

