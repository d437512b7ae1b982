"""Retention on SQLite and PostgreSQL: methods of `SqlStore` (the `Retention` role).

A prune deletes runs in batches the caller chooses (`bot/retention.py`: a few hundred per
transaction), so no transaction holds SQLite's write lock or PostgreSQL's row locks for long.
Whether a run may go is decided again inside the deleting transaction (it is over, unpinned,
no run was resumed from it, its parent is gone): a run resumed between the look-up and the
delete stays. A child run goes only after its parent (a later batch of the same prune).

Blobs are content-addressed and shared (two runs with the same args, a step's output re-used
through the cache), so a prune only marks what the pruned runs referenced (`blob_sweep`); a
later sweep deletes a candidate that nothing references after a grace period and unmarks one
referenced again. Long button commands live in the blob store too, referenced by no table:
they are never candidates, so a button keeps working as long as its run exists.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa

from core.store.database import store_operation
from core.store.records import PRUNABLE, PruneCounts
from core.store.sql_base import SqlDatabase
from core.store.tables import (
    AUDIT,
    BLOB_SWEEP,
    BLOBS,
    GATE_DEADLINES,
    GATE_VOTES,
    GATES,
    JOURNAL,
    OUTBOX,
    PRUNED_RUNS,
    RUN_PINS,
    RUNS,
)

_PRUNABLE = [status.value for status in PRUNABLE]
_CHILD = RUNS.alias("child")
_PARENT = RUNS.alias("parent")


def _prunable_where() -> sa.ColumnElement[bool]:
    """A run that is over, unpinned, no existing run was resumed from, and whose parent (the
    run whose `workflow:` step started it) is gone: a parent finds its completed child again
    when it resumes, and without it would start the child anew, its unsafe steps too."""
    return sa.and_(
        RUNS.c.status.in_(_PRUNABLE),
        ~sa.exists().where(RUN_PINS.c.run_id == RUNS.c.id),
        ~sa.exists().where(_CHILD.c.resumed_from == RUNS.c.id),
        ~sa.exists().where(_PARENT.c.id == RUNS.c.parent_run),
    )


def _digests_of_artifacts(values: Iterable[Any]) -> set[str]:
    found: set[str] = set()
    for value in values:
        mapping = json.loads(value) if isinstance(value, str) else value
        if isinstance(mapping, dict):
            found.update(str(d) for d in mapping.values())
    return found


class RetentionSql:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    @store_operation("find runs to prune")
    def prunable_runs(self, before: float, limit: int = 500) -> list[str]:
        query = (
            sa.select(RUNS.c.id)
            .where(RUNS.c.created_at < before, RUNS.c.updated_at < before, _prunable_where())
            .order_by(RUNS.c.created_at, RUNS.c.id)  # the `created_at` index: oldest first
            .limit(limit)
        )
        with self._db.single.connect() as conn:
            return [str(i) for i in conn.execute(query).scalars()]

    @store_operation("count what a prune would delete")
    def prune_counts(self, run_ids: Sequence[str]) -> PruneCounts:
        with self._db.single.connect() as conn:
            ids = self._still_prunable(conn, run_ids)
            return self._counts(conn, ids)

    @store_operation("prune runs")
    def prune_runs(self, run_ids: Sequence[str]) -> PruneCounts:
        if not run_ids:
            return PruneCounts()
        now = self._db.now()
        with self._db.engine.begin() as conn:
            if self._db.dialect == "postgresql":  # the runs stay as read until the delete
                conn.execute(sa.select(RUNS.c.id).where(RUNS.c.id.in_(list(run_ids))).with_for_update())
            ids = self._still_prunable(conn, run_ids)
            if not ids:
                return PruneCounts()
            runs = conn.execute(
                sa.select(RUNS.c.id, RUNS.c.workflow, RUNS.c.status, RUNS.c.args_digest).where(
                    RUNS.c.id.in_(ids)
                )
            ).all()
            outputs = conn.execute(
                sa.select(JOURNAL.c.output_digest, JOURNAL.c.artifacts).where(JOURNAL.c.run_id.in_(ids))
            ).all()
            artifacts = _digests_of_artifacts(o.artifacts for o in outputs)
            others = {r.args_digest for r in runs} | {o.output_digest for o in outputs if o.output_digest}
            counts = PruneCounts(
                journal=conn.execute(sa.delete(JOURNAL).where(JOURNAL.c.run_id.in_(ids))).rowcount,
                votes=conn.execute(sa.delete(GATE_VOTES).where(GATE_VOTES.c.run_id.in_(ids))).rowcount,
                deadlines=conn.execute(
                    sa.delete(GATE_DEADLINES).where(GATE_DEADLINES.c.run_id.in_(ids))
                ).rowcount,
                gates=conn.execute(sa.delete(GATES).where(GATES.c.run_id.in_(ids))).rowcount,
                outbox=conn.execute(sa.delete(OUTBOX).where(OUTBOX.c.run_id.in_(ids))).rowcount,
            )
            conn.execute(
                self._db.insert_ignore(PRUNED_RUNS, ["id"]),
                [{"id": r.id, "workflow": r.workflow, "status": r.status, "pruned_at": now} for r in runs],
            )
            marks = [{"digest": d, "marked_at": now, "artifact": True} for d in sorted(artifacts)]
            marks += [{"digest": d, "marked_at": now, "artifact": False} for d in sorted(others - artifacts)]
            if marks:
                conn.execute(self._db.insert_ignore(BLOB_SWEEP, ["digest"]), marks)
            deleted = conn.execute(sa.delete(RUNS).where(RUNS.c.id.in_(ids))).rowcount
        return PruneCounts(
            deleted, counts.journal, counts.gates, counts.votes, counts.deadlines, counts.outbox
        )

    @store_operation("look up pruned runs")
    def pruned_among(self, run_ids: Sequence[str]) -> set[str]:
        if not run_ids:
            return set()
        query = sa.select(PRUNED_RUNS.c.id).where(PRUNED_RUNS.c.id.in_(list(run_ids)))
        with self._db.single.connect() as conn:
            return {str(i) for i in conn.execute(query).scalars()}

    def _still_prunable(self, conn: sa.Connection, run_ids: Sequence[str]) -> list[str]:
        if not run_ids:
            return []
        query = sa.select(RUNS.c.id).where(RUNS.c.id.in_(list(run_ids)), _prunable_where())
        return [str(i) for i in conn.execute(query).scalars()]

    @staticmethod
    def _counts(conn: sa.Connection, ids: Sequence[str]) -> PruneCounts:
        if not ids:
            return PruneCounts()

        def count(table: sa.Table) -> int:
            query = sa.select(sa.func.count()).select_from(table).where(table.c.run_id.in_(list(ids)))
            return int(conn.execute(query).scalar_one())

        return PruneCounts(
            len(ids), count(JOURNAL), count(GATES), count(GATE_VOTES), count(GATE_DEADLINES), count(OUTBOX)
        )

    @store_operation("pin a run")
    def pin_run(self, run_id: str, by: str) -> bool:
        with self._db.engine.begin() as conn:
            self._db.read_run(conn, run_id)  # RunNotFound (or RunPruned)
            statement = self._db.insert_ignore(RUN_PINS, ["run_id"]).values(
                run_id=run_id, pinned_by=by, at=self._db.now()
            )
            inserted = conn.execute(statement.returning(RUN_PINS.c.run_id)).first()
        return inserted is not None

    @store_operation("unpin a run")
    def unpin_run(self, run_id: str) -> bool:
        with self._db.engine.begin() as conn:
            return bool(conn.execute(sa.delete(RUN_PINS).where(RUN_PINS.c.run_id == run_id)).rowcount)

    @store_operation("read a run's pin")
    def is_pinned(self, run_id: str) -> bool:
        with self._db.single.connect() as conn:
            return (
                conn.execute(sa.select(RUN_PINS.c.run_id).where(RUN_PINS.c.run_id == run_id)).first()
                is not None
            )

    @store_operation("sweep unreferenced blobs")
    def sweep_blobs(self, marked_before: float, limit: int = 1000) -> int:
        with self._db.engine.begin() as conn:
            rows = conn.execute(
                sa.select(BLOB_SWEEP.c.digest, BLOB_SWEEP.c.artifact)
                .where(BLOB_SWEEP.c.marked_at < marked_before)
                .order_by(BLOB_SWEEP.c.marked_at)
                .limit(limit)
            ).all()
            if not rows:
                return 0
            batch = [str(r.digest) for r in rows]
            used = set(
                conn.execute(sa.select(RUNS.c.args_digest).where(RUNS.c.args_digest.in_(batch))).scalars()
            )
            used |= set(
                conn.execute(
                    sa.select(JOURNAL.c.output_digest).where(JOURNAL.c.output_digest.in_(batch))
                ).scalars()
            )
            if any(r.artifact for r in rows):  # an artifact's digest sits in unindexed JSON: look
                with_artifacts = conn.execute(  # through the few entries that have any
                    sa.select(JOURNAL.c.artifacts).where(sa.cast(JOURNAL.c.artifacts, sa.Text) != "{}")
                ).scalars()
                used |= _digests_of_artifacts(with_artifacts) & set(batch)
            gone = [d for d in batch if d not in used]
            deleted = conn.execute(sa.delete(BLOBS).where(BLOBS.c.digest.in_(gone))).rowcount if gone else 0
            conn.execute(sa.delete(BLOB_SWEEP).where(BLOB_SWEEP.c.digest.in_(batch)))
        return int(deleted)

    @store_operation("forget old audit entries")
    def forget_audit(self, before: float) -> int:
        with self._db.engine.begin() as conn:
            return int(conn.execute(sa.delete(AUDIT).where(AUDIT.c.at < before)).rowcount)

    @store_operation("count old audit entries")
    def count_audit(self, before: float) -> int:
        query = sa.select(sa.func.count()).select_from(AUDIT).where(AUDIT.c.at < before)
        with self._db.single.connect() as conn:
            return int(conn.execute(query).scalar_one())

    @store_operation("compact the database")
    def vacuum(self) -> None:
        """Give the space of deleted rows back to the file system (`VACUUM`; SQLite only:
        PostgreSQL's autovacuum makes it reusable by itself)."""
        if self._db.dialect != "sqlite":
            return
        with self._db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM")
