"""Round trips, statements, transactions and pool checkouts per chat command.

    python -m bench.command_roundtrips --db postgres|sqlite [--history 2000] [--samples 20] [--show]

The same commands as `bench.baton_latency` (`run`, `status`, `approve`), sent through the
real handler; for each one it counts, from `handle(message)` until it returns:
    statements   SQL statements sent (SQLAlchemy's `before_cursor_execute` + the hot path)
    round_trips  PostgreSQL only: every request psycopg waits on the server for (statements,
                 BEGIN, COMMIT, ROLLBACK, PREPARE), counted by wrapping psycopg's `execute`
                 generator in this process (nothing else changes); with the time spent in them
    begins / commits / rollbacks   of them, the transaction-control round trips
    checkouts    connections taken from SQLAlchemy's pool
The counts do not depend on the history size; `--history` only makes the plans realistic.
`--show` lists each command's statements (first line) in order.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from bench.baton_latency import GATED, HELLO, _fresh_postgres, _run_id, message
from bench.protocol import emit
from bench.rig import Rig, rig
from bench.seed import seed_history
from core.commands.messages import Reply


@dataclass
class Tally:
    statements: list[str] = field(default_factory=list)
    round_trips: int = 0
    control: Counter[str] = field(default_factory=Counter)
    checkouts: int = 0
    wait_ms: float = 0.0
    wall_ms: float = 0.0


class Recorder:
    """Counts into `current` while it is set (one command at a time)."""

    def __init__(self, r: Rig) -> None:
        self.current: Tally | None = None
        self._r = r

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        engine = self._r.store._engine
        hot = self._r.store._hot

        def before(_c: Any, _cur: Any, statement: str, *_rest: Any) -> None:
            if self.current is not None:
                self.current.statements.append(" ".join(statement.split())[:110])

        def checkout(*_a: Any) -> None:
            if self.current is not None:
                self.current.checkouts += 1

        wrapped = [name for name in ("run", "run_together", "run_many") if hasattr(hot, name)]

        def wrap(name: str) -> Any:
            original = getattr(hot, name)

            def counted(first: Any, *args: Any, operation: str, **kw: Any) -> Any:
                if self.current is not None:
                    n = 1 if name == "run" else max(1, len(first) if hasattr(first, "__len__") else 1)
                    self.current.statements.extend([f"[hot {name}] {operation}"] * n)
                return original(first, *args, operation=operation, **kw)

            return counted

        event.listen(engine, "before_cursor_execute", before)
        event.listen(engine.pool, "checkout", checkout)
        for name in wrapped:
            setattr(hot, name, wrap(name))
        patches: list[tuple[Any, str, Any]] = []
        if self._r.store.dialect == "postgresql":
            patches = self._patch_psycopg()
        try:
            yield
        finally:
            for module, name, original in patches:
                setattr(module, name, original)
            event.remove(engine, "before_cursor_execute", before)
            event.remove(engine.pool, "checkout", checkout)
            for name in wrapped:
                delattr(hot, name)  # back to the class attribute

    def _patch_psycopg(self) -> list[tuple[Any, str, Any]]:
        from psycopg import _connection_base, _cursor_base, generators

        recorder = self
        original = generators.execute

        def execute(pgconn: Any) -> Generator[Any, Any, Any]:
            started = time.perf_counter()
            results = yield from original(pgconn)
            tally = recorder.current
            if tally is not None:
                tally.round_trips += 1
                tally.wait_ms += (time.perf_counter() - started) * 1000
                for result in results:
                    status = (result.command_status or b"").decode()
                    if status in ("BEGIN", "COMMIT", "ROLLBACK"):
                        tally.control[status] += 1
            return results

        patches = [(generators, "execute", original), (_cursor_base, "execute", _cursor_base.execute)]
        generators.execute = execute  # type: ignore[assignment]
        _cursor_base.execute = execute  # type: ignore[assignment]
        assert _connection_base.generators is generators
        return patches


async def sample(r: Rig, rec: Recorder, text: str, conversation: str) -> tuple[Tally, list[Reply]]:
    rec.current = tally = Tally()
    started = time.perf_counter()
    try:
        replies = await r.handler.handle(message(text, conversation))
    finally:
        tally.wall_ms = (time.perf_counter() - started) * 1000
        rec.current = None
    return tally, replies


async def measure(r: Rig, samples: int) -> dict[str, list[Tally]]:
    r.add_workflow("hello", HELLO)
    r.add_workflow("gated", GATED)

    async def outbox(_reply: Reply) -> None:
        return None

    r.handler.register_outbox("console", outbox)
    rec = Recorder(r)
    tallies: dict[str, list[Tally]] = {"run": [], "status": [], "approve": []}
    with rec.installed():
        for i in range(samples + 2):
            conv = f"count-{i}"
            t_run, replies = await sample(r, rec, "run hello counting round trips", conv)
            run_id = _run_id(replies)
            await r.engine.wait(run_id, timeout=60)
            t_status, replies = await sample(r, rec, f"status {run_id}", conv)
            gated = await r.engine.start_run(
                workflow="gated", args={}, platform="console", conversation=f"gate-{i}",
                thread=None, requester="console:ana",
            )  # fmt: skip
            await r.engine.wait(gated.id, timeout=60)
            t_approve, replies = await sample(r, rec, f"approve {gated.id}", f"gate-{i}")
            if not replies or replies[0].is_error:
                raise RuntimeError(f"approve failed: {[(x.kind, x.data) for x in replies]}")
            await r.engine.wait(gated.id, timeout=60)
            await r.handler.drain()
            if i >= 2:  # the first ones open connections and warm caches
                tallies["run"].append(t_run)
                tallies["status"].append(t_status)
                tallies["approve"].append(t_approve)
    return tallies


def summarize(tallies: dict[str, list[Tally]], show: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for cmd, ts in tallies.items():
        last = ts[-1]
        out[cmd] = {
            "statements": statistics.median(len(t.statements) for t in ts),
            "round_trips": statistics.median(t.round_trips for t in ts),
            "begins": statistics.median(t.control["BEGIN"] for t in ts),
            "commits": statistics.median(t.control["COMMIT"] for t in ts),
            "rollbacks": statistics.median(t.control["ROLLBACK"] for t in ts),
            "checkouts": statistics.median(t.checkouts for t in ts),
            "wait_ms_median": round(statistics.median(t.wait_ms for t in ts), 2),
            "wall_ms_median": round(statistics.median(t.wall_ms for t in ts), 2),
        }
        if show:
            out[cmd]["sequence"] = last.statements
    return out


async def main_async(db: str, history: int, samples: int, root: Path, show: bool) -> dict[str, Any]:
    admin = None
    name = ""
    url = None
    if db == "postgres":
        url, admin, name = _fresh_postgres()
    try:
        async with rig(root, url=url) as r:
            seed_history(r.store, history)
            tallies = await measure(r, samples)
    finally:
        if admin is not None:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()
    return {"db": db, "history": history, "samples": samples, "commands": summarize(tallies, show)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--history", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--show", action="store_true")
    opts = parser.parse_args()
    root = Path(opts.dir) if opts.dir else Path("/tmp") / f"baton-roundtrips-{uuid.uuid4().hex[:8]}"
    emit(asyncio.run(main_async(opts.db, opts.history, opts.samples, root, opts.show)))


if __name__ == "__main__":
    main()
