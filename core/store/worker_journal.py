"""`WorkerJournal`: a `baton worker`'s two writes per step, on the worker's own event loop.

    claim    UPDATE journal SET status='started' WHERE id=… AND status='queued'   (a CAS)
    settle   the output and artifact blobs and the `started` entry settled: ONE statement

Each is one autocommitted statement (PostgreSQL commits it on its own: no BEGIN/COMMIT
round trips), prepared on the server the first time a connection runs it, on an async
psycopg connection of a small pool (`pg_pool.lively_pool`). The job slots' round trips overlap on the worker's
event loop, as Procrastinate's own fetch and finish do, with no thread hand-off per
statement (two per step before: the executor thread's wake-up and the loop's, measured in
bench/FINDINGS.md). The claim is durable before the step runs: of two claims (a redelivered
job, a recovered replica) exactly one begins the step. The replica's side (the hand-off, the
reads of settled entries, withdrawing) is `DispatchSql`.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import psycopg
import psycopg_pool

from core.errors import StoreError
from core.store import cas
from core.store.database import describe
from core.store.pg_statements import PooledStatements
from core.store.records import NodeStatus
from core.store.rows import JOURNAL_FIELDS, journal_from_values

_FINAL = (NodeStatus.COMPLETED, NodeStatus.FAILED)
_CLAIM = (
    "UPDATE journal SET status = 'started', started_at = %(at)s WHERE id = %(entry_id)s AND status = 'queued'"
)
#: the `started` entry settled and, when it was, its blobs inserted unless present: the
#: number of entries settled (0: it was not `started`, and nothing is written)
_SETTLE = """
    WITH settled AS (
        UPDATE journal
           SET status = %(status)s, finished_at = %(at)s, output_digest = %(digest)s, error = %(error)s,
               tokens_in = %(tokens_in)s, tokens_out = %(tokens_out)s, artifacts = CAST(%(artifacts)s AS json)
         WHERE id = %(entry_id)s AND status = 'started'
     RETURNING id
    ), kept AS (
        INSERT INTO blobs (digest, data, size)
        SELECT * FROM unnest(CAST(%(digests)s AS text[]), CAST(%(datas)s AS bytea[]),
                             CAST(%(sizes)s AS integer[]))
         WHERE EXISTS (SELECT FROM settled)
        ON CONFLICT (digest) DO NOTHING
    )
    SELECT count(*) FROM settled
"""
#: the same for a result of one blob (an output and no artifacts: most steps): that blob as
#: three plain parameters, where the arrays above cost the worker, per step, a list dumper
#: chosen for each of them and their elements quoted into array literals (issue 34)
_SETTLE_ONE_BLOB = _SETTLE.replace(
    """        SELECT * FROM unnest(CAST(%(digests)s AS text[]), CAST(%(datas)s AS bytea[]),
                             CAST(%(sizes)s AS integer[]))""",
    """        SELECT CAST(%(blob_digest)s AS text), CAST(%(blob_data)s AS bytea),
               CAST(%(blob_size)s AS integer)""",
)
_FINISHED = """    , finished AS (
        SELECT procrastinate_finish_job_v1(%(job_id)s, 'succeeded', true)
         WHERE EXISTS (SELECT FROM settled)
           AND EXISTS (SELECT FROM procrastinate_jobs WHERE id = %(job_id)s AND status = 'doing')
    )
    SELECT (SELECT count(*) FROM settled), (SELECT count(*) FROM finished)"""
#: the same, and the node job finished (deleted, as `baton worker` deletes successful jobs) in
#: the same statement when the entry was settled and the job is still running: one round trip
#: for the result and Procrastinate's finish (issue 34). (settled, finished)
_SETTLE_AND_FINISH = _SETTLE.replace("    SELECT count(*) FROM settled", _FINISHED)
_SETTLE_ONE_BLOB_AND_FINISH = _SETTLE_ONE_BLOB.replace("    SELECT count(*) FROM settled", _FINISHED)
_ENTRY = f"SELECT {', '.join(JOURNAL_FIELDS)} FROM journal WHERE id = %(entry_id)s"


class WorkerJournal(PooledStatements):
    """Claims and results of one worker process (PostgreSQL); `size`: its job slots."""

    def __init__(self, database_url: str, *, size: int = 4, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        #: node jobs a result statement finished (`settle(job_id=…)`): their worker's connector
        #: (`WorkerConnector.finished`, the same set) skips Procrastinate's own finish of them
        self.finished: set[int] = set()
        super().__init__(database_url, size=size, name="baton-worker-journal")

    async def claim(self, entry_id: int) -> bool:
        """CAS `queued -> started`, committed before this returns; False when it was not queued."""
        params = {"entry_id": entry_id, "at": self._clock()}
        changed, _ = await self._run(_CLAIM, params, "claim a queued step")
        return changed == 1

    async def settle(
        self,
        entry_id: int,
        *,
        status: NodeStatus,
        output: bytes | None = None,
        error: str | None = None,
        tokens_in: int = 0,
        tokens_out: int = 0,
        artifacts: Mapping[str, bytes] | None = None,
        job_id: int | None = None,
    ) -> str | None:
        """The blobs (output, artifacts; in digest order, like `journal_complete_many`) and the
        `started` entry settled, in one statement: one round trip and one commit; with
        `job_id`, the entry's running node job is finished in the same statement (and noted in
        `finished`). The output's digest; InvalidTransition when the entry is not `started`."""
        status = NodeStatus(status)
        if status not in _FINAL:
            raise ValueError(f"a step settles completed or failed, not {status.value}")
        blobs: dict[str, bytes] = {}
        digest = None
        if output is not None:
            digest = hashlib.sha256(output).hexdigest()
            blobs[digest] = output
        kept: dict[str, str] = {}
        for path, data in (artifacts or {}).items():
            kept[path] = hashlib.sha256(data).hexdigest()
            blobs[kept[path]] = data
        params: dict[str, Any] = {
            "entry_id": entry_id,
            "status": status.value,
            "at": self._clock(),
            "digest": digest,
            "error": error,
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "artifacts": json.dumps(kept),
        }
        if len(blobs) == 1:
            [(params["blob_digest"], params["blob_data"])] = blobs.items()
            params["blob_size"] = len(params["blob_data"])
            plain, finishing = _SETTLE_ONE_BLOB, _SETTLE_ONE_BLOB_AND_FINISH
        else:
            order = sorted(blobs)
            params.update(
                digests=order, datas=[blobs[d] for d in order], sizes=[len(blobs[d]) for d in order]
            )
            plain, finishing = _SETTLE, _SETTLE_AND_FINISH
        if job_id is None:
            _, settled = await self._run(plain, params, "record a step result")
        else:
            settled, finished = await self._run_row(finishing, {**params, "job_id": job_id},
                                                    "record a step result")  # fmt: skip
            if finished == 1:
                self.finished.add(job_id)
        if settled != 1:
            await self._not_settleable(entry_id)
        return digest

    async def _not_settleable(self, entry_id: int) -> None:
        try:
            async with self._pool.connection() as conn:
                row = await (await conn.execute(_ENTRY, {"entry_id": entry_id})).fetchone()
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise StoreError(f"The run store could not read a journal entry ({describe(exc)}).") from exc
        if row is None:
            raise StoreError(f"Journal entry {entry_id} does not exist.", hint="This is a bug in Baton.")
        raise cas.already_settled(journal_from_values(row))

    async def _run_row(self, sql: str, params: Mapping[str, Any], operation: str) -> tuple[Any, ...]:
        """One autocommitted statement returning one row: that row."""
        try:
            async with self._pool.connection() as conn:
                row = await (await conn.execute(sql, params)).fetchone()  # type: ignore[arg-type]  # constant SQL
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise StoreError(f"The run store could not {operation} ({describe(exc)}).") from exc
        assert row is not None
        return tuple(row)

    async def _run(self, sql: str, params: Mapping[str, Any], operation: str) -> tuple[int, Any]:
        """One autocommitted statement: the rows it changed, and the first column of the row it
        returned, if any (a connection that failed is dropped by the pool: the next statement
        gets a fresh one)."""
        try:
            async with self._pool.connection() as conn:
                cursor = await conn.execute(sql, params)  # type: ignore[arg-type]  # our own constant SQL
                row = await cursor.fetchone() if cursor.description is not None else None
                return cursor.rowcount, None if row is None else row[0]
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise StoreError(f"The run store could not {operation} ({describe(exc)}).") from exc
