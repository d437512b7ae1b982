"""Subscriptions (`Subscriptions`): methods of `SqlStore`.

One row per place (platform, conversation), workflow (`*`: every one) and event. Subscribing
again keeps the row and makes its creator the one who subscribed last (whose right to view
the runs it now rests on).
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa

from core.store.database import dialect_insert, store_operation
from core.store.records import Subscription
from core.store.rows import subscription_from_row
from core.store.sql_base import SqlDatabase
from core.store.tables import SUBSCRIPTIONS

_S = SUBSCRIPTIONS.c
_ORDER = (_S.platform, _S.conversation, _S.workflow, _S.event)


class SubscriptionsSql:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    @store_operation("subscribe a conversation")
    def subscribe(
        self, platform: str, conversation: str, workflow: str, events: Iterable[str], *, by: str
    ) -> list[Subscription]:
        now = self._db.now()
        rows = [{"platform": platform, "conversation": conversation, "workflow": workflow, "event": e,
                 "created_by": by, "created_at": now} for e in sorted(set(events))]  # fmt: skip
        if rows:
            insert = dialect_insert(self._db.dialect)
            statement = insert(SUBSCRIPTIONS).on_conflict_do_update(
                index_elements=["platform", "conversation", "workflow", "event"], set_={"created_by": by}
            )
            with self._db.engine.begin() as conn:
                conn.execute(statement, rows)
        return self.subscriptions(platform=platform, conversation=conversation, workflow=workflow)

    @store_operation("unsubscribe a conversation")
    def unsubscribe(
        self, platform: str, conversation: str, workflow: str | None = None,
        events: Iterable[str] | None = None,
    ) -> int:
        statement = sa.delete(SUBSCRIPTIONS).where(_S.platform == platform, _S.conversation == conversation)
        if workflow is not None:
            statement = statement.where(_S.workflow == workflow)
        if events is not None:
            statement = statement.where(_S.event.in_(sorted(set(events))))
        with self._db.engine.begin() as conn:
            return int(conn.execute(statement).rowcount)

    @store_operation("read subscriptions")
    def subscriptions(
        self, *, platform: str | None = None, conversation: str | None = None, workflow: str | None = None
    ) -> list[Subscription]:
        query = sa.select(SUBSCRIPTIONS).order_by(*_ORDER)
        if platform is not None:
            query = query.where(_S.platform == platform)
        if conversation is not None:
            query = query.where(_S.conversation == conversation)
        if workflow is not None:
            query = query.where(_S.workflow.in_(sorted({workflow, "*"})))
        with self._db.single.connect() as conn:
            return [subscription_from_row(row) for row in conn.execute(query)]
