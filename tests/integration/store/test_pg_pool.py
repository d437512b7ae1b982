"""`lively_pool` on a real PostgreSQL: the pool of the worker's journal and of Baton's
Procrastinate connector. Statements run in autocommit (nothing is left open between them),
a connection the server dropped is replaced before it is lent when it sat unused, and fails
at most one statement when it did not."""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg.pq import TransactionStatus

from core.engine.distributed.queue import JobQueue, apply_queue_schema
from core.store import pg_pool
from core.store.database import pg_conninfo
from core.store.pg_pool import lively_pool

pytestmark = pytest.mark.postgres


@pytest.fixture
async def pool(postgres_url: str) -> AsyncIterator[pg_pool.psycopg_pool.AsyncConnectionPool]:
    opened = lively_pool(pg_conninfo(postgres_url), min_size=1, max_size=1, open=False)
    await opened.open(wait=True)
    try:
        yield opened
    finally:
        await opened.close()


async def _backend(pool: pg_pool.psycopg_pool.AsyncConnectionPool) -> int:
    async with pool.connection() as conn:
        row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
        assert row is not None
        return int(row[0])


async def _terminate(postgres_url: str, pid: int) -> None:
    async with await psycopg.AsyncConnection.connect(pg_conninfo(postgres_url), autocommit=True) as admin:
        await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


async def test_statements_run_in_autocommit_and_leave_no_transaction_open(
    pool: pg_pool.psycopg_pool.AsyncConnectionPool,
) -> None:
    async with pool.connection() as conn:
        assert conn.autocommit
        await conn.execute("SELECT 1")
        assert conn.info.transaction_status is TransactionStatus.IDLE  # no BEGIN was sent


async def test_a_dropped_connection_that_sat_unused_is_replaced_before_it_is_lent(
    pool: pg_pool.psycopg_pool.AsyncConnectionPool, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await _backend(pool)
    await _terminate(postgres_url, first)
    monkeypatch.setattr(pg_pool, "CHECK_AFTER_IDLE", 0.0)  # it sat unused "long enough"

    assert await _backend(pool) != first  # checked, found dead, replaced: nothing failed


async def test_a_returned_connection_is_back_in_the_pool_at_once_and_lent_again_unchecked(
    pool: pg_pool.psycopg_pool.AsyncConnectionPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No `reset` callback: psycopg_pool would hand every returned connection to a maintenance
    task first, a task hop per statement before the connection can be lent again."""
    await _backend(pool)  # lent once: checked and stamped
    monkeypatch.setattr(pg_pool, "CHECK_AFTER_IDLE", 3600.0)
    sent: list[str] = []
    execute = psycopg.AsyncConnection.execute

    async def counted(
        conn: psycopg.AsyncConnection[object], query: str, *args: object, **kw: object
    ) -> object:
        sent.append(str(query))
        return await execute(conn, query, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", counted)
    for _ in range(3):
        async with pool.connection() as conn:
            await conn.execute("SELECT 1")
        assert pool.get_stats()["pool_available"] == 1  # no await since: returned inline
    assert sent == ["SELECT 1"] * 3  # lent again within CHECK_AFTER_IDLE: no empty query


async def test_a_dropped_connection_in_use_fails_one_statement_then_is_replaced(
    pool: pg_pool.psycopg_pool.AsyncConnectionPool, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await _backend(pool)
    await _terminate(postgres_url, first)
    monkeypatch.setattr(pg_pool, "CHECK_AFTER_IDLE", 3600.0)  # just used: lent without a round trip

    with pytest.raises(psycopg.OperationalError):
        await _backend(pool)
    assert await _backend(pool) != first


async def test_procrastinate_queries_of_the_job_queue_run_on_the_lively_pool(postgres_url: str) -> None:
    apply_queue_schema(postgres_url)
    queue = JobQueue(postgres_url)
    await queue.open()
    try:
        assert await queue.depth() == {}  # a Procrastinate query through the pool works
        async with queue.app.connector.pool.connection() as conn:  # type: ignore[attr-defined]
            assert conn.autocommit
    finally:
        await queue.close()
