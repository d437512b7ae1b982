"""Seeding a Baton database with history: bulk inserts of runs, their journals, audit events
and processed event ids, so command latency is measured against a store that has been used.

The rows are shaped like the ones Baton writes (`SqlStore.create_run`, `journal_start`, …):
statuses mostly completed, some failed, cancelled or paused, spread over conversations and
workflows; one journal entry, one audit event and one processed event id per run.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

from core.store.repository import SqlStore
from core.store.tables import AUDIT, BLOBS, JOURNAL, PROCESSED_EVENTS, RUNS

BATCH = 5_000
STATUSES = ["completed"] * 90 + ["failed"] * 5 + ["cancelled"] * 3 + ["paused"] * 2
WORKFLOWS = [f"wf{i:02d}" for i in range(20)] + ["hello", "gated"]


def _batches(n: int) -> Iterator[range]:
    for start in range(0, n, BATCH):
        yield range(start, min(n, start + BATCH))


def seed_history(store: SqlStore, n: int, *, seed: int = 8) -> float:
    """Insert `n` historical runs; returns the seconds it took."""
    rng = random.Random(seed)
    started = time.perf_counter()
    args = json.dumps({"message": "history"}, separators=(",", ":"), sort_keys=True).encode()
    digest = hashlib.sha256(args).hexdigest()
    output = b"ok"
    out_digest = hashlib.sha256(output).hexdigest()
    now = time.time() - 86_400 * 30
    engine = store._engine  # bulk inserts: the bench writes history straight into the tables
    with engine.begin() as conn:
        insert_blobs = sa.insert(BLOBS).values(digest=sa.bindparam("d"), data=sa.bindparam("b"), size=2)
        conn.execute(insert_blobs, [{"d": digest, "b": args}, {"d": out_digest, "b": output}])
    for batch in _batches(n):
        runs: list[dict[str, Any]] = []
        journal: list[dict[str, Any]] = []
        audit: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = []
        for i in batch:
            at = now + i * 20.0
            run_id = f"h{i:011x}"
            status = rng.choice(STATUSES)
            runs.append({
                "id": run_id, "workflow": rng.choice(WORKFLOWS), "platform": "slack",
                "conversation": f"C{rng.randrange(500):04d}", "thread": f"{at:.6f}",
                "requester": f"slack:U{rng.randrange(200):04d}", "args_digest": digest,
                "status": status, "version": 3, "created_at": at, "updated_at": at + 5,
                "resumed_from": None, "lease_owner": None, "lease_expires_at": None,
                "status_by": "baton", "reason": None if status == "completed" else f"{status} in history",
            })  # fmt: skip
            journal.append({
                "run_id": run_id, "node_id": "step", "attempt": 1, "cache_key": f"{i:064x}",
                "components": {"node": "step"}, "status": "completed", "started_at": at,
                "finished_at": at + 1, "output_digest": out_digest, "error": None,
                "idempotency_key": None, "tokens_in": 0, "tokens_out": 0, "artifacts": {},
                "cached_from": None, "invalidated_by": None,
            })  # fmt: skip
            audit.append({"at": at, "actor": runs[-1]["requester"], "action": "start", "run_id": run_id,
                          "details": {"workflow": runs[-1]["workflow"]}})  # fmt: skip
            events.append({"platform": "slack", "event_id": f"Ev{i:010d}", "at": at})
        with engine.begin() as conn:
            conn.execute(sa.insert(RUNS), runs)
            conn.execute(sa.insert(JOURNAL), journal)
            conn.execute(sa.insert(AUDIT), audit)
            conn.execute(sa.insert(PROCESSED_EVENTS), events)
    with engine.begin() as conn:
        conn.execute(sa.text("ANALYZE"))  # as autovacuum / a long-lived SQLite would have
    return time.perf_counter() - started
