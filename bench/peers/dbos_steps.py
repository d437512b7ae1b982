"""DBOS: a workflow of N no-op steps (chain or fan-out) on its SQLite system database.

    python -m bench.peers.dbos_steps --shape chain --n 1000 --db /tmp/x.sqlite --mode default|wal

`default` is DBOS's own SQLite setup (rollback journal, synchronous=FULL, IMMEDIATE
transactions); `wal` switches the file to WAL first (synchronous stays FULL, DBOS sets no
other value). Only the workflow call is timed: launch and migrations are not.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import time
from typing import Any

from bench.protocol import emit

DURABILITY = {
    "default": "SQLite rollback journal, synchronous=FULL (DBOS default)",
    "wal": "SQLite WAL, synchronous=FULL",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", choices=["chain", "fanout"], required=True)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--db", required=True)
    parser.add_argument("--mode", choices=sorted(DURABILITY), default="default")
    opts = parser.parse_args()

    if opts.mode == "wal":
        with sqlite3.connect(opts.db) as conn:
            conn.execute("PRAGMA journal_mode=WAL")

    from dbos import DBOS, DBOSConfig, SetWorkflowID

    config: DBOSConfig = {
        "name": "baton-bench",
        "system_database_url": f"sqlite:///{opts.db}",
        "log_level": "WARNING",
        "run_admin_server": False,  # type: ignore[typeddict-unknown-key]
    }

    @DBOS.step()
    def noop(i: int) -> int:
        return i

    @DBOS.step()
    async def noop_async(i: int) -> int:
        return i

    @DBOS.workflow()
    def chain(n: int) -> int:
        total = 0
        for i in range(n):
            total += noop(i)
        return total

    @DBOS.workflow()
    async def fanout(n: int) -> int:
        results = await asyncio.gather(*(noop_async(i) for i in range(n)))
        return sum(results)

    DBOS(config=config)
    DBOS.launch()
    expected = sum(range(opts.n))
    started = time.perf_counter()
    with SetWorkflowID(f"bench-{opts.shape}"):
        if opts.shape == "chain":
            got: Any = chain(opts.n)
        else:
            got = asyncio.run(fanout(opts.n))
    seconds = time.perf_counter() - started
    if got != expected:
        raise SystemExit(f"DBOS returned {got}, expected {expected}")
    steps = _recorded_steps(opts.db, f"bench-{opts.shape}")
    DBOS.destroy()
    emit(
        {
            "side": f"dbos-{opts.mode}",
            "shape": opts.shape,
            "n": opts.n,
            "seconds": seconds,
            "per_step_ms": seconds * 1000 / opts.n,
            "durability": DURABILITY[opts.mode],
            "journaled_steps": steps,
        }
    )


def _recorded_steps(db: str, workflow_id: str) -> int:
    """How many step outputs DBOS journaled (proves the steps were durable, not skipped)."""
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT count(*) FROM operation_outputs WHERE workflow_uuid = ?", (workflow_id,)
        ).fetchone()
    return int(row[0])


if __name__ == "__main__":
    main()
