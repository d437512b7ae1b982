"""The outbox (`Deliveries`): methods of `SqlStore`.

Rows are written by a unit of work (`enqueue_delivery`, with the state change they tell).
A deliverer claims due rows with a lease: one SELECT of candidates, then per row a
compare-and-swap UPDATE that only matches while the row is undelivered and unleased (or its
lease lapsed), so of several replicas claiming at once exactly one gets each row. A row waits
while an older row of its run to the same place is undelivered: a run's replies arrive in the
order written (a notice to another conversation neither waits for them nor holds them up).
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa

from core.store.database import store_operation
from core.store.records import Delivery
from core.store.rows import delivery_from_row
from core.store.sql_base import SqlDatabase
from core.store.tables import OUTBOX

_EARLIER = OUTBOX.alias("earlier")


def _unleased(now: float) -> sa.ColumnElement[bool]:
    return sa.or_(OUTBOX.c.lease_expires_at.is_(None), OUTBOX.c.lease_expires_at <= now)


class DeliveriesSql:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    @store_operation("claim outbox replies")
    def claim_deliveries(
        self, owner: str, platforms: Iterable[str], *, lease_seconds: float, limit: int = 20,
        run_id: str | None = None,
    ) -> list[Delivery]:
        places = sorted(set(platforms))
        if not places:
            return []
        now = self._db.now()
        older_waits = (
            sa.select(_EARLIER.c.id)
            .where(
                _EARLIER.c.run_id == OUTBOX.c.run_id,
                _EARLIER.c.platform == OUTBOX.c.platform,
                _EARLIER.c.conversation == OUTBOX.c.conversation,
                _EARLIER.c.delivered_at.is_(None),
                _EARLIER.c.id < OUTBOX.c.id,
            )
            .exists()
        )
        candidates = (
            sa.select(OUTBOX.c.id)
            .where(
                OUTBOX.c.delivered_at.is_(None),
                OUTBOX.c.due_at <= now,
                OUTBOX.c.platform.in_(places),
                _unleased(now),
                ~older_waits,
            )
            .where(sa.true() if run_id is None else OUTBOX.c.run_id == run_id)
            .order_by(OUTBOX.c.due_at, OUTBOX.c.id)
            .limit(limit)
        )
        claimed: list[Delivery] = []
        with self._db.single.connect() as conn:
            ids = list(conn.execute(candidates).scalars())
        for row_id in ids:
            claim = (
                sa.update(OUTBOX)
                .where(OUTBOX.c.id == row_id, OUTBOX.c.delivered_at.is_(None), _unleased(now))
                .values(
                    claimed_by=owner, lease_expires_at=now + lease_seconds, attempts=OUTBOX.c.attempts + 1
                )
                .returning(*OUTBOX.c)
            )
            with self._db.engine.begin() as conn:
                row = conn.execute(claim).first()
            if row is not None:
                claimed.append(delivery_from_row(row))
        return claimed

    @store_operation("mark an outbox reply delivered")
    def settle_delivery(self, delivery_id: int, owner: str) -> bool:
        statement = (
            sa.update(OUTBOX)
            .where(OUTBOX.c.id == delivery_id, OUTBOX.c.claimed_by == owner, OUTBOX.c.delivered_at.is_(None))
            .values(delivered_at=self._db.now(), lease_expires_at=None)
        )
        with self._db.engine.begin() as conn:
            return conn.execute(statement).rowcount == 1

    @store_operation("retry an outbox reply later")
    def defer_delivery(self, delivery_id: int, owner: str, *, due_at: float, error: str) -> bool:
        statement = (
            sa.update(OUTBOX)
            .where(OUTBOX.c.id == delivery_id, OUTBOX.c.claimed_by == owner, OUTBOX.c.delivered_at.is_(None))
            .values(due_at=due_at, last_error=error[:2000], claimed_by=None, lease_expires_at=None)
        )
        with self._db.engine.begin() as conn:
            return conn.execute(statement).rowcount == 1

    @store_operation("release outbox claims")
    def release_deliveries(self, owner: str) -> int:
        statement = (
            sa.update(OUTBOX)
            .where(OUTBOX.c.claimed_by == owner, OUTBOX.c.delivered_at.is_(None))
            .values(claimed_by=None, lease_expires_at=None)
        )
        with self._db.engine.begin() as conn:
            return int(conn.execute(statement).rowcount)

    @store_operation("renew an outbox claim")
    def renew_delivery(self, delivery_id: int, owner: str, lease_seconds: float) -> bool:
        statement = (
            sa.update(OUTBOX)
            .where(OUTBOX.c.id == delivery_id, OUTBOX.c.claimed_by == owner, OUTBOX.c.delivered_at.is_(None))
            .values(lease_expires_at=self._db.now() + lease_seconds)
        )
        with self._db.engine.begin() as conn:
            return conn.execute(statement).rowcount == 1

    @store_operation("read the outbox")
    def delivery_claimants(self, prefix: str) -> list[str]:
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = (
            sa.select(OUTBOX.c.claimed_by)
            .where(OUTBOX.c.delivered_at.is_(None), OUTBOX.c.lease_expires_at > self._db.now(),
                   OUTBOX.c.claimed_by.like(escaped + "%", escape="\\"))
            .distinct()
            .order_by(OUTBOX.c.claimed_by)
        )
        with self._db.single.connect() as conn:
            return [str(owner) for owner in conn.execute(query).scalars()]

    @store_operation("read the outbox")
    def deliveries(self, run_id: str) -> list[Delivery]:
        query = sa.select(OUTBOX).where(OUTBOX.c.run_id == run_id).order_by(OUTBOX.c.id)
        with self._db.single.connect() as conn:
            return [delivery_from_row(row) for row in conn.execute(query)]

    @store_operation("read the outbox")
    def undelivered(self, limit: int = 100) -> list[Delivery]:
        query = sa.select(OUTBOX).where(OUTBOX.c.delivered_at.is_(None)).order_by(OUTBOX.c.id).limit(limit)
        with self._db.single.connect() as conn:
            return [delivery_from_row(row) for row in conn.execute(query)]

    @store_operation("forget delivered outbox replies")
    def forget_deliveries(self, before: float) -> int:
        stale = sa.and_(OUTBOX.c.delivered_at.is_not(None), OUTBOX.c.delivered_at < before)
        with self._db.engine.begin() as conn:
            return int(conn.execute(sa.delete(OUTBOX).where(stale)).rowcount)
