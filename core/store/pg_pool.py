"""`lively_pool`: the async PostgreSQL connection pool of a worker's per-step statements
(`WorkerJournal`) and of Baton's Procrastinate connector (`queue_connector`).

Every statement sent through it is one statement in a transaction of its own, so its
connections are in autocommit: no BEGIN and COMMIT round trips around it. A connection is
checked before it is lent, to replace one the server dropped (a restart, an idle timeout):
one the driver knows is closed or broken is replaced at once, and one unused for more than
`CHECK_AFTER_IDLE` seconds is checked with an empty query. While statements flow, that is
one round trip per statement where psycopg_pool's usual `check_connection` and a
transaction cost four (measured in bench/FINDINGS.md).
"""

from __future__ import annotations

import time
import weakref
from typing import Any

import psycopg
import psycopg_pool

#: a pooled connection unused longer than this is checked with a round trip before it is lent
CHECK_AFTER_IDLE = 1.0

_returned: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], float] = weakref.WeakKeyDictionary()


async def _autocommit(conn: psycopg.AsyncConnection[Any]) -> None:
    await conn.set_autocommit(True)


async def _check(conn: psycopg.AsyncConnection[Any]) -> None:
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    if time.monotonic() - _returned.get(conn, 0.0) > CHECK_AFTER_IDLE:
        await conn.execute("")


async def _stamp(conn: psycopg.AsyncConnection[Any]) -> None:
    _returned[conn] = time.monotonic()


def lively_pool(conninfo: str = "", **kwargs: Any) -> psycopg_pool.AsyncConnectionPool:
    """An `AsyncConnectionPool(conninfo, **kwargs)` with the configuration above (it replaces
    any `configure`, `check` or `reset` given)."""
    return psycopg_pool.AsyncConnectionPool(
        conninfo, **{**kwargs, "configure": _autocommit, "check": _check, "reset": _stamp}
    )
