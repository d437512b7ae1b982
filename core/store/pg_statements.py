"""`PooledStatements`: a small `lively_pool` (`pg_pool.py`) of autocommitted connections whose
statements are prepared on the server when first run, opened and closed with its owner, which
sends its own statements through `self._pool` (`WorkerJournal`, `SettledReads`)."""

from __future__ import annotations

from typing import Self

import psycopg
import psycopg_pool

from core.errors import StoreError
from core.store.database import describe, pg_conninfo
from core.store.pg_pool import lively_pool


class PooledStatements:
    """A pool of `size` connections to `database_url`'s PostgreSQL, named `name`."""

    def __init__(self, database_url: str, *, size: int, name: str) -> None:
        self._pool = lively_pool(
            pg_conninfo(database_url),
            min_size=1,
            max_size=max(1, size),
            kwargs={"prepare_threshold": 0},  # prepared on the server when first run
            open=False,
            name=name,
        )

    async def open(self) -> None:
        try:
            await self._pool.open(wait=True, timeout=30)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise StoreError(f"The run store could not be reached ({describe(exc)}).") from exc

    async def close(self) -> None:
        await self._pool.close()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()
