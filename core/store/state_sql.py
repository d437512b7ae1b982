"""Small named values a chat adapter keeps across restarts: methods of `SqlStore`.

The Slack adapter edits one progress message per run and passes over-long button commands
by reference; the message id and the command must still be found after the bot restarts.
They live here, per platform, as text under a key the adapter chooses. Writing a key
again replaces its value and its time `at` (one INSERT … ON CONFLICT DO UPDATE).
`forget_state` drops values last written before a cut-off (bot/housekeeping.py), except
Baton's own (platform `KEPT`): values every replica must agree on for good, such as the key
that signs run-page links, written once with `keep_state`.
"""

from __future__ import annotations

import sqlalchemy as sa

from core.store.database import dialect_insert, store_operation
from core.store.sql_base import SqlDatabase
from core.store.tables import PLATFORM_STATE

#: the platform name of Baton's own values, which housekeeping never drops
KEPT = "baton"


class StateSql:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    @store_operation("keep a shared value")
    def keep_state(self, platform: str, key: str, value: str) -> str:
        """The value kept under (`platform`, `key`); `value` when there was none. Of several
        processes racing here, all get the one value that was written first."""
        row = {"platform": platform, "key": key, "value": value, "at": self._db.now()}
        with self._db.engine.begin() as conn:
            conn.execute(self._db.insert_ignore(PLATFORM_STATE, ["platform", "key"]).values(row))
        kept = self.get_state(platform, key)
        if kept is None:  # dropped between the two statements: only `forget_state` could
            raise KeyError(key)
        return kept

    @store_operation("remember a chat platform value")
    def put_state(self, platform: str, key: str, value: str) -> None:
        """Keep `value` under (`platform`, `key`), replacing what was there."""
        insert = dialect_insert(self._db.dialect)
        row = {"platform": platform, "key": key, "value": value, "at": self._db.now()}
        statement = insert(PLATFORM_STATE).values(row).on_conflict_do_update(
            index_elements=["platform", "key"], set_={"value": value, "at": row["at"]}
        )
        with self._db.engine.begin() as conn:
            conn.execute(statement)

    @store_operation("read a chat platform value")
    def get_state(self, platform: str, key: str) -> str | None:
        """The value kept under (`platform`, `key`), or None."""
        query = sa.select(PLATFORM_STATE.c.value).where(
            PLATFORM_STATE.c.platform == platform, PLATFORM_STATE.c.key == key
        )
        with self._db.single.connect() as conn:
            value = conn.execute(query).scalar_one_or_none()
        return None if value is None else str(value)

    @store_operation("forget old chat platform values")
    def forget_state(self, before: float) -> int:
        """Drop values last written before `before`, Baton's own (`KEPT`) excepted; how many
        (one DELETE)."""
        stale = sa.and_(PLATFORM_STATE.c.at < before, PLATFORM_STATE.c.platform != KEPT)
        with self._db.engine.begin() as conn:
            return int(conn.execute(sa.delete(PLATFORM_STATE).where(stale)).rowcount)
