"""`SettledReads`: a replica's reads of the steps it waits for on workers, on its event loop.

    settled(ids)   those of these journal entries that are settled, with their output bytes

The same query as `DispatchSql.journal_settled` (one statement for every step waiting, only
the entries settled since, their outputs joined), sent on an async connection of a small
`lively_pool` (autocommitted, prepared on the server once), where `journal_settled` runs
through SQLAlchemy in a thread: a replica whose steps run on workers reads the journal every
few milliseconds while results arrive, and the thread hand-off and SQLAlchemy's execution
layer were most of each read's CPU (issue 34, measured in the commit that added this).
PostgreSQL only, like the rest of distributed execution.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg
import psycopg_pool

from core.errors import StoreError
from core.store.database import describe
from core.store.pg_statements import PooledStatements
from core.store.records import JournalEntry, NodeStatus
from core.store.rows import JOURNAL_FIELDS, journal_from_values

_JSON_FIELDS = frozenset({"components", "artifacts"})  # read as text, decoded by `rows.json_object`
_COLUMNS = ", ".join(
    f"CAST(j.{name} AS text)" if name in _JSON_FIELDS else f"j.{name}" for name in JOURNAL_FIELDS
)
_OPEN = f"'{NodeStatus.QUEUED.value}', '{NodeStatus.STARTED.value}'"
#: the journal's columns in `JOURNAL_FIELDS` order, then the output blob's bytes
_SETTLED = f"""
    SELECT {_COLUMNS}, b.data
      FROM journal AS j LEFT OUTER JOIN blobs AS b ON b.digest = j.output_digest
     WHERE j.id = ANY(CAST(%(ids)s AS bigint[])) AND j.status NOT IN ({_OPEN})
"""


class SettledReads(PooledStatements):
    """A replica's reads of settled journal entries (PostgreSQL), on its event loop."""

    def __init__(self, database_url: str, *, size: int = 1) -> None:
        super().__init__(database_url, size=size, name="baton-settled-reads")

    async def settled(self, entry_ids: Iterable[int]) -> dict[int, tuple[JournalEntry, bytes | None]]:
        """Those of these entries that are settled (neither `queued` nor `started`), each with
        its output blob's bytes (None when it has no output), in one query."""
        wanted = sorted(set(entry_ids))
        if not wanted:
            return {}
        try:
            async with self._pool.connection() as conn:
                rows: list[tuple[Any, ...]] = await (await conn.execute(_SETTLED, {"ids": wanted})).fetchall()
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise StoreError(
                f"The run store could not read settled journal entries ({describe(exc)})."
            ) from exc
        out: dict[int, tuple[JournalEntry, bytes | None]] = {}
        for row in rows:
            entry = journal_from_values(row[:-1])
            out[entry.id] = (entry, bytes(row[-1]) if row[-1] is not None else None)
        return out
