"""`lively_pool`: the async PostgreSQL connection pool of a worker's per-step statements
(`WorkerJournal`) and of Baton's Procrastinate connector (`queue_connector`).

Every statement sent through it is one statement in a transaction of its own, so its
connections are in autocommit: no BEGIN and COMMIT round trips around it. A connection is
checked before it is lent, to replace one the server dropped (a restart, an idle timeout):
one the driver knows is closed or broken is replaced at once, and one not lent for more than
`CHECK_AFTER_IDLE` seconds is checked with an empty query. While statements flow, that is
one round trip per statement where psycopg_pool's usual `check_connection` and a
transaction cost four (measured in bench/FINDINGS.md). A returned connection goes back into
the pool at once: there is no `reset` callback, which psycopg_pool runs in a task of its own.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

import psycopg
import psycopg_pool

#: a pooled connection unused longer than this is checked with a round trip before it is lent
CHECK_AFTER_IDLE = 1.0

#: when each pooled connection was last lent (`_check`)
_lent: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], float] = weakref.WeakKeyDictionary()


async def _autocommit(conn: psycopg.AsyncConnection[Any]) -> None:
    await conn.set_autocommit(True)


async def _check(conn: psycopg.AsyncConnection[Any]) -> None:
    """Run by the pool each time it lends `conn`: checked with a round trip when it was last
    lent more than `CHECK_AFTER_IDLE` ago (a connection is unused at least since it was
    returned, so this checks at least as often as timing from its return would), then
    stamped. Stamping here rather than in a `reset` callback keeps the pool's return of a
    connection inline: with `reset`, psycopg_pool hands every returned connection to a
    maintenance task first (a task hop per statement, and the connection not lendable until
    it ran: measured in issue 34, ~45 us of the worker's CPU per statement)."""
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    now = time.monotonic()
    if now - _lent.get(conn, 0.0) > CHECK_AFTER_IDLE:
        await conn.execute("")
    _lent[conn] = now


def lively_pool(conninfo: str = "", **kwargs: Any) -> psycopg_pool.AsyncConnectionPool:
    """An `AsyncConnectionPool(conninfo, **kwargs)` with the configuration above (it replaces
    any `configure` or `check` given, and drops any `reset`)."""
    kwargs.pop("reset", None)
    return psycopg_pool.AsyncConnectionPool(conninfo, **{**kwargs, "configure": _autocommit, "check": _check})
