"""Approval policies: deadline lateness under load, the cost of many pending deadlines, and
vote latency (a vote typed -> the gate's message edited), on SQLite.

    python -m bench.baton_approvals --dir D [--due 2000] [--pending 10000] [--votes 40]

lateness  `due` deadlines falling due over 10 s, fired by two `GateDeadlines` (two replicas on
          one database, each its own store) ticking every 0.25 s on one event loop, while a
          third writer casts a vote every 5 ms; lateness = `fired_at - due_at` of each row.
pending   `pending` deadlines planned and not due: the RSS they add to the process that planned
          them, and a fresh process's first tick (open the store, find nothing due) with them
          in the table, against the same with none.
votes     `votes` gates of a two-approver policy, each with one vote typed through the real
          Handler on a real Engine: from `handle()` to the edit of the gate's message reaching
          the (recording) outbox.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from bench.protocol import emit
from bot import testing
from core.commands.deadlines import GateDeadlines
from core.commands.messages import ChatMessage, Reply
from core.config import Access
from core.engine.tools import ToolRegistry
from core.store.port import NewRun
from core.store.records import GateVote
from core.store.repository import SqlStore

GATE = """
name: quorum
nodes:
  - id: review
    approval:
      question: "Ship?"
      approvers: [group:sre]
      required: 2
      timeout: 4h
  - id: ship
    depends_on: [review]
    bash: printf shipped
    replay: pure
"""
ACCESS = Access.model_validate(
    {"groups": {"sre": ["console:sam", "console:sue"]}, "run": {"*": ["console:rita"]}}
)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _runs(store: SqlStore, n: int) -> list[str]:
    digest = store.blobs.put_blob(b"{}")
    ids: list[str] = []
    with store.transaction() as tx:
        new = NewRun(workflow="quorum", platform="console", conversation="c", thread=None,
                     requester="console:rita", args_digest=digest)
        pending = [tx.create_run(new) for _ in range(n)]
    ids = [p.id for p in pending]
    return ids


class _Nothing:
    """The engine of the lateness measure: its deadlines' runs never paused, so each fires as
    stale (the firing is measured, not a gate's outcome) and it is never used."""


async def lateness(url: str, due: int) -> dict[str, Any]:
    setup = SqlStore(url)
    setup.migrate()
    start = time.time() + 1.0
    runs = _runs(setup, due)
    for i, run_id in enumerate(runs):
        setup.ballots.plan_deadlines(run_id, "review", 1.0, [("timeout", start + 10.0 * i / due)])
    replicas = [SqlStore(url), SqlStore(url)]

    ticks = [GateDeadlines(store=s, engine=_Nothing(), replica=f"r{i}")  # type: ignore[arg-type]
             for i, s in enumerate(replicas)]
    stop = time.time() + 13.0
    votes = 0

    async def load() -> None:
        nonlocal votes
        while time.time() < stop:
            setup.ballots.cast_vote(GateVote(runs[votes % len(runs)], "review", 2.0, f"console:u{votes}",
                                             "approve", time.time()))  # fmt: skip
            votes += 1
            await asyncio.sleep(0.005)

    async def loop(deadlines: GateDeadlines) -> None:
        while time.time() < stop:
            await deadlines.tick()
            await asyncio.sleep(0.25)

    await asyncio.gather(load(), *(loop(t) for t in ticks))
    rows = [d for r in runs for d in setup.ballots.gate_deadlines(r, "review", 1.0)]
    late = [(d.fired_at - d.due_at) * 1000 for d in rows if d.fired_at is not None]
    by = {d.fired_by for d in rows}
    for s in (*replicas, setup):
        s.close()
    return {"due": due, "fired": len(late), "fired_by": sorted(b for b in by if b), "votes_cast": votes,
            "p50_ms": _pct(late, 0.5), "p99_ms": _pct(late, 0.99), "max_ms": max(late)}


def pending(url: str, n: int, directory: Path) -> dict[str, Any]:
    store = SqlStore(url)
    store.migrate()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    runs = _runs(store, n)
    planted = time.perf_counter()
    for run_id in runs:
        store.ballots.plan_deadlines(run_id, "review", 1.0, [("remind:0", 4e9), ("timeout", 4e9 + 1)])
    plan_s = time.perf_counter() - planted
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    store.close()
    empty = directory / "empty.db"
    SqlStore(f"sqlite:///{empty}").migrate()
    return {"pending": 2 * n, "plan_s": plan_s, "rss_added_mb": (rss_after - rss_before) / 1024,
            "first_tick_ms": _first_tick(url), "first_tick_empty_ms": _first_tick(f"sqlite:///{empty}")}


def _first_tick(url: str) -> float:
    """A fresh process's first look for due deadlines (none are due), once its store is open:
    what the pending ones add to a start-up."""
    code = textwrap.dedent(f"""
        import time
        from core.store.repository import SqlStore
        s = SqlStore({url!r}); s.due_deadlines(0.0)  # connected, schema read
        t = time.perf_counter(); s.due_deadlines(time.time()); print((time.perf_counter() - t) * 1000)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(done.stdout.strip())


async def votes(url: str, n: int, directory: Path) -> dict[str, Any]:
    store = SqlStore(url)
    store.migrate()
    (directory / "workflows").mkdir()
    (directory / "workflows" / "quorum.yaml").write_text(textwrap.dedent(GATE))
    baton = testing.build(directory, store=store, environ={}, tools=ToolRegistry(), access=ACCESS,
                          replica_id="bench")  # `baton run`'s wiring: approvers from the access
    engine, handler = baton.engine, baton.handler
    edited: asyncio.Queue[float] = asyncio.Queue()

    async def outbox(reply: Reply) -> None:
        if reply.kind == "gate_waiting" and reply.how.edit_only:
            edited.put_nowait(time.perf_counter())

    handler.register_outbox("console", outbox)
    await engine.start()
    ids = iter(range(10**9))

    def msg(text: str, user: str) -> ChatMessage:
        return ChatMessage("console", "c1", user, text, f"e{next(ids)}", direct=True)

    runs: list[str] = []
    for _ in range(n):
        [started] = await handler.handle(msg("run quorum --force", "rita"))
        assert started.run_id
        await engine.wait(started.run_id, timeout=60)
        runs.append(started.run_id)
    await handler.drain()
    latencies: list[float] = []
    for run_id in runs:
        began = time.perf_counter()
        await handler.handle(msg(f"approve {run_id}", "sam"))
        latencies.append((await asyncio.wait_for(edited.get(), 10) - began) * 1000)
    await engine.stop(grace=2)
    await handler.drain()
    store.close()
    return {"votes": n, "p50_ms": _pct(latencies, 0.5), "p99_ms": _pct(latencies, 0.99),
            "mean_ms": statistics.mean(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--due", type=int, default=2000)
    parser.add_argument("--pending", type=int, default=5000)  # gates: two deadlines each
    parser.add_argument("--votes", type=int, default=40)
    opts = parser.parse_args()
    root: Path = opts.dir
    for sub in ("late", "pending", "votes"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    emit({
        "lateness": asyncio.run(lateness(f"sqlite:///{root / 'late' / 'b.db'}", opts.due)),
        "pending": pending(f"sqlite:///{root / 'pending' / 'b.db'}", opts.pending, root / "pending"),
        "votes": asyncio.run(votes(f"sqlite:///{root / 'votes' / 'b.db'}", opts.votes, root / "votes")),
    })  # fmt: skip


if __name__ == "__main__":
    main()
