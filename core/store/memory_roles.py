"""`MemoryStore`'s roles over its tables (`memory_unit.MemoryDb`): runs and leases, the journal
and blobs, gates, events and the audit trail, platform state, views. Each holds the one
`MemoryDb` and inherits nothing; every call takes its lock. Votes and deadlines, the
outbox, retention, schedules and subscriptions have modules of their own (`memory_*.py`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from core.errors import AmbiguousRunId, RunNotFound, StoreError
from core.store import cas
from core.store.memory_unit import MemoryDb, copied
from core.store.port import Pulse, StepEntry, StepResult, digest_bytes
from core.store.records import (
    MARKER_KEY,
    AuditEvent,
    Gate,
    GateStatus,
    JournalEntry,
    NodeStatus,
    OpenEvent,
    Run,
    RunStatus,
    Transition,
)
from core.store.state_sql import KEPT

_FINAL = (NodeStatus.COMPLETED, NodeStatus.FAILED)


class MemoryRuns:
    """The `Runs` and `Leases` roles in memory."""

    def __init__(self, db: MemoryDb) -> None:
        self._db = db

    # -- runs ----------------------------------------------------------------------------------
    def get_run(self, run_id: str) -> Run:
        with self._db.lock:
            return self._db.t.run(run_id)

    def find_run(self, id_or_prefix: str) -> Run:
        prefix = cas.normalize_prefix(id_or_prefix)
        if prefix is None:
            raise RunNotFound(f"No run has the id {id_or_prefix.strip()!r}.", run_id=id_or_prefix)
        with self._db.lock:
            runs = _newest([r for r in self._db.t.runs.values() if r.id.startswith(prefix)])[:6]
        if not runs:
            with self._db.lock:
                self._db.t.raise_if_pruned(prefix, exact=False)
            raise RunNotFound(f"No run id starts with {prefix}.", run_id=prefix)
        exact = [run for run in runs if run.id == prefix]
        if exact:
            return exact[0]
        if len(runs) > 1:
            listed = ", ".join(run.id for run in runs[:5]) + (", …" if len(runs) > 5 else "")
            raise AmbiguousRunId(f"Run id {prefix} matches several runs: {listed}.", run_id=prefix,
                                 candidates=runs)
        return runs[0]

    def runs_with_args(self, prefix: str, limit: int = 1000) -> list[Run]:
        low = cas.normalize_prefix(prefix)
        if low is None:
            return []
        first: dict[tuple[str, str, str], Run] = {}
        with self._db.lock:
            for run in self._db.t.runs.values():
                if run.args_digest.startswith(low):
                    key = (run.args_digest, run.workflow, run.requester)
                    if key not in first or run.id < first[key].id:
                        first[key] = run
        return sorted(first.values(), key=lambda r: r.id)[:limit]

    def recent_runs(
        self, *, platform: str | None = None, conversation: str | None = None, limit: int = 20,
        requester: str | None = None, workflow: str | None = None, status: str | None = None,
    ) -> list[Run]:
        with self._db.lock:
            runs = [
                r
                for r in self._db.t.runs.values()
                if platform in (None, r.platform) and conversation in (None, r.conversation)
                and requester in (None, r.requester) and workflow in (None, r.workflow)
                and status in (None, str(r.status))
            ]
        return _newest(runs)[:limit]

    def child_runs(self, parent_runs: Sequence[str]) -> list[Run]:
        wanted = set(parent_runs)
        with self._db.lock:
            children = [r for r in self._db.t.runs.values() if r.parent_run in wanted]
        return _newest(children)

    def paused_parents(self, limit: int = 500) -> list[Run]:
        with self._db.lock:
            parents = {r.parent_run for r in self._db.t.runs.values() if r.parent_run}
            paused = [r for r in self._db.t.runs.values() if r.id in parents and r.status is RunStatus.PAUSED]
        return sorted(paused, key=lambda r: r.updated_at)[:limit]

    def adopt_child(self, run_id: str, parent_run: str) -> Run:
        with self._db.lock:
            run = self._db.t.run(run_id).evolve(parent_run=parent_run)
            self._db.t.runs[run_id] = run
            return run

    def runs_in_thread(self, platform: str, conversation: str, thread: str) -> list[Run]:
        with self._db.lock:
            here = [r for r in self._db.t.runs.values() if (r.platform, r.conversation, r.thread) == (
                platform, conversation, thread)]  # fmt: skip
        return _newest(here)

    def set_thread(self, run_id: str, thread: str) -> Run:
        with self._db.lock:
            run = self._db.t.run(run_id).evolve(thread=thread)
            self._db.t.runs[run_id] = run  # its gates follow the run's thread
            return run

    def transition(self, change: Transition) -> Run:
        run: Run = self._db.one(lambda tx: tx.transition(change))
        return run

    # -- leases --------------------------------------------------------------------------------
    def renew_leases(self, owner: str, lease_seconds: float) -> int:
        expires = self._db.now() + lease_seconds
        with self._db.lock:
            mine = [r for r in self._db.t.runs.values() if _running(r) and r.lease_owner == owner]
            for run in mine:
                self._db.t.runs[run.id] = run.evolve(lease_expires_at=expires)
        return len(mine)

    def lapsed_runs(self, now: float | None = None) -> list[Run]:
        when = self._db.clock() if now is None else now
        with self._db.lock:
            runs = self._db.t.runs.values()
            lapsed = [r for r in runs if _running(r) and (r.lease_expires_at or 0.0) < when]
        return sorted(lapsed, key=lambda r: r.lease_expires_at or 0.0)

    def runs_leased_by(self, owner_prefix: str) -> list[Run]:
        with self._db.lock:
            return [
                r
                for r in self._db.t.runs.values()
                if _running(r) and (r.lease_owner or "").startswith(owner_prefix)
            ]

    def take_over(self, run: Run, new_owner: str, lease_seconds: float) -> Run:
        now = self._db.now()
        with self._db.lock:
            current = self._db.t.run(run.id)
            as_read = (run.version, RunStatus.RUNNING, run.lease_owner, run.lease_expires_at)
            if (current.version, current.status, current.lease_owner, current.lease_expires_at) != as_read:
                raise cas.lost_takeover(current)
            won = current.evolve(
                version=current.version + 1, lease_owner=new_owner, lease_expires_at=now + lease_seconds,
                updated_at=now,
            )  # fmt: skip
            self._db.t.runs[run.id] = won
            return won

    def release_leases(self, owner: str) -> int:
        lapsed = self._db.now() - 0.001
        with self._db.lock:
            mine = [r for r in self._db.t.runs.values() if _running(r) and r.lease_owner == owner]
            for run in mine:
                self._db.t.runs[run.id] = run.evolve(lease_expires_at=lapsed)
        return len(mine)


class MemoryJournal:
    """The `Journal` and `Blobs` roles in memory."""

    def __init__(self, db: MemoryDb) -> None:
        self._db = db

    # -- blobs ---------------------------------------------------------------------------------
    def put_blob(self, data: bytes) -> str:
        digest = digest_bytes(data)
        with self._db.lock:
            self._db.t.blobs.setdefault(digest, bytes(data))
        return digest

    def get_blob(self, digest: str) -> bytes:
        with self._db.lock:
            return self._db.t.blobs[digest]

    def get_blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        with self._db.lock:
            return {d: self._db.t.blobs[d] for d in sorted(set(digests)) if d in self._db.t.blobs}

    # -- journal -------------------------------------------------------------------------------
    def journal_start(self, step: StepEntry) -> int:
        now = self._db.now()
        with self._db.lock:
            entry = self._db.t.add_entry(
                "record a step start", run_id=step.run_id, node_id=step.node_id, attempt=step.attempt,
                cache_key=step.cache_key, components=copied(step.components), notes=step.notes,
                status=NodeStatus.STARTED, started_at=now, idempotency_key=step.idempotency_key,
            )  # fmt: skip
        return entry.id

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
        status = NodeStatus(status)
        if status not in _FINAL:
            raise ValueError(f"journal_finish takes completed or failed, not {status.value}")
        now = self._db.now()
        with self._db.lock:
            for data in blobs:
                self._db.t.blobs.setdefault(digest_bytes(data), bytes(data))
            entry = self._db.t.journal.get(entry_id)
            if entry is None:
                raise StoreError(f"Journal entry {entry_id} does not exist.", hint="This is a bug in Baton.")
            if entry.status is not NodeStatus.STARTED:
                raise cas.already_settled(entry)
            self._db.t.journal[entry_id] = entry.evolve(
                status=status, finished_at=now, output_digest=output_digest, error=error,
                tokens_in=tokens_in, tokens_out=tokens_out, artifacts=copied(artifacts or {}),
            )  # fmt: skip

    def journal_complete_many(self, results: Sequence[StepResult]) -> None:
        if not results:
            return
        now = self._db.now()
        with self._db.transaction() as tx:
            for r in sorted(results, key=lambda r: r.digest):
                tx.put_blob(r.output)
            for r in results:
                tx.add_entry(
                    "record step results", run_id=r.run_id, node_id=r.node_id, attempt=r.attempt,
                    cache_key=r.cache_key, components=copied(r.components), notes=r.notes,
                    status=NodeStatus.COMPLETED,
                    started_at=now, finished_at=now, output_digest=r.digest,
                    idempotency_key=r.idempotency_key, tokens_in=r.tokens_in, tokens_out=r.tokens_out,
                )  # fmt: skip

    def journal_record_cached(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        if not entries:
            return
        now = self._db.now()
        plain = sorted(e.id for e in entries if not (e.tokens_in or e.tokens_out))
        spent = [e for e in entries if e.tokens_in or e.tokens_out]
        with self._db.lock:
            stored = [self._db.t.journal[i] for i in plain if i in self._db.t.journal]
        with self._db.transaction() as tx:
            for original in [*stored, *spent]:
                notes = original.notes
                if original.tokens_in or original.tokens_out:  # what re-using it saves
                    saved = original.tokens_in + original.tokens_out + notes.saved_tokens
                    notes = dataclasses.replace(notes, saved_tokens=saved)
                tx.add_entry(
                    "record re-used results", run_id=run_id, node_id=original.node_id,
                    attempt=original.attempt, cache_key=original.cache_key,
                    components=copied(original.components), notes=notes,
                    status=NodeStatus.COMPLETED, started_at=now, finished_at=now,
                    output_digest=original.output_digest, idempotency_key=original.idempotency_key,
                    artifacts=copied(original.artifacts), cached_from=original.cached_from or original.run_id,
                )  # fmt: skip

    def journal(self, run_ids: Sequence[str]) -> list[JournalEntry]:
        with self._db.lock:
            ids = sorted(i for run_id in set(run_ids) for i in self._db.t.entries_of.get(run_id, ()))
            return [self._db.t.journal[i] for i in ids]

    def journal_outline(self, run_ids: Sequence[str]) -> list[JournalEntry]:
        return [e if e.cache_key == MARKER_KEY or not e.components else dataclasses.replace(e, components={})
                for e in self.journal(run_ids)]  # fmt: skip

    def lineage(self, run_id: str) -> list[str]:
        with self._db.lock:
            chain = [self._db.t.run(run_id).id]
            parent = self._db.t.runs[run_id].resumed_from
            while parent is not None and parent in self._db.t.runs and len(chain) <= 10_000:
                chain.append(parent)
                parent = self._db.t.runs[parent].resumed_from
        return chain


class MemoryGates:
    """The `Gates` role in memory."""

    def __init__(self, db: MemoryDb) -> None:
        self._db = db

    # -- gates ---------------------------------------------------------------------------------
    def open_gate(self, run_id: str, node_id: str, prompt: str, cache_key: str = "",
                  decided_before: float | None = None) -> Gate:
        now = self._db.now()
        with self._db.lock:
            gate = self._db.t.gates.get((run_id, node_id))
            dropped = decided_before is not None and gate is not None and gate.decided_at is not None and (
                gate.decided_at < decided_before
            )
            stale = gate is not None and cache_key != "" and (gate.cache_key != cache_key or dropped)
            if (gate is None and run_id in self._db.t.runs) or stale:
                gate = Gate(run_id, node_id, prompt, GateStatus.WAITING, now, cache_key=cache_key)
            if gate is not None:
                self._db.t.gates[(run_id, node_id)] = gate
            return self._db.t.gate(run_id, node_id)

    def get_gate(self, run_id: str, node_id: str) -> Gate:
        with self._db.lock:
            return self._db.t.gate(run_id, node_id)

    def waiting_gate(self, run_id: str) -> Gate | None:
        with self._db.lock:
            return self._db.t.waiting_gate(run_id)

    def decided_gate(self, run_id: str) -> Gate | None:
        with self._db.lock:
            decided = [g for g in self._db.t.gates_of(run_id) if g.status is not GateStatus.WAITING]
        return min(decided, key=lambda g: (-(g.decided_at or 0.0), g.node_id), default=None)

    def waiting_gates(
        self, *, platform: str, conversation: str, thread: str | None = None
    ) -> list[tuple[Run, Gate]]:
        with self._db.lock:
            pairs = [
                (run, gate)
                for gate in self._db.t.gates.values()
                if gate.status is GateStatus.WAITING
                for run in [self._db.t.runs[gate.run_id]]
                if (run.platform, run.conversation) == (platform, conversation)
                and thread in (None, run.thread)
            ]
        return sorted(pairs, key=lambda pair: pair[1].created_at, reverse=True)

    def waiting_gates_on(self, platform: str, limit: int = 100) -> list[tuple[Run, Gate]]:
        with self._db.lock:
            pairs = [
                (run, gate)
                for gate in self._db.t.gates.values()
                if gate.status is GateStatus.WAITING
                for run in [self._db.t.runs[gate.run_id]]
                if run.platform == platform
            ]
        return sorted(pairs, key=lambda pair: pair[1].created_at, reverse=True)[:limit]

    def run_gates(self, run_id: str) -> list[Gate]:
        with self._db.lock:
            return self._db.t.gates_of(run_id)


class MemoryEvents:
    """The `Events` role in memory: the audit trail and incoming events' dedupe."""

    def __init__(self, db: MemoryDb) -> None:
        self._db = db

    # -- events and audit ----------------------------------------------------------------------
    def audit(
        self, *, actor: str, action: str, run_id: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        with self._db.transaction() as tx:
            tx.audit(actor=actor, action=action, run_id=run_id, details=details)

    def audit_log(self, run_id: str) -> list[AuditEvent]:
        with self._db.lock:
            return [e for e in self._db.t.audit.values() if e.run_id == run_id]

    def audit_since(self, since: float) -> list[AuditEvent]:
        with self._db.lock:
            return sorted((e for e in self._db.t.audit.values() if e.at >= since), key=lambda e: e.id)

    def claim_event(
        self,
        platform: str,
        event_id: str,
        *,
        stale_after: float = 60.0,
        payload: dict[str, Any] | None = None,
    ) -> bool:
        now = self._db.now()
        with self._db.lock:
            seen = self._db.t.events.get((platform, event_id))
            if seen is not None and (seen[1] or seen[0] >= now - stale_after):
                return False  # handled, or claimed recently by a live handler
            self._db.t.events[(platform, event_id)] = (now, False)
            if seen is None and payload is not None:
                self._db.t.event_payloads[(platform, event_id)] = copied(payload)
            return True

    def open_events(self, before: float, limit: int = 100) -> list[OpenEvent]:
        with self._db.lock:
            found = [
                OpenEvent(platform, event_id, at, copied(self._db.t.event_payloads[(platform, event_id)]))
                for (platform, event_id), (at, done) in self._db.t.events.items()
                if not done and at < before and (platform, event_id) in self._db.t.event_payloads
            ]
        return sorted(found, key=lambda e: e.at)[:limit]

    def finish_event(self, platform: str, event_id: str) -> None:
        with self._db.transaction() as tx:
            tx.finish_event(platform, event_id)

    def forget_events(self, before: float) -> int:
        with self._db.lock:
            old = [key for key, (at, _) in self._db.t.events.items() if at < before]
            for key in old:
                del self._db.t.events[key]
                self._db.t.event_payloads.pop(key, None)
        return len(old)


class MemoryState:
    """The `PlatformState` role in memory."""

    def __init__(self, db: MemoryDb) -> None:
        self._db = db

    # -- platform state ------------------------------------------------------------------------
    def put_state(self, platform: str, key: str, value: str) -> None:
        now = self._db.now()
        with self._db.lock:
            self._db.t.state[(platform, key)] = (value, now)

    def get_state(self, platform: str, key: str) -> str | None:
        with self._db.lock:
            kept = self._db.t.state.get((platform, key))
        return None if kept is None else kept[0]

    def keep_state(self, platform: str, key: str, value: str) -> str:
        now = self._db.now()
        with self._db.lock:
            return self._db.t.state.setdefault((platform, key), (value, now))[0]

    def forget_state(self, before: float) -> int:
        with self._db.lock:
            old = [k for k, (_, at) in self._db.t.state.items() if at < before and k[0] != KEPT]
            for k in old:
                del self._db.t.state[k]
        return len(old)


class MemoryViews:
    """The `Views` role in memory."""

    def __init__(self, db: MemoryDb) -> None:
        self._db = db

    # -- views ---------------------------------------------------------------------------------
    def command_runs(
        self, origin_event: str, workflow: str, platform: str, conversation: str
    ) -> tuple[Run | None, list[Run]]:
        with self._db.lock:
            started = [self._db.t.runs[i] for i in self._db.t.origin.get(origin_event, ())]
            waiting = [
                r
                for r in self._db.t.runs.values()
                if (r.platform, r.conversation, r.workflow) == (platform, conversation, workflow)
                and r.status.unfinished
            ]
        first = min(started, key=lambda r: r.created_at, default=None)
        return first, _newest(waiting)

    def gate_and_args(self, run: Run) -> tuple[Gate | None, bytes]:
        with self._db.lock:
            return self._db.t.waiting_gate(run.id), self._db.t.blobs[run.args_digest]

    def key_runs(self, *, key: str | None = None, workflow: str | None = None, limit: int = 500) -> list[Run]:
        inside = (RunStatus.RUNNING, RunStatus.NEEDS_ATTENTION, RunStatus.PAUSED, RunStatus.QUEUED)
        with self._db.lock:
            found = [r for r in self._db.t.runs.values() if r.concurrency is not None and r.status in inside
                     and key in (None, r.concurrency.key) and workflow in (None, r.workflow)]  # fmt: skip

        def order(r: Run) -> tuple[str, int, float, str]:
            queued = r.status is RunStatus.QUEUED
            since = (r.queued_at or 0.0) if queued else r.updated_at
            return (r.concurrency.key if r.concurrency else "", int(queued), since, r.id)

        return sorted(found, key=order)[:limit]

    def queued_runs(self, *, after: tuple[float, str] | None, up_to: float, limit: int = 500) -> list[Run]:
        with self._db.lock:
            found = [(r.queued_at, r.id, r) for r in self._db.t.runs.values() if r.status is RunStatus.QUEUED
                     and r.queued_at is not None and r.queued_at <= up_to
                     and (after is None or (r.queued_at, r.id) > after)]  # fmt: skip
        return [r for _, _, r in sorted(found, key=lambda f: (f[0], f[1]))[:limit]]

    def run_pulse(self, run_id: str) -> Pulse | None:
        with self._db.lock:
            run = self._db.t.runs.get(run_id)
            if run is None:
                return None
            entries = [self._db.t.journal[i] for i in self._db.t.entries_of.get(run_id, ())]
            audit = [e.id for e in self._db.t.audit.values() if e.run_id == run_id]
        return (
            run.status.value, run.version, run.thread, len(entries),
            sum(e.finished_at is not None for e in entries), max((e.id for e in entries), default=0),
            sum(e.status is NodeStatus.INVALIDATED for e in entries), max(audit, default=0),
        )  # fmt: skip



def _newest(runs: Iterable[Run]) -> list[Run]:
    return sorted(runs, key=lambda r: r.created_at, reverse=True)


def _running(run: Run) -> bool:
    return run.status is RunStatus.RUNNING
