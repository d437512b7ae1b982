"""`runs` and `status` with a million runs of history, on SQLite.

    python -m bench.baton_history --history 1000000 --samples 200 --dir D

The store is seeded (`bench.seed`, platform `console`, 500 conversations: about 2,000 runs
each), then through the real handler, as a chat message each:
    runs    `runs` in a conversation with its ~2,000 historical runs: the 20 newest
    status  `status <id>` of a random historical run (its node table and output)
p50 / p99 / max over `samples`, after 5 warm-up rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from pathlib import Path

from bench.baton_latency import percentile, timed
from bench.protocol import emit
from bench.rig import DURABILITY, rig
from bench.seed import CONVERSATIONS, conversation, history_run_id, seed_history


async def measure(root: Path, history: int, samples: int) -> dict[str, object]:
    rng = random.Random(18)
    timings: dict[str, list[float]] = {"runs": [], "status": []}
    async with rig(root) as r:
        seed_seconds = seed_history(r.store, history, platform="console")
        for i in range(samples + 5):
            conv = conversation(rng.randrange(CONVERSATIONS))
            runs_ms, replies = await timed(r, "runs", conv)
            if not replies or replies[0].is_error or not replies[0].data.get("runs"):
                raise RuntimeError(f"runs failed: {[(x.kind, x.data) for x in replies]}")
            old = rng.randrange(history)
            where = conversation(old % CONVERSATIONS)
            status_ms, replies = await timed(r, f"status {history_run_id(old)}", where)
            if not replies or replies[0].is_error:
                raise RuntimeError(f"status failed: {[(x.kind, x.data) for x in replies]}")
            if i >= 5:
                timings["runs"].append(runs_ms)
                timings["status"].append(status_ms)
    return {
        "history": history,
        "samples": samples,
        "seed_seconds": seed_seconds,
        "durability": DURABILITY["NORMAL"],
        "commands": {
            cmd: {"p50_ms": percentile(v, 0.5), "p99_ms": percentile(v, 0.99), "max_ms": max(v)}
            for cmd, v in timings.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--history", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--dir", required=True)
    opts = parser.parse_args()
    emit(asyncio.run(measure(Path(opts.dir), opts.history, opts.samples)))


if __name__ == "__main__":
    main()
