"""What the journal's hot path (`core/store/hot_path.py`) buys, side by side.

    python -m bench.hot_path_ab [--rounds 7] [--n 1000]

The same 1000-step chains (SQLite WAL, synchronous=NORMAL) run with the shipped `SqlStore`
and with `CoreJournal`, whose journal writes (`put_blob`, `journal_start`, `journal_finish`,
`journal_complete_many`) go through SQLAlchemy Core instead: statements built once, a pooled
connection, one transaction each (what every other store method does). Rounds interleave
the two; each figure is the median per-step time. Rows: pure steps group-committed (the
default, `make bench`'s step-overhead rows), pure steps with a commit each (group commit
off), and unsafe steps (a `started` entry, then the output blob with the finish: two commits).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import sqlalchemy as sa

from bench.protocol import emit
from bench.rig import bench_tools, rig, steps_yaml
from core.engine.prepared import prepare
from core.engine.tools import ToolRegistry
from core.store.journal_sql import JournalSql
from core.store.port import StepResult
from core.store.records import NodeStatus
from core.store.repository import SqlStore
from core.store.tables import BLOBS, JOURNAL

_START = sa.insert(JOURNAL).returning(JOURNAL.c.id)
_FINISH = (
    sa.update(JOURNAL)
    .where(JOURNAL.c.id == sa.bindparam("entry_id"), JOURNAL.c.status == NodeStatus.STARTED.value)
    .values(
        status=sa.bindparam("b_status"), finished_at=sa.bindparam("b_finished_at"),
        output_digest=sa.bindparam("b_output_digest"), error=sa.bindparam("b_error"),
        tokens_in=sa.bindparam("b_tokens_in"), tokens_out=sa.bindparam("b_tokens_out"),
        artifacts=sa.bindparam("b_artifacts", type_=JOURNAL.c.artifacts.type),
    )
)  # fmt: skip


class _CoreJournalSql(JournalSql):
    """The `Journal` and `Blobs` roles with the hot path's writes through SQLAlchemy Core."""

    def put_blob(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        with self._db.single.begin() as conn:
            values = {"digest": digest, "data": data, "size": len(data)}
            conn.execute(self._db.insert_ignore(BLOBS, ["digest"]), values)
        return digest

    def journal_start(self, **kw: Any) -> int:
        values = {**kw, "status": NodeStatus.STARTED.value, "started_at": self._db.now(), "tokens_in": 0,
                  "tokens_out": 0, "artifacts": {}}  # fmt: skip
        with self._db.single.begin() as conn:
            return int(conn.execute(_START, values).scalar_one())

    def journal_finish(self, entry_id: int, *, status: NodeStatus, **kw: Any) -> None:
        params = {"entry_id": entry_id, "b_status": NodeStatus(status).value, "b_finished_at": self._db.now(),
                  "b_output_digest": kw.get("output_digest"), "b_error": kw.get("error"),
                  "b_tokens_in": kw.get("tokens_in", 0), "b_tokens_out": kw.get("tokens_out", 0),
                  "b_artifacts": kw.get("artifacts") or {}}  # fmt: skip
        with self._db.single.begin() as conn:
            for data in kw.get("blobs", ()):  # the output and artifacts, in the same transaction
                values = {"digest": hashlib.sha256(data).hexdigest(), "data": data, "size": len(data)}
                conn.execute(self._db.insert_ignore(BLOBS, ["digest"]), values)
            if conn.execute(_FINISH, params).rowcount != 1:
                raise RuntimeError(f"entry {entry_id} was settled already")

    def journal_complete_many(self, results: Sequence[StepResult]) -> None:
        if not results:
            return
        now = self._db.now()
        blobs = {r.digest: {"digest": r.digest, "data": r.output, "size": len(r.output)} for r in results}
        entries = [
            {"run_id": r.run_id, "node_id": r.node_id, "attempt": r.attempt, "cache_key": r.cache_key,
             "components": r.components, "status": NodeStatus.COMPLETED.value, "started_at": now,
             "finished_at": now, "output_digest": r.digest, "idempotency_key": r.idempotency_key,
             "tokens_in": r.tokens_in, "tokens_out": r.tokens_out, "artifacts": {}}
            for r in results
        ]  # fmt: skip
        with self._db.engine.begin() as conn:
            conn.execute(self._db.insert_ignore(BLOBS, ["digest"]), [blobs[d] for d in sorted(blobs)])
            conn.execute(sa.insert(JOURNAL), entries)


class CoreJournal(SqlStore):
    """`SqlStore` whose `steps` and `blobs` roles are `_CoreJournalSql`."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        journal = _CoreJournalSql(self.db)
        self.steps = self.blobs = journal


def _tools() -> ToolRegistry:
    def unsafe(registry: ToolRegistry) -> None:
        @registry.tool("unsafe_noop", replay="unsafe", inline=True)
        def unsafe_noop() -> str:
            return "ok"

    return bench_tools(unsafe)


async def _per_step_ms(store_class: type[SqlStore], tool: str, group_commit: float, n: int) -> float:
    scratch = tempfile.TemporaryDirectory(prefix="baton-hot-path-")
    with scratch as tmp, mock.patch("bench.rig.SqlStore", store_class):
        async with rig(Path(tmp), group_commit=group_commit, tools=_tools()) as r:
            r.handler.progress.unsubscribe()
            r.add_workflow("warmup", steps_yaml("warmup", 5, "chain", tool=tool))
            r.add_workflow("steps", steps_yaml("steps", n, "chain", tool=tool))
            await r.run("warmup")
            r.catalog.reload()
            prepare(r.catalog.get("steps"), r.engine.tools)
            started = time.perf_counter()
            run_id = await r.run("steps")
            seconds = time.perf_counter() - started
            if r.store.runs.get_run(run_id).status.value != "completed":
                raise SystemExit(f"the run did not complete: {r.store.runs.get_run(run_id)}")
    return seconds * 1000 / n


ROWS = {
    "pure, group commit": ("noop", 0.01),
    "pure, a commit per step": ("noop", 0.0),
    "unsafe (start, blob, finish)": ("unsafe_noop", 0.0),
}


async def main_async(rounds: int, n: int) -> dict[str, Any]:
    times: dict[tuple[str, str], list[float]] = {}
    sides = {"hot_path": SqlStore, "sqlalchemy": CoreJournal}
    for i in range(rounds):
        for row, (tool, window) in ROWS.items():
            for side in sides if i % 2 == 0 else reversed(list(sides)):
                times.setdefault((row, side), []).append(await _per_step_ms(sides[side], tool, window, n))
    out: dict[str, Any] = {}
    for row in ROWS:
        hot, core = (statistics.median(times[(row, side)]) for side in sides)
        out[row] = {"hot_path_ms": round(hot, 3), "sqlalchemy_ms": round(core, 3),
                    "ratio": round(core / hot, 2)}  # fmt: skip
    return {"n": n, "rounds": rounds, "durability": "SQLite WAL, synchronous=NORMAL", "rows": out}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--n", type=int, default=1000)
    opts = parser.parse_args()
    emit(asyncio.run(main_async(opts.rounds, opts.n)))


if __name__ == "__main__":
    main()
