"""Load test: N simulated conversations at once through the core `Handler` on PostgreSQL.

    python -m bench.load --database-url postgresql://postgres@127.0.0.1/test --create
    python -m bench.load --conversations 200 --rounds 3 --json

Each conversation is a person driving a gated workflow, concurrently with all the others,
through real `ChatMessage`s and the real handler and engine (event dedupe, parsing,
authorization, CAS transitions, leases, journal writes, rendering-ready replies):

    run gated <text>   -> the run starts and pauses at its approval gate (in the background)
    status <id>        -> the node table of the paused run
    approve <id>       -> the gate is decided and the run continues to completion
    runs               -> the conversation's recent runs

Reported: commands per second over the whole load (wall clock, background execution
included) and p50/p99 latency of `Handler.handle` per command kind. `--create` makes a
fresh database on the server named by the URL (and drops it afterwards); otherwise the
URL's database is migrated and used as is. The URL may also come from
BATON_LOAD_DATABASE_URL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from bot import testing
from core.commands.handler import Handler
from core.commands.messages import ChatMessage
from core.engine.engine import Engine
from core.engine.tools import ToolRegistry
from core.store.database import normalize_url
from core.store.repository import SqlStore

GATED = """
name: gated
defaults: {replay: pure}
nodes:
  - id: check
    tool: noop
  - id: ok
    depends_on: [check]
    approval: "Ship {{ inputs.message }}?"
  - id: ship
    depends_on: [ok]
    tool: noop
"""
KINDS = ("run", "status", "approve", "runs")


@dataclass
class Load:
    handler: Handler
    engine: Engine
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    failures: list[str] = field(default_factory=list)

    async def say(self, kind: str, conversation: str, text: str) -> list[str]:
        message = ChatMessage(
            platform="console",
            conversation=conversation,
            user=f"console:{conversation}",
            text=text,
            event_id=uuid.uuid4().hex,
            direct=True,
        )
        began = time.perf_counter()
        replies = await self.handler.handle(message)
        self.latencies[kind].append(time.perf_counter() - began)
        errors = [r.data.get("message", r.kind) for r in replies if r.is_error]
        if errors:
            self.failures.append(f"{kind}: {errors[0]}")
        return [r.run_id for r in replies if r.run_id is not None]

    async def conversation(self, n: int, rounds: int) -> None:
        where = f"load-{n}"
        for r in range(rounds):
            [run_id, *_] = await self.say("run", where, f"run gated c{n}r{r}")
            paused = await self.engine.wait(run_id, timeout=120)
            if paused.status.value != "paused":
                self.failures.append(f"run {run_id} is {paused.status.value}, expected paused")
                continue
            await self.say("status", where, f"status {run_id}")
            await self.say("approve", where, f"approve {run_id}")
            done = await self.engine.wait(run_id, timeout=120)
            if done.status.value != "completed":
                self.failures.append(f"run {run_id} is {done.status.value}, expected completed")
            await self.say("runs", where, "runs")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


@contextmanager
def database(url: str, create: bool) -> Iterator[str]:
    """The URL to load: a fresh database on that server with `create`, else `url` itself."""
    if not create:
        yield url
        return
    name = f"baton_load_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(normalize_url(url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin.url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


async def drive(url: str, conversations: int, rounds: int, max_parallel: int) -> dict[str, object]:
    tools = ToolRegistry()

    @tools.tool("noop", replay="pure", inline=True)
    def noop() -> str:
        return "ok"

    with tempfile.TemporaryDirectory(prefix="baton-load-") as tmp:
        root = Path(tmp)
        (root / "workflows").mkdir()
        (root / "workflows" / "gated.yaml").write_text(GATED)
        store = SqlStore(url)
        store.migrate()
        baton = testing.build(root, store=store, tools=tools, max_parallel=max_parallel, replica_id="load")
        engine = baton.engine
        load = Load(baton.handler, engine)
        await engine.start()
        try:
            began = time.perf_counter()
            await asyncio.gather(*(load.conversation(n, rounds) for n in range(conversations)))
            elapsed = time.perf_counter() - began
        finally:
            await engine.stop()
            store.close()
    total = sum(len(v) for v in load.latencies.values())
    return {
        "conversations": conversations,
        "rounds": rounds,
        "commands": total,
        "seconds": round(elapsed, 3),
        "commands_per_second": round(total / elapsed, 1),
        "latency_ms": {
            kind: {
                "n": len(load.latencies[kind]),
                "p50": round(statistics.median(load.latencies[kind]) * 1000, 2),
                "p99": round(percentile(load.latencies[kind], 0.99) * 1000, 2),
            }
            for kind in KINDS
            if load.latencies[kind]
        },
        "failures": load.failures[:10],
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}",
    }


def table(result: dict[str, object]) -> str:
    lines = [
        f"{result['conversations']} conversations x {result['rounds']} rounds: {result['commands']} commands "
        f"in {result['seconds']} s = {result['commands_per_second']} commands/s ({result['machine']})",
        "| command | n | p50 ms | p99 ms |",
        "|---|---:|---:|---:|",
    ]
    latency = result["latency_ms"]
    assert isinstance(latency, dict)
    for kind, row in latency.items():
        lines.append(f"| {kind} | {row['n']} | {row['p50']} | {row['p99']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("BATON_LOAD_DATABASE_URL"))
    parser.add_argument("--create", action="store_true", help="load a fresh database on that server")
    parser.add_argument("--conversations", "-n", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-parallel", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.database_url:
        parser.error("give --database-url or set BATON_LOAD_DATABASE_URL (a PostgreSQL URL)")
    with database(args.database_url, args.create) as url:
        result = asyncio.run(drive(url, args.conversations, args.rounds, args.max_parallel))
    print(json.dumps(result, indent=2) if args.json else table(result))
    failures = result["failures"]
    if isinstance(failures, list) and failures:
        raise SystemExit(f"{len(failures)} failures, e.g. {failures[0]}")


if __name__ == "__main__":
    main()
