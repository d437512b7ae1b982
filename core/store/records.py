"""Frozen domain records: what the rest of Baton sees of the store.

SQLModel tables live in `core/store/tables.py` and never leave `core/store/`; the
repository converts rows to these records (`from_row`) and callers derive changed
copies with `evolve`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from enum import StrEnum
from typing import Any, Self

from core.replay_class import ReplayClass as ReplayClass  # re-exported: the records' importers read it here


class RunStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    PAUSED = "paused"
    NEEDS_ATTENTION = "needs_attention"
    CANCELLED = "cancelled"
    #: over its concurrency key's limit: waits in the key's queue, admitted (-> running) by
    #: the unit of work that brings an active run of the key to rest
    QUEUED = "queued"

    @property
    def resting(self) -> bool:
        """True when nothing executes until a person acts (or the run is over). A queued run
        is not resting: it starts by itself when a slot frees."""
        return self not in (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.QUEUED)

    @property
    def finished(self) -> bool:
        return self in (RunStatus.COMPLETED, RunStatus.CANCELLED)

    @property
    def unfinished(self) -> bool:
        """Statuses that make a fresh `run` of the same workflow prompt first."""
        return self in (RunStatus.FAILED, RunStatus.PAUSED, RunStatus.NEEDS_ATTENTION)


#: The legal status changes of DESIGN.md, and no others. `failed`, `paused` and
#: `needs_attention` go back to `running` only through an explicit resume.
TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.PENDING: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED}),
    RunStatus.RUNNING: frozenset(
        {
            RunStatus.COMPLETED,
            RunStatus.FAILED,
            RunStatus.PAUSED,
            RunStatus.NEEDS_ATTENTION,
            RunStatus.CANCELLED,
        }
    ),
    # -> queued: a resume (or an approval) that admission put in its key's queue
    RunStatus.FAILED: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.QUEUED}),
    # paused -> failed: a gate that timed out with `on_timeout: fail`
    RunStatus.PAUSED: frozenset(
        {RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.FAILED, RunStatus.QUEUED}
    ),
    RunStatus.QUEUED: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED}),
    RunStatus.NEEDS_ATTENTION: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.FAILED}),
    RunStatus.COMPLETED: frozenset(),
    RunStatus.CANCELLED: frozenset(),
}


def sources_of(target: RunStatus) -> frozenset[RunStatus]:
    """Every status from which `target` may be reached."""
    return frozenset(s for s, targets in TRANSITIONS.items() if target in targets)


class OnLimit(StrEnum):
    """What a new (or resumed) run does when its concurrency key is at its limit."""

    QUEUE = "queue"  # wait in the key's queue
    CANCEL_NEW = "cancel_new"  # refuse the new run, naming the active one
    CANCEL_RUNNING = "cancel_running"  # cancel the oldest active run(s), start the new one
    REPLACE_QUEUED = "replace_queued"  # cancel the queued runs, queue the new one (debounce)


@dataclass(frozen=True, slots=True)
class Concurrency:
    """A run's place in a concurrency key (YAML `concurrency:`, or a caller's own: a
    schedule's `schedule:<id>`). Each run carries its own: a run is admitted while the
    key's active runs are fewer than its `limit`."""

    key: str
    limit: int = 1
    on_limit: OnLimit = OnLimit.QUEUE
    max_queued: int = 100
    hold_while_paused: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"limit": self.limit, "on_limit": self.on_limit.value, "max_queued": self.max_queued,
                "hold_while_paused": self.hold_while_paused}  # fmt: skip

    @classmethod
    def from_json(cls, key: str, value: dict[str, Any]) -> Concurrency:
        return cls(key=key, limit=int(value.get("limit", 1)),
                   on_limit=OnLimit(value.get("on_limit", "queue")),
                   max_queued=int(value.get("max_queued", 100)),
                   hold_while_paused=bool(value.get("hold_while_paused", True)))  # fmt: skip


class NodeStatus(StrEnum):
    STARTED = "started"
    COMPLETED = "completed"
    FAILED = "failed"
    INVALIDATED = "invalidated"
    #: handed to a distributed worker (`BATON_EXECUTOR=procrastinate`), not started yet: the
    #: worker moves it to `started` with a compare-and-swap before the step runs
    QUEUED = "queued"


class GateStatus(StrEnum):
    WAITING = "waiting"
    APPROVED = "approved"
    REJECTED = "rejected"


class _Record:
    def evolve(self, **changes: Any) -> Self:
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


@dataclass(frozen=True, slots=True)
class Run(_Record):
    id: str
    workflow: str
    platform: str
    conversation: str
    thread: str | None
    requester: str
    args_digest: str
    status: RunStatus
    version: int
    created_at: float
    updated_at: float
    resumed_from: str | None = None
    lease_owner: str | None = None
    lease_expires_at: float | None = None
    status_by: str | None = None  # who made the last status change
    reason: str | None = None  # why (error summary, reject reason, abandon note)
    #: how it was started when nobody typed it (`schedule:<id>`); None: a person's command
    started_by: str | None = None
    #: the due time of the schedule's fire that started it (lateness = created_at - this)
    scheduled_for: float | None = None
    #: its concurrency key and policy (None: unlimited)
    concurrency: Concurrency | None = None
    #: when it last joined its key's queue (the queue's order)
    queued_at: float | None = None
    #: the run whose `workflow:` step started it (`started_by: parent:<run>`), and that step
    #: (`notes`, or an item `notes[3]`): a sub-run (revision 0015_subruns)
    parent_run: str | None = None
    parent_node: str | None = None
    #: the cache key of that step when it started this run: a resumed parent re-uses a child
    #: only while the step's key (its args, the child workflow's definition) is the same
    parent_key: str | None = None

    @property
    def holds_slot(self) -> bool:
        """Active in its key: running, needs_attention, or paused while `hold_while_paused`."""
        if self.status in (RunStatus.RUNNING, RunStatus.NEEDS_ATTENTION):
            return True
        return self.status is RunStatus.PAUSED and (
            self.concurrency is None or self.concurrency.hold_while_paused
        )

    @property
    def handle(self) -> str:
        """The short handle of the run's canonical args, e.g. `args:3f9a1c2b`."""
        return f"args:{self.args_digest[:8]}"


@dataclass(frozen=True, slots=True)
class Transition:
    """A run's status change, a compare-and-swap (`Runs.transition`, `UnitOfWork.transition`).

    `allowed_from` defaults to every legal source of `to` and is always intersected with them
    (an illegal change raises InvalidTransition before any SQL); `expected_version`: the
    version the run must still have. Going to `running` takes the lease (`lease_owner`,
    default `actor`, for `lease_seconds`); leaving it clears the lease. `reason` replaces the
    previous one."""

    run_id: str
    to: RunStatus
    _: KW_ONLY
    actor: str
    reason: str | None = None
    expected_version: int | None = None
    allowed_from: Iterable[RunStatus] | None = None
    lease_owner: str | None = None
    lease_seconds: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NewRun:
    """A run to create (`UnitOfWork.create_run`). `origin_event`: `"<platform>:<event_id>"`
    of the chat command that started it; `started_by`, `scheduled_for`: the schedule
    (`schedule:<id>`) and due time of a fire; `parent_run`, `parent_node`, `parent_key`: the
    run, `workflow:` step and its cache key a sub-run was started by; `concurrency`: its key
    and policy (a keyed run asked `running` is admitted or queued when the unit commits)."""

    workflow: str
    platform: str
    conversation: str
    thread: str | None
    requester: str
    args_digest: str
    resumed_from: str | None = None
    status: RunStatus = RunStatus.PENDING
    lease_owner: str | None = None
    lease_seconds: float | None = None
    origin_event: str | None = None
    started_by: str | None = None
    scheduled_for: float | None = None
    concurrency: Concurrency | None = None
    parent_run: str | None = None
    parent_node: str | None = None
    parent_key: str | None = None


@dataclass(frozen=True, slots=True)
class KeyNotes:
    """What a journal entry records beside its key components: never hashed, compared or
    explained. Stored in the same JSON column as the components, each under the name entries
    have always stored it under (`STORED_NOTE_NAMES`), so an entry reads alike whichever
    release wrote it, and the database copies a cached entry's JSON as it is; `stored` and
    `split_stored` are the only places that know those names."""

    reason: str | None = None  # why the key missed: the step runs (`cache_key.explain`)
    skipped: str | None = None  # why the step was skipped (`conditions.py`)
    saved_tokens: int = 0  # a cached copy: the tokens its original spent, which re-use saves
    keyed_identity: bool = False  # recorded by an engine that keys identity (`cache_key.legacy_match`)
    child: str | None = None  # a `workflow:` step: the child run it started
    items: int | None = None  # one item of a `map:` node: how many items the node had


#: the cache key of a journal entry that carries a decision (an invalidation, a rejection) in
#: its components, never a result (`core/engine/journal_index.py`)
MARKER_KEY = ""
#: the names of `KeyNotes`' fields in a stored entry, in field order
NOTE_NAMES = ("_reason", "_skipped", "_tokens", "_identity", "_child", "_of")
STORED_NOTE_NAMES = frozenset(NOTE_NAMES)
NO_NOTES = KeyNotes()


def stored(components: dict[str, Any], notes: KeyNotes) -> dict[str, Any]:
    """The JSON a journal entry stores: its key components, and its notes under their names."""
    if notes == NO_NOTES:
        return components
    result = dict(components)
    if notes.reason is not None:
        result["_reason"] = notes.reason
    if notes.skipped is not None:
        result["_skipped"] = notes.skipped
    if notes.saved_tokens:
        result["_tokens"] = notes.saved_tokens
    if notes.keyed_identity:
        result["_identity"] = 1
    if notes.child is not None:
        result["_child"] = notes.child
    if notes.items is not None:
        result["_of"] = notes.items
    return result


def split_stored(value: dict[str, Any]) -> tuple[dict[str, Any], KeyNotes]:
    """A stored entry's JSON as (its key components, its notes): the inverse of `stored`."""
    present = STORED_NOTE_NAMES.intersection(value)
    if not present:
        return value, NO_NOTES
    components = value.copy()
    for name in present:
        del components[name]
    get = value.get
    return components, _notes(get("_reason"), get("_skipped"), get("_tokens"), "_identity" in value,
                              get("_child"), get("_of"))  # fmt: skip


def notes_of(values: Sequence[Any]) -> KeyNotes:
    """The notes from their stored values, in `NOTE_NAMES` order (None: absent), as a read
    that extracts them in the database returns them (`Journal.journal_outline`)."""
    reason, skipped, tokens, identity, child, items = values
    return _notes(reason, skipped, tokens, identity is not None, child, items)


@functools.lru_cache(maxsize=4096)  # a resume reads every entry of a lineage: most note alike
def _notes(reason: Any, skipped: Any, tokens: Any, identity: bool, child: Any, items: Any) -> KeyNotes:
    return KeyNotes(
        reason=None if reason is None else str(reason),
        skipped=None if skipped is None else str(skipped),
        saved_tokens=int(tokens or 0),
        keyed_identity=identity,
        child=None if child is None else str(child),
        items=None if items is None else int(items),
    )


@dataclass(frozen=True, slots=True)
class JournalEntry(_Record):
    id: int
    run_id: str
    node_id: str
    attempt: int
    cache_key: str
    components: dict[str, Any]  # the key's (`cache_key.components_of`): all of them hashed
    status: NodeStatus
    started_at: float
    finished_at: float | None = None
    output_digest: str | None = None
    error: str | None = None
    idempotency_key: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    artifacts: dict[str, str] = field(default_factory=dict)  # relative path -> blob digest
    cached_from: str | None = None  # run id whose result this entry re-used
    invalidated_by: str | None = None
    notes: KeyNotes = NO_NOTES  # stored with the components (not a column of its own)


@dataclass(frozen=True, slots=True)
class Gate(_Record):
    run_id: str
    node_id: str
    prompt: str
    status: GateStatus
    created_at: float
    decided_by: str | None = None
    comment: str | None = None
    decided_at: float | None = None
    #: the approval node's cache key when the gate was opened ("" for gates opened before it
    #: was recorded): a decision answers that question only; a changed key re-opens the gate
    cache_key: str = ""
    #: the choice decided (`approve`, `reject`, or another of the gate's `choices:`); None for
    #: gates decided before policies (revision 0008), or closed with their run
    decision: str | None = None
    #: what a decision carries: `values` (the form's) and `approvers` ([{user, at, comment}])
    outcome: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AuditEvent(_Record):
    id: int
    at: float
    actor: str
    action: str
    run_id: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GateVote(_Record):
    """One person's answer to one opening of a gate (`opened_at` is the gate's `created_at`;
    a re-opened gate starts with no votes). A person has at most one vote and one rejection
    per opening: a second identical ballot is the same vote (it counts once)."""

    run_id: str
    node_id: str
    opened_at: float
    user: str
    choice: str  # one of the gate's choices; `reject` ends the gate
    at: float
    comment: str = ""
    values: dict[str, Any] = field(default_factory=dict)  # the gate's `form:` values

    @property
    def ballot(self) -> str:
        """What makes a vote unique per person: a rejection, or any other choice."""
        return "reject" if self.choice == "reject" else "vote"

    @property
    def proposal(self) -> str:
        """What a vote approves: its choice and its form values (canonical JSON). Votes count
        together only when this is the same (DESIGN.md "A quorum approves one thing")."""
        return json.dumps([self.choice, self.values], sort_keys=True, separators=(",", ":"), default=str)


def proposal_of(votes: list[GateVote]) -> GateVote | None:
    """The vote that made the proposal of a gate opening: its first non-rejecting vote."""
    return next((v for v in sorted(votes, key=lambda v: (v.at, v.user)) if v.ballot == "vote"), None)


@dataclass(frozen=True, slots=True)
class GateDeadline(_Record):
    """A durable deadline of one opening of a gate: `name` is `remind:<i>`, `escalate` or
    `timeout`; it fires once (`fired_at`, `fired_by`: a compare-and-swap on the row)."""

    run_id: str
    node_id: str
    opened_at: float
    name: str
    due_at: float
    fired_at: float | None = None
    fired_by: str | None = None


@dataclass(frozen=True, slots=True)
class Delivery(_Record):
    """A state-carrying reply waiting in the outbox (or delivered): written with the state
    change it tells, delivered at least once. `kind` says what happened (`run_finished`,
    `gate_reminder`, `gate_escalated`, `gate_timed_out`, `notice`, `notice_digest`),
    `payload` its data (the status, the reason, the node); where it goes is the run's
    (`platform`, `conversation`, `thread` as they were when it was written), or for a notice
    the subscribed place. A deliverer claims it with a lease (`claimed_by`,
    `lease_expires_at`); `attempts` counts the claims. `dedupe`: a notice's unique key (one
    row per place, run and event), None for a run's own replies."""

    id: int
    run_id: str
    kind: str
    platform: str
    conversation: str
    thread: str | None
    payload: dict[str, Any]
    created_at: float
    due_at: float
    attempts: int = 0
    claimed_by: str | None = None
    lease_expires_at: float | None = None
    delivered_at: float | None = None
    last_error: str | None = None
    dedupe: str | None = None

    @property
    def key(self) -> str:
        """Stable across redeliveries: what the platform side deduplicates on."""
        return f"outbox:{self.id}"


#: Statuses a run may be pruned in: it is over and nobody waits on it (never paused, running,
#: needs_attention or pending; DESIGN.md "Retention").
PRUNABLE: frozenset[RunStatus] = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})


@dataclass(frozen=True, slots=True)
class PruneCounts:
    """Rows a prune deleted (or, for a dry run, would delete)."""

    runs: int = 0
    journal: int = 0
    gates: int = 0
    votes: int = 0
    deadlines: int = 0
    outbox: int = 0

    def __add__(self, other: PruneCounts) -> PruneCounts:
        return PruneCounts(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple(), strict=True)))

    def as_tuple(self) -> tuple[int, int, int, int, int, int]:
        return (self.runs, self.journal, self.gates, self.votes, self.deadlines, self.outbox)

    def as_dict(self) -> dict[str, int]:
        names = ("runs", "journal", "gates", "votes", "deadlines", "outbox")
        return dict(zip(names, self.as_tuple(), strict=True))


@dataclass(frozen=True, slots=True)
class OpenEvent:
    """A chat event recorded before its acknowledgement whose handling never finished."""

    platform: str
    event_id: str
    at: float  # when it was (last) claimed
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Schedule(_Record):
    """A rule that starts runs nobody typed (DESIGN.md "Automation" -> "Schedules").

    `source` is `yaml` (a workflow's `schedules:`, synced from the catalog; its id is
    `<workflow>.<id>`) or `chat` (`schedule add`; `owner` added it). Its runs start as
    `principal` and report in (`platform`, `conversation`). `evaluated_until`: the latest
    due time a tick has handled (fires after it are still to come). `version` counts changes
    (pause, resume, a changed rule): every change is a compare-and-swap on it."""

    id: str
    workflow: str
    source: str  # yaml | chat
    cron: str | None
    every: float | None
    timezone: str
    args: dict[str, Any]
    overlap: str  # skip | queue | cancel_running | allow
    catchup: str  # latest | none | all
    catchup_window: float
    platform: str
    conversation: str
    principal: str
    owner: str | None
    created_at: float
    updated_at: float
    evaluated_until: float
    version: int = 1
    paused: bool = False
    note: str | None = None  # why it is paused (a person's note, or the authorization check's)
    paused_by: str | None = None

    @property
    def started_by(self) -> str:
        """What its runs record as `started_by`."""
        return f"schedule:{self.id}"


class FireOutcome(StrEnum):
    STARTED = "started"  # a run started (`run_id`)
    SKIPPED = "skipped"  # overlap `skip`: a run of the schedule was still active (`detail.active`)
    MISSED = "missed"  # due while nothing ticked, and the catch-up rule started nothing for it
    FAILED = "failed"  # the run could not start (`detail.error`)
    REFUSED = "refused"  # its principal may no longer run the workflow: the schedule was paused


@dataclass(frozen=True, slots=True)
class Fire(_Record):
    """What became of one due time of a schedule. (`schedule_id`, `due_at`) is unique in the
    store: of replicas, restarts and repeated ticks, one writes it (and starts its run)."""

    schedule_id: str
    due_at: float
    outcome: FireOutcome
    at: float
    by: str  # the replica that fired it
    run_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Subscription(_Record):
    """A conversation (`platform`, `conversation`) told about `event`s of `workflow`'s runs
    (`*`: every workflow), on the right of `created_by` to view those runs."""

    platform: str
    conversation: str
    workflow: str
    event: str
    created_by: str
    created_at: float
