"""Seeding a Baton database with history: bulk inserts of runs, their journals, audit events
and processed event ids, so command latency is measured against a store that has been used.

    python -m bench.seed --url sqlite:///D/baton.db --runs 1000000 [--platform console]

The rows are shaped like the ones Baton writes (`SqlStore.create_run`, `journal_start`, …):
statuses mostly completed, some failed, cancelled or paused, spread over 500 conversations
(run i in `conversation(i % 500)`) and 22 workflows; one journal entry, one audit event
and one processed event id per run.
On SQLite the rows go through the driver's `executemany` in large transactions (no
SQLAlchemy statement per batch; ≈ 1 M runs a minute here); on PostgreSQL through
SQLAlchemy's executemany in batches. `ANALYZE` at the end, as a long-lived database has it.
"""

from __future__ import annotations

import argparse
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
SQLITE_BATCH = 50_000
STATUSES = ["completed"] * 90 + ["failed"] * 5 + ["cancelled"] * 3 + ["paused"] * 2
WORKFLOWS = [f"wf{i:02d}" for i in range(20)] + ["hello", "gated"]
CONVERSATIONS = 500


def conversation(i: int) -> str:
    return f"C{i:04d}"


def history_run_id(i: int) -> str:
    return f"f{i:011x}"  # hex, as run ids are (`status` takes ids and prefixes in hex)


def _batches(n: int, size: int) -> Iterator[range]:
    for start in range(0, n, size):
        yield range(start, min(n, start + size))


def _rows(batch: range, rng: random.Random, platform: str, now: float, digest: str, out_digest: str) -> tuple[
    list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]
]:  # fmt: skip
    runs: list[dict[str, Any]] = []
    journal: list[dict[str, Any]] = []
    audit: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for i in batch:
        at = now + i * 20.0
        run_id = history_run_id(i)
        status = rng.choice(STATUSES)
        requester = f"{platform}:U{rng.randrange(200):04d}"
        workflow = rng.choice(WORKFLOWS)
        runs.append({
            "id": run_id, "workflow": workflow, "platform": platform,
            "conversation": conversation(i % CONVERSATIONS), "thread": f"{at:.6f}",
            "requester": requester, "args_digest": digest,
            "status": status, "version": 3, "created_at": at, "updated_at": at + 5,
            "resumed_from": None, "lease_owner": None, "lease_expires_at": None,
            "status_by": "baton", "reason": None if status == "completed" else f"{status} in history",
            "origin_event": None,
        })  # fmt: skip
        journal.append({
            "run_id": run_id, "node_id": "step", "attempt": 1, "cache_key": f"{i:064x}",
            "components": {"node": "step"}, "status": "completed", "started_at": at,
            "finished_at": at + 1, "output_digest": out_digest, "error": None,
            "idempotency_key": None, "tokens_in": 0, "tokens_out": 0, "artifacts": {},
            "cached_from": None, "invalidated_by": None,
        })  # fmt: skip
        audit.append({"at": at, "actor": requester, "action": "start", "run_id": run_id,
                      "details": {"workflow": workflow}})  # fmt: skip
        events.append({"platform": platform, "event_id": f"Ev{i:010d}", "at": at, "done": True})
    return runs, journal, audit, events


def seed_history(store: SqlStore, n: int, *, seed: int = 8, platform: str = "slack") -> float:
    """Insert `n` historical runs (ids `history_run_id(i)`); returns the seconds it took."""
    rng = random.Random(seed)
    started = time.perf_counter()
    args = json.dumps({"message": "history"}, separators=(",", ":"), sort_keys=True).encode()
    digest = hashlib.sha256(args).hexdigest()
    output = b"ok"
    out_digest = hashlib.sha256(output).hexdigest()
    now = time.time() - 86_400 * 30 - n * 20.0
    engine = store._engine  # bulk inserts: the bench writes history straight into the tables
    with engine.begin() as conn:
        insert_blobs = sa.insert(BLOBS).values(digest=sa.bindparam("d"), data=sa.bindparam("b"), size=2)
        conn.execute(insert_blobs, [{"d": digest, "b": args}, {"d": out_digest, "b": output}])
    if engine.dialect.name == "sqlite":
        _seed_sqlite(engine, n, rng, platform, now, digest, out_digest)
    else:
        for batch in _batches(n, BATCH):
            runs, journal, audit, events = _rows(batch, rng, platform, now, digest, out_digest)
            with engine.begin() as conn:
                conn.execute(sa.insert(RUNS), runs)
                conn.execute(sa.insert(JOURNAL), journal)
                conn.execute(sa.insert(AUDIT), audit)
                conn.execute(sa.insert(PROCESSED_EVENTS), events)
    with engine.begin() as conn:
        conn.execute(sa.text("ANALYZE"))  # as autovacuum / a long-lived SQLite would have
    return time.perf_counter() - started


_JSON_COLUMNS = {"components", "artifacts", "details"}


def _seed_sqlite(engine: sa.Engine, n: int, rng: random.Random, platform: str, now: float, digest: str,
                 out_digest: str) -> None:  # fmt: skip
    """The driver's `executemany` on one raw connection, a transaction per 50,000 runs."""
    tables = (RUNS, JOURNAL, AUDIT, PROCESSED_EVENTS)
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        for batch in _batches(n, SQLITE_BATCH):
            rows = _rows(batch, rng, platform, now, digest, out_digest)
            for table, dicts in zip(tables, rows, strict=True):
                columns = [c.name for c in table.columns if c.name in dicts[0]]
                marks = ", ".join("?" * len(columns))
                sql = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({marks})"
                cursor.executemany(sql, (tuple(
                    json.dumps(d[c], separators=(",", ":")) if c in _JSON_COLUMNS else d[c] for c in columns
                ) for d in dicts))  # fmt: skip
            raw.commit()
        cursor.close()
    finally:
        raw.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--platform", default="slack")
    opts = parser.parse_args()
    store = SqlStore(opts.url)
    store.migrate()
    seconds = seed_history(store, opts.runs, platform=opts.platform)
    store.close()
    print(f"seeded {opts.runs:,} runs in {seconds:.1f} s")


if __name__ == "__main__":
    main()
