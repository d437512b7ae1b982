"""The store port: every database operation Baton performs, as one protocol.

The implementation is `core.store.repository.SqlStore` (SQLite or PostgreSQL through
the same SQLAlchemy/SQLModel code). Calls are synchronous and short; async code
calls them directly (they are milliseconds) and never holds a transaction open
across an `await`.

All status changes are compare-and-swap:
    UPDATE runs SET status=:to, version=version+1, ...
     WHERE id=:id AND status IN (:allowed) [AND version=:version]
Zero rows updated means another actor won: the method re-reads the run and raises
`RunNotResumable` / `InvalidTransition` carrying the current status and `status_by`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.store.records import AuditEvent, Gate, JournalEntry, NodeStatus, Run, RunStatus


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
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", hashlib.sha256(self.output).hexdigest())


class Store(Protocol):
    # -- lifecycle --------------------------------------------------------------
    def migrate(self) -> None:
        """Bring the schema to the newest alembic revision (idempotent, safe to race)."""

    def close(self) -> None: ...

    # -- blobs (content-addressed; sha256 hex digest) ----------------------------
    def put_blob(self, data: bytes) -> str:
        """Store bytes once, return their sha256 hex digest."""

    def get_blob(self, digest: str) -> bytes:
        """Raise KeyError when unknown."""

    def get_blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        """Fetch many in one query."""


    # -- runs ---------------------------------------------------------------------
    def create_run(
        self,
        *,
        workflow: str,
        platform: str,
        conversation: str,
        thread: str | None,
        requester: str,
        args_digest: str,
        resumed_from: str | None = None,
        status: RunStatus = RunStatus.PENDING,
        lease_owner: str | None = None,
        lease_seconds: float | None = None,
        origin_event: str | None = None,
    ) -> Run:
        """`origin_event`: `"<platform>:<event_id>"` of the chat command that started it."""

    def run_for_event(self, origin_event: str) -> Run | None:
        """The run started by that chat event (`create_run(origin_event=…)`), or None."""

    def get_run(self, run_id: str) -> Run:
        """Exact id; RunNotFound."""

    def find_run(self, id_or_prefix: str) -> Run:
        """Exact id or unique prefix; RunNotFound / AmbiguousRunId."""

    def runs_with_args(self, prefix: str, limit: int = 1000) -> list[Run]:
        """Runs whose args digest starts with the hex `prefix` (an args handle): one run per
        distinct (args digest, workflow, requester), which is all a view check needs; at most
        `limit`. Only runs' args: a handle never names a step's output or any other blob."""

    def unfinished_runs(self, workflow: str, platform: str, conversation: str) -> list[Run]:
        """Failed, paused and needs_attention runs of `workflow` there, newest first (indexed)."""

    def recent_runs(
        self, *, platform: str | None = None, conversation: str | None = None, limit: int = 20
    ) -> list[Run]: ...

    def runs_in_thread(self, platform: str, conversation: str, thread: str) -> list[Run]: ...

    def set_thread(self, run_id: str, thread: str) -> Run: ...

    def transition(
        self,
        run_id: str,
        to: RunStatus,
        *,
        actor: str,
        reason: str | None = None,
        expected_version: int | None = None,
        allowed_from: Iterable[RunStatus] | None = None,
        lease_owner: str | None = None,
        lease_seconds: float | None = None,
    ) -> Run:
        """CAS status change. `allowed_from` defaults to every legal source of `to` and is
        always intersected with them (an illegal change raises InvalidTransition before any
        SQL). Going to `running` sets the lease; leaving it clears the lease."""

    # -- leases -------------------------------------------------------------------
    def renew_leases(self, owner: str, lease_seconds: float) -> int:
        """One UPDATE for every running run this owner holds; returns how many."""

    def lapsed_runs(self, now: float | None = None) -> list[Run]:
        """Running runs whose lease expired (their owner died)."""

    def runs_leased_by(self, owner_prefix: str) -> list[Run]:
        """Running runs whose lease_owner starts with `owner_prefix` (a dead local process)."""

    def take_over(self, run: Run, new_owner: str, lease_seconds: float) -> Run:
        """CAS on `run.version`: exactly one process wins the recovery; the others get
        RunNotResumable naming the winner."""

    # -- journal ------------------------------------------------------------------
    def journal_start(
        self,
        *,
        run_id: str,
        node_id: str,
        cache_key: str,
        components: dict[str, Any],
        attempt: int,
        idempotency_key: str | None,
    ) -> int:
        """Write a `started` entry (committed before the side effect); returns its id."""

    def journal_complete(
        self,
        *,
        run_id: str,
        node_id: str,
        cache_key: str,
        components: dict[str, Any],
        attempt: int,
        idempotency_key: str | None,
        output: bytes,
        tokens_in: int = 0,
        tokens_out: int = 0,
    ) -> str:
        """Store `output` and a `completed` entry in ONE transaction; returns the output's
        digest. Only for steps whose re-run is safe (pure/idempotent): no `started` entry
        precedes it, so a crash before it leaves nothing and recovery runs the step again."""

    def journal_complete_many(self, results: Sequence[StepResult]) -> None:
        """`journal_complete` for several steps, all in ONE transaction (group commit)."""

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
    ) -> None: ...

    def journal_record_cached(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        """Copy the stored rows of these entries (by id) into `run_id`'s journal, in one
        transaction: `completed`, no tokens spent, `cached_from` = the run that computed the
        result, and `components["_tokens"]` = the tokens an original spent (what re-use saves)."""

    def journal(self, run_ids: Sequence[str]) -> list[JournalEntry]:
        """Every entry of these runs, in one query, oldest first."""

    def lineage(self, run_id: str) -> list[str]:
        """`run_id`, then the run it was resumed from, and so on (oldest last)."""

    def invalidate(self, run_id: str, node_ids: Iterable[str], *, actor: str) -> int:
        """Mark completed entries of those nodes in `run_id` invalidated; returns count."""

    # -- gates --------------------------------------------------------------------
    def open_gate(self, run_id: str, node_id: str, prompt: str, cache_key: str = "") -> Gate:
        """A waiting gate for this question. Idempotent for the same `cache_key` (or when
        none is given); a gate decided for another key is re-opened without its decision."""

    def get_gate(self, run_id: str, node_id: str) -> Gate: ...

    def waiting_gates(
        self, *, platform: str, conversation: str, thread: str | None = None
    ) -> list[tuple[Run, Gate]]:
        """Gates waiting in that conversation (and thread, when given), newest first."""

    def waiting_gates_and_args(self, run: Run) -> tuple[list[Gate], bytes]:
        """The gates waiting in `run`, newest first, and its args blob (`get_blob(run.args_digest)`,
        KeyError if missing): what an approval reads before its CAS, in one query."""

    def decide_gate(self, run_id: str, node_id: str, *, approved: bool, by: str, comment: str | None) -> Gate:
        """CAS waiting -> approved|rejected; GateAlreadyDecided (with `by`) if it was not waiting."""

    # -- audit and dedupe ------------------------------------------------------------
    def audit(
        self, *, actor: str, action: str, run_id: str | None = None, details: dict[str, Any] | None = None
    ) -> None: ...

    def audit_log(self, run_id: str) -> list[AuditEvent]: ...

    def claim_event(self, platform: str, event_id: str, *, stale_after: float = 60.0) -> bool:
        """True the first time an incoming event id is seen, and for a redelivery of one
        whose claim was never finished and is older than `stale_after` seconds (the claimer
        died; exactly one concurrent re-claimer wins); False for a duplicate."""

    def finish_event(self, platform: str, event_id: str) -> None:
        """The claimed event was handled: from now on every redelivery is a duplicate."""

    def forget_events(self, before: float) -> int:
        """Drop processed-event ids recorded before `before` (epoch seconds); returns how many."""

    # -- chat adapters' values ----------------------------------------------------------
    def put_state(self, platform: str, key: str, value: str) -> None:
        """Keep a small text value under (platform, key), replacing what was there."""

    def get_state(self, platform: str, key: str) -> str | None:
        """The value kept under (platform, key), or None."""

    def keep_state(self, platform: str, key: str, value: str) -> str:
        """The value under (platform, key); `value` is written only when there was none, so
        racing processes all get the first one. Under platform `"baton"` (Baton's own values,
        e.g. the run pages' signing key) housekeeping never drops it."""

    # -- run pages ----------------------------------------------------------------------------
    def run_gates(self, run_id: str) -> list[Gate]:
        """Every approval gate of the run, waiting or decided, oldest first (one query)."""

    def run_pulse(self, run_id: str) -> tuple[object, ...] | None:
        """A value that changes whenever anything a run's page shows changes (status, journal,
        audit), in one indexed query; None when there is no such run."""

    # -- what a chat command always writes together, in one round trip (issue 8) ---------
    def command_runs(
        self, origin_event: str, workflow: str, platform: str, conversation: str
    ) -> tuple[Run | None, list[Run]]:
        """`run_for_event(origin_event)` and `unfinished_runs(workflow, platform,
        conversation)` in one query."""

    def create_run_audited(
        self,
        *,
        args: bytes,
        audit_details: dict[str, Any],
        workflow: str,
        platform: str,
        conversation: str,
        thread: str | None,
        requester: str,
        resumed_from: str | None = None,
        status: RunStatus = RunStatus.PENDING,
        lease_owner: str | None = None,
        lease_seconds: float | None = None,
        origin_event: str | None = None,
    ) -> Run:
        """`put_blob(args)`, `create_run(args_digest=<its digest>, …)` and the requester's
        `start` audit row (`audit_details`), all or none: one statement on PostgreSQL."""

    def approve_gate(
        self, run: Run, node_id: str, *, by: str, comment: str | None, lease_owner: str, lease_seconds: float
    ) -> tuple[Gate, Run]:
        """`decide_gate(approved=True)`, then `transition` of `run` (at `run.version`) from
        paused to running with the lease, then the `approve` audit row, as one change (one
        statement on PostgreSQL). GateAlreadyDecided when the gate was not waiting; when the
        run moved meanwhile, the gate is left waiting and the CAS error is raised."""

    def finish_event_audited(
        self,
        platform: str,
        event_id: str,
        *,
        actor: str,
        action: str,
        run_id: str | None,
        details: dict[str, Any],
    ) -> None:
        """`audit(…)` and `finish_event(platform, event_id)` in one transaction (one statement
        on PostgreSQL): a handled command is audited once, even when it is redelivered."""

    # -- housekeeping (bot/housekeeping.py) ---------------------------------------------
    def forget_state(self, before: float) -> int:
        """Drop chat adapters' values last written before `before` (epoch seconds), never
        Baton's own (platform `"baton"`); returns how many. A later `get_state` of such a key
        is None, as if it was never kept."""
