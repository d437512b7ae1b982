"""`AsyncWorkerJournal`: a `baton worker`'s two journal writes per step, awaited on its
event loop.

A worker runs several jobs at once on one event loop. Its claim (`queued -> started`) and
its result (`journal_settle`: blobs and the settled entry) are the same statements as
`SqlStore`'s (`DispatchSql.claim_statement` / `settle_statement`), sent on a small pool of
async psycopg connections in autocommit mode: while one job waits for the database the
others run, without a thread hand-off each way. Everything else a worker reads or writes
goes through the synchronous `SqlStore` as usual.

    journal = AsyncWorkerJournal(store, pool_size=slots)
    await journal.open()
    claimed = await journal.journal_claim(entry_id)
    digest = await journal.journal_settle(entry_id, status=NodeStatus.COMPLETED, output=b"…")
    await journal.close()
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from core.errors import StoreError
from core.store.database import describe
from core.store.hot_path import Prepared
from core.store.records import NodeStatus
from core.store.repository import SqlStore


class AsyncWorkerJournal:
    def __init__(self, store: SqlStore, *, pool_size: int) -> None:
        if store.dialect != "postgresql":
            raise ValueError("AsyncWorkerJournal needs PostgreSQL")
        self.store = store
        self._url = store.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._size = max(1, pool_size)
        self._pool: AsyncConnectionPool | None = None

    async def open(self) -> None:
        if self._pool is None:
            pool = AsyncConnectionPool(
                self._url, min_size=1, max_size=self._size, kwargs={"autocommit": True}, open=False
            )
            await pool.open()
            self._pool = pool

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def _run(self, statement: Prepared, params: Mapping[str, Any], operation: str) -> int:
        if self._pool is None:
            raise StoreError(f"The run store could not {operation} (the worker's journal is closed).")
        try:
            async with self._pool.connection() as conn:
                cursor = await conn.execute(statement.sql, statement.bind(params))  # type: ignore[arg-type]
                return cursor.rowcount
        except psycopg.Error as exc:
            raise StoreError(f"The run store could not {operation} ({describe(exc)}).") from exc

    async def journal_claim(self, entry_id: int) -> bool:
        """CAS `queued -> started`; False when it was not queued (as `SqlStore.journal_claim`)."""
        statement, params = self.store.claim_statement(entry_id)
        return await self._run(statement, params, "claim a queued step") == 1

    async def journal_settle(
        self,
        entry_id: int,
        *,
        status: NodeStatus,
        output: bytes | None = None,
        error: str | None = None,
        tokens_in: int = 0,
        tokens_out: int = 0,
        artifacts: Mapping[str, bytes] | None = None,
    ) -> str | None:
        """Blobs and the `started` entry settled, one statement (as `SqlStore.journal_settle`)."""
        statement, params, digest = self.store.settle_statement(
            entry_id, status=status, output=output, error=error, tokens_in=tokens_in,
            tokens_out=tokens_out, artifacts=artifacts,
        )  # fmt: skip
        if await self._run(statement, params, "record a step result") != 1:
            self.store.not_settleable(entry_id)
        return digest
