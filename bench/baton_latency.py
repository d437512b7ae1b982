"""Command latency: from a `ChatMessage` to the replies of `Handler.handle`, with history.

    python -m bench.baton_latency --db sqlite|postgres --history 100000 --samples 200 --dir D

The store is seeded with `--history` runs (`bench.seed`), then each command is sent as a
chat message through the real handler (event dedupe, catalog reload, parse, authorize,
engine, replies):
    run      `run hello <text>` in a conversation of its own (no fresh-run prompt): the run
             is created, leased and started; `handle` returns once it is `running`
    status   `status <id>` of a run that finished (its node table and output)
    approve  `approve <id>` of a run paused at a gate: the gate decided, the run `running`
Background execution is awaited between samples, so each sample sees an idle engine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

from bench.protocol import emit
from bench.rig import DURABILITY, Rig, rig
from bench.seed import seed_history
from core.commands.messages import ChatMessage, Reply

POSTGRES_ADMIN = os.environ.get("BATON_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")

HELLO = "name: hello\ndefaults: {replay: pure}\nnodes:\n  - id: greet\n    tool: noop\n"
GATED = (
    "name: gated\ndefaults: {replay: pure}\nnodes:\n  - id: check\n    tool: noop\n"
    "  - id: ok\n    depends_on: [check]\n    approval: Ship it?\n"
    "  - id: ship\n    depends_on: [ok]\n    tool: noop\n"
)


def message(text: str, conversation: str) -> ChatMessage:
    return ChatMessage(
        platform="console", conversation=conversation, user="ana", text=text,
        event_id=uuid.uuid4().hex, direct=True,
    )  # fmt: skip


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def timed(r: Rig, text: str, conversation: str) -> tuple[float, list[Reply]]:
    started = time.perf_counter()
    replies = await r.handler.handle(message(text, conversation))
    return (time.perf_counter() - started) * 1000, replies


def _run_id(replies: list[Reply]) -> str:
    for reply in replies:
        if reply.run_id:
            return reply.run_id
    raise RuntimeError(f"no run id in the replies: {[(r.kind, r.data) for r in replies]}")


async def measure(r: Rig, samples: int) -> dict[str, dict[str, float]]:
    r.add_workflow("hello", HELLO)
    r.add_workflow("gated", GATED)

    async def outbox(_reply: Reply) -> None:
        return None

    r.handler.register_outbox("console", outbox)
    timings: dict[str, list[float]] = {"run": [], "status": [], "approve": []}
    for i in range(samples + 5):  # the first 5 warm up caches and connections
        conv = f"bench-{i}"
        ms, replies = await timed(r, "run hello measuring latency", conv)
        run_id = _run_id(replies)
        await r.engine.wait(run_id, timeout=60)
        status_ms, replies = await timed(r, f"status {run_id}", conv)
        if not replies or replies[0].is_error:
            raise RuntimeError(f"status failed: {replies}")
        gated = await r.engine.start_run(
            workflow="gated", args={}, platform="console", conversation=f"gate-{i}",
            thread=None, requester="console:ana",
        )  # fmt: skip
        paused = await r.engine.wait(gated.id, timeout=60)
        if paused.status.value != "paused":
            raise RuntimeError(f"the gated run is {paused.status.value}")
        approve_ms, replies = await timed(r, f"approve {gated.id}", f"gate-{i}")
        if not replies or replies[0].is_error:
            raise RuntimeError(f"approve failed: {[(x.kind, x.data) for x in replies]}")
        await r.engine.wait(gated.id, timeout=60)
        await r.handler.drain()
        if i >= 5:
            timings["run"].append(ms)
            timings["status"].append(status_ms)
            timings["approve"].append(approve_ms)
    return {
        cmd: {
            "p50_ms": percentile(values, 0.50),
            "p99_ms": percentile(values, 0.99),
            "mean_ms": statistics.fmean(values),
            "max_ms": max(values),
        }
        for cmd, values in timings.items()
    }


def _fresh_postgres() -> tuple[str, sa.Engine, str]:
    name = f"baton_bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(POSTGRES_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = sa.engine.make_url(POSTGRES_ADMIN).set(database=name).render_as_string(hide_password=False)
    return url, admin, name


async def main_async(db: str, history: int, samples: int, root: Path) -> dict[str, object]:
    admin = None
    name = ""
    url = None
    if db == "postgres":
        url, admin, name = _fresh_postgres()
    try:
        async with rig(root, url=url) as r:
            seed_seconds = seed_history(r.store, history)
            results = await measure(r, samples)
    finally:
        if admin is not None:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()
    return {
        "db": db,
        "durability": DURABILITY["postgres" if db == "postgres" else "NORMAL"],
        "history": history,
        "samples": samples,
        "seed_seconds": seed_seconds,
        "commands": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--history", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--dir", required=True)
    opts = parser.parse_args()
    emit(asyncio.run(main_async(opts.db, opts.history, opts.samples, Path(opts.dir))))


if __name__ == "__main__":
    main()
