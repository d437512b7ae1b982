"""The `Ballots` role of `SqlStore`: votes on approval gates and their durable deadlines.

`cast_vote` is an INSERT … ON CONFLICT DO NOTHING keyed on (gate opening, person, ballot):
the same person voting twice inserts once. A quorum approves one thing: a vote is kept only
when it agrees with the opening's proposal (its first vote's choice and values), else
`VoteDiffers`; the check and the insert run in one transaction that first locks the run's
row (a no-op UPDATE), so two people proposing different values at once cannot both be kept. Whether
the votes so far open the gate is the policy's arithmetic (`core/engine/approval_policy.py`)
over `gate_votes`; opening it is the gate's own compare-and-swap, which one caller wins.

`plan_deadlines` inserts a gate opening's deadlines once (racing planners agree);
`due_deadlines` lists those due and not fired; `fire_deadline` is a compare-and-swap
(`fired_at IS NULL`) that exactly one replica wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from core.store.cas import refuse_other_proposal
from core.store.database import store_operation
from core.store.records import GateDeadline, GateVote
from core.store.rows import deadline_from_row, vote_from_row
from core.store.sql_base import SqlDatabase
from core.store.tables import GATE_DEADLINES, GATE_VOTES, RUNS


class BallotsSql:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    @store_operation("record a vote")
    def cast_vote(self, vote: GateVote) -> bool:
        """Record `vote`; False when that person's same ballot was there (it counts once);
        `VoteDiffers` when it is for another choice or other values than the proposal."""
        row = {
            "run_id": vote.run_id, "node_id": vote.node_id, "opened_at": vote.opened_at,
            "user": vote.user, "ballot": vote.ballot, "choice": vote.choice, "at": vote.at,
            "comment": vote.comment, "vals": dict(vote.values),
        }  # fmt: skip
        keys = ["run_id", "node_id", "opened_at", "user", "ballot"]
        with self._db.engine.begin() as conn:
            # the run's row locked (a write): voters on this run's gates take turns from here
            conn.execute(sa.update(RUNS).where(RUNS.c.id == vote.run_id).values(id=RUNS.c.id))
            if vote.ballot == "vote":
                mine = sa.and_(GATE_VOTES.c.user == vote.user, GATE_VOTES.c.ballot == vote.ballot)
                if conn.execute(self._votes_query(vote).where(mine)).first() is not None:
                    return False
                refuse_other_proposal(vote, [vote_from_row(r) for r in conn.execute(self._votes_query(vote))])
            # RETURNING, not rowcount: a skipped INSERT's rowcount is not portable
            statement = self._db.insert_ignore(GATE_VOTES, keys).values(row).returning(GATE_VOTES.c.ballot)
            return conn.execute(statement).first() is not None

    @staticmethod
    def _votes_query(vote: GateVote) -> sa.Select[Any]:
        return sa.select(GATE_VOTES).where(
            GATE_VOTES.c.run_id == vote.run_id,
            GATE_VOTES.c.node_id == vote.node_id,
            GATE_VOTES.c.opened_at == vote.opened_at,
        )

    @store_operation("read the votes of a gate")
    def gate_votes(self, run_id: str, node_id: str, opened_at: float) -> list[GateVote]:
        """The votes on one opening of a gate, in the order they were cast."""
        query = (
            sa.select(GATE_VOTES)
            .where(
                GATE_VOTES.c.run_id == run_id,
                GATE_VOTES.c.node_id == node_id,
                GATE_VOTES.c.opened_at == opened_at,
            )
            .order_by(GATE_VOTES.c.at, GATE_VOTES.c.user)
        )
        with self._db.single.connect() as conn:
            return [vote_from_row(row) for row in conn.execute(query)]

    @store_operation("plan the deadlines of a gate")
    def plan_deadlines(
        self, run_id: str, node_id: str, opened_at: float, due: Sequence[tuple[str, float]]
    ) -> None:
        """Keep the deadlines `due` ((name, due_at), …) of one opening of a gate; planning
        them again (another replica, a restart) changes nothing."""
        if not due:
            return
        rows = [
            {"run_id": run_id, "node_id": node_id, "opened_at": opened_at, "name": name, "due_at": at}
            for name, at in due
        ]
        keys = ["run_id", "node_id", "opened_at", "name"]
        with self._db.engine.begin() as conn:
            conn.execute(self._db.insert_ignore(GATE_DEADLINES, keys), rows)

    @store_operation("read due deadlines")
    def due_deadlines(self, now: float, limit: int = 100) -> list[GateDeadline]:
        """Deadlines due at `now` that no replica fired yet, earliest first."""
        query = (
            sa.select(GATE_DEADLINES)
            .where(GATE_DEADLINES.c.fired_at.is_(None), GATE_DEADLINES.c.due_at <= now)
            .order_by(GATE_DEADLINES.c.due_at)
            .limit(limit)
        )
        with self._db.single.connect() as conn:
            return [deadline_from_row(row) for row in conn.execute(query)]

    @store_operation("read the deadlines of a gate")
    def gate_deadlines(self, run_id: str, node_id: str, opened_at: float) -> list[GateDeadline]:
        query = (
            sa.select(GATE_DEADLINES)
            .where(
                GATE_DEADLINES.c.run_id == run_id,
                GATE_DEADLINES.c.node_id == node_id,
                GATE_DEADLINES.c.opened_at == opened_at,
            )
            .order_by(GATE_DEADLINES.c.due_at, GATE_DEADLINES.c.name)
        )
        with self._db.single.connect() as conn:
            return [deadline_from_row(row) for row in conn.execute(query)]

    @store_operation("fire a deadline")
    def fire_deadline(self, deadline: GateDeadline, by: str) -> bool:
        """Mark `deadline` fired by `by`; True for exactly one caller (compare-and-swap)."""
        statement = (
            sa.update(GATE_DEADLINES)
            .where(
                GATE_DEADLINES.c.run_id == deadline.run_id,
                GATE_DEADLINES.c.node_id == deadline.node_id,
                GATE_DEADLINES.c.opened_at == deadline.opened_at,
                GATE_DEADLINES.c.name == deadline.name,
                GATE_DEADLINES.c.fired_at.is_(None),
            )
            .values(fired_at=self._db.now(), fired_by=by)
        )
        with self._db.engine.begin() as conn:
            return conn.execute(statement).rowcount == 1
