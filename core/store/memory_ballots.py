"""The `Ballots` role in memory (`MemoryStore` holds one): the same rules as `ballots_sql.py`,
under the store's lock. A vote is kept once per (gate opening, person, ballot), and only when
it agrees with the opening's proposal (`refuse_other_proposal`); a deadline fires for exactly
one caller."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from core.store.cas import refuse_other_proposal
from core.store.records import GateDeadline, GateVote

_VoteKey = tuple[str, str, float, str, str]
_DeadlineKey = tuple[str, str, float, str]


class MemoryBallots:
    def __init__(
        self, lock: threading.RLock, now: Callable[[], float], deadlines: dict[_DeadlineKey, GateDeadline],
        votes: dict[_VoteKey, GateVote],
    ) -> None:
        self._lock = lock
        self._now = now
        self._votes = votes  # the store's tables: a unit of work casts votes and fires deadlines too
        self._deadlines = deadlines

    def cast_vote(self, vote: GateVote) -> bool:
        key = (vote.run_id, vote.node_id, vote.opened_at, vote.user, vote.ballot)
        with self._lock:
            if key in self._votes:
                return False
            if vote.ballot == "vote":
                refuse_other_proposal(vote, self.gate_votes(vote.run_id, vote.node_id, vote.opened_at))
            self._votes[key] = vote.evolve(values=dict(vote.values))
            return True

    def gate_votes(self, run_id: str, node_id: str, opened_at: float) -> list[GateVote]:
        with self._lock:
            found = [v for k, v in self._votes.items() if k[:3] == (run_id, node_id, opened_at)]
        return sorted(found, key=lambda v: (v.at, v.user))

    def plan_deadlines(
        self, run_id: str, node_id: str, opened_at: float, due: Sequence[tuple[str, float]]
    ) -> None:
        with self._lock:
            for name, at in due:
                self._deadlines.setdefault(
                    (run_id, node_id, opened_at, name), GateDeadline(run_id, node_id, opened_at, name, at)
                )

    def due_deadlines(self, now: float, limit: int = 100) -> list[GateDeadline]:
        with self._lock:
            found = [d for d in self._deadlines.values() if d.fired_at is None and d.due_at <= now]
        return sorted(found, key=lambda d: d.due_at)[:limit]

    def gate_deadlines(self, run_id: str, node_id: str, opened_at: float) -> list[GateDeadline]:
        with self._lock:
            found = [d for k, d in self._deadlines.items() if k[:3] == (run_id, node_id, opened_at)]
        return sorted(found, key=lambda d: (d.due_at, d.name))

    def fire_deadline(self, deadline: GateDeadline, by: str) -> bool:
        key = (deadline.run_id, deadline.node_id, deadline.opened_at, deadline.name)
        with self._lock:
            current = self._deadlines.get(key)
            if current is None or current.fired_at is not None:
                return False
            self._deadlines[key] = current.evolve(fired_at=self._now(), fired_by=by)
            return True

    def drop_runs(self, run_ids: set[str]) -> tuple[int, int]:
        """Forget the votes and deadlines of these runs (a prune); (votes, deadlines) dropped."""
        with self._lock:
            votes = [k for k in self._votes if k[0] in run_ids]
            deadlines = [k for k in self._deadlines if k[0] in run_ids]
            for vote in votes:
                del self._votes[vote]
            for deadline in deadlines:
                del self._deadlines[deadline]
        return len(votes), len(deadlines)

    def counts(self, run_ids: set[str]) -> tuple[int, int]:
        with self._lock:
            return (sum(k[0] in run_ids for k in self._votes), sum(k[0] in run_ids for k in self._deadlines))
