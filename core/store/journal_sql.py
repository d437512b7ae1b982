"""Journal and blob methods of `SqlStore`.

`journal_start`, `journal_finish` and `put_blob` are the engine's hot path, through `HotPath`:
one commit each (`journal_finish` stores the blobs it is given in the same one);
`journal_complete_many` is the blobs and `completed`
entries of one or more steps in one commit, for steps whose start is not journaled (see
the executor and `core/engine/group_commit.py`).
`journal(run_ids)` and `get_blobs` are one query for any number of ids; `lineage` is one recursive CTE.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa

from core.errors import RunNotFound, StoreError
from core.store import cas
from core.store.database import store_operation
from core.store.port import StepEntry, StepResult, digest_bytes
from core.store.records import MARKER_KEY, JournalEntry, NodeStatus, stored
from core.store.rows import JOURNAL_FIELDS, journal_from_row, journal_from_values, outline_from_values
from core.store.sql_base import SqlDatabase
from core.store.tables import BLOBS, JOURNAL

_START_COLUMNS = (
    "run_id", "node_id", "attempt", "cache_key", "components", "status", "started_at",
    "idempotency_key", "tokens_in", "tokens_out", "artifacts",
)  # fmt: skip
_DONE_COLUMNS = (*_START_COLUMNS, "finished_at", "output_digest")
_FINAL_NODE_STATUSES = (NodeStatus.COMPLETED, NodeStatus.FAILED)
#: the journal's columns with the JSON ones read as text: `rows.json_object` decodes them
#: without SQLAlchemy's per-value processing (a 1,000-entry read is a resume's biggest cost)
_READ_COLUMNS = [
    sa.type_coerce(c, sa.Text).label(c.name) if isinstance(c.type, sa.JSON) else c
    for c in (JOURNAL.c[name] for name in JOURNAL_FIELDS)
]
#: `journal_outline`'s columns: the same with the key components left out (a marker's kept:
#: they are its decision), then the notes stored beside them, extracted by the database
_NOTES = JOURNAL.c.components
_OUTLINE_COLUMNS = [
    sa.type_coerce(sa.case((JOURNAL.c.cache_key == MARKER_KEY, JOURNAL.c.components)), sa.Text).label(c.name)
    if c.name == "components" else c
    for c in _READ_COLUMNS
] + [
    _NOTES["_reason"].as_string(), _NOTES["_skipped"].as_string(), _NOTES["_tokens"].as_integer(),
    _NOTES["_identity"].as_string(), _NOTES["_child"].as_string(), _NOTES["_of"].as_integer(),
]  # fmt: skip
_COPY_COLUMNS = (
    "run_id", "node_id", "attempt", "cache_key", "components", "status", "started_at", "finished_at",
    "output_digest", "idempotency_key", "tokens_in", "tokens_out", "artifacts", "cached_from",
)  # fmt: skip
_COPY_CHUNK = 5000  # ids per INSERT … SELECT (well under every driver's parameter limit)
_LINEAGE = sa.text(
    """
    WITH RECURSIVE chain(id, resumed_from, depth) AS (
        SELECT id, resumed_from, 0 FROM runs WHERE id = :run_id
        UNION ALL
        SELECT r.id, r.resumed_from, c.depth + 1
          FROM runs r JOIN chain c ON r.id = c.resumed_from
         WHERE c.depth < 10000
    )
    SELECT id FROM chain ORDER BY depth
    """
)


class JournalSql:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db
        self._journal_start_sql = self._db.hot.prepare(
            sa.insert(JOURNAL).returning(JOURNAL.c.id), column_keys=_START_COLUMNS
        )
        self._journal_finish_sql = self._db.hot.prepare(
            sa.update(JOURNAL)
            .where(JOURNAL.c.id == sa.bindparam("entry_id"), JOURNAL.c.status == NodeStatus.STARTED.value)
            .values(
                status=sa.bindparam("b_status"),
                finished_at=sa.bindparam("b_finished_at"),
                output_digest=sa.bindparam("b_output_digest"),
                error=sa.bindparam("b_error"),
                tokens_in=sa.bindparam("b_tokens_in"),
                tokens_out=sa.bindparam("b_tokens_out"),
                artifacts=sa.bindparam("b_artifacts"),
            )
        )
        self._journal_done_sql = self._db.hot.prepare(sa.insert(JOURNAL), column_keys=_DONE_COLUMNS)
        self._put_blob_sql = self._db.hot.prepare(
            self._db.insert_ignore(BLOBS, ["digest"]), column_keys=("digest", "data", "size")
        )

    # -- blobs ----------------------------------------------------------------------------
    def put_blob(self, data: bytes) -> str:
        digest = digest_bytes(data)
        params = {"digest": digest, "data": data, "size": len(data)}
        self._db.hot.run(self._put_blob_sql, params, operation="store a blob")
        return digest

    @store_operation("read a blob")
    def get_blob(self, digest: str) -> bytes:
        with self._db.single.connect() as conn:
            data = conn.execute(sa.select(BLOBS.c.data).where(BLOBS.c.digest == digest)).scalar()
        if data is None:
            raise KeyError(digest)
        return bytes(data)

    @store_operation("read blobs")
    def get_blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        wanted = sorted(set(digests))
        if not wanted:
            return {}
        query = sa.select(BLOBS.c.digest, BLOBS.c.data).where(BLOBS.c.digest.in_(wanted))
        with self._db.single.connect() as conn:
            return {digest: bytes(data) for digest, data in conn.execute(query)}

    # -- journal ----------------------------------------------------------------------------
    def journal_start(self, step: StepEntry) -> int:
        params = {
            "run_id": step.run_id,
            "node_id": step.node_id,
            "attempt": step.attempt,
            "cache_key": step.cache_key,
            "components": json.dumps(stored(step.components, step.notes)),
            "status": NodeStatus.STARTED.value,
            "started_at": self._db.now(),
            "idempotency_key": step.idempotency_key,
            "tokens_in": 0,
            "tokens_out": 0,
            "artifacts": "{}",
        }
        outcome = self._db.hot.run(self._journal_start_sql, params, operation="record a step start")
        return int(outcome.returned)

    def journal_complete_many(self, results: Sequence[StepResult]) -> None:
        """The blobs, then the `completed` entries, of several steps: one transaction.

        Blobs go in digest order, so two writers inserting the same blobs take their
        row locks in the same order (PostgreSQL) and cannot deadlock each other.
        """
        if not results:
            return
        now = self._db.now()
        blobs = {r.digest: {"digest": r.digest, "data": r.output, "size": len(r.output)} for r in results}
        entries = [
            {
                "run_id": r.run_id,
                "node_id": r.node_id,
                "attempt": r.attempt,
                "cache_key": r.cache_key,
                "components": json.dumps(stored(r.components, r.notes)),
                "status": NodeStatus.COMPLETED.value,
                "started_at": now,
                "finished_at": now,
                "output_digest": r.digest,
                "idempotency_key": r.idempotency_key,
                "tokens_in": r.tokens_in,
                "tokens_out": r.tokens_out,
                "artifacts": "{}",
            }
            for r in results
        ]
        self._db.hot.run_many(
            [(self._put_blob_sql, [blobs[d] for d in sorted(blobs)]), (self._journal_done_sql, entries)],
            operation="record step results",
        )

    def journal_finish(
        self,
        entry_id: int,
        *,
        status: NodeStatus,
        output_digest: str | None = None,
        error: str | None = None,
        tokens_in: int = 0,
        tokens_out: int = 0,
        artifacts: dict[str, str] | None = None,
        blobs: Sequence[bytes] = (),
    ) -> None:
        """Settle a `started` entry once; settling it again raises InvalidTransition. `blobs`
        (the output and artifacts the digests name) are stored in the same transaction."""
        status = NodeStatus(status)
        if status not in _FINAL_NODE_STATUSES:
            raise ValueError(f"journal_finish takes completed or failed, not {status.value}")
        params = {
            "entry_id": entry_id,
            "b_status": status.value,
            "b_finished_at": self._db.now(),
            "b_output_digest": output_digest,
            "b_error": error,
            "b_tokens_in": tokens_in,
            "b_tokens_out": tokens_out,
            "b_artifacts": json.dumps(artifacts or {}),
        }
        if blobs:
            rows = {d: {"digest": d, "data": b, "size": len(b)} for b in blobs for d in [digest_bytes(b)]}
            outcome = self._db.hot.run_after(
                [(self._put_blob_sql, [rows[d] for d in sorted(rows)])],
                self._journal_finish_sql,
                params,
                operation="record a step result",
            )
        else:
            outcome = self._db.hot.run(self._journal_finish_sql, params, operation="record a step result")
        if outcome.rowcount != 1:
            self._explain_unfinishable(entry_id)

    @store_operation("read a journal entry")
    def _explain_unfinishable(self, entry_id: int) -> None:
        with self._db.single.connect() as conn:
            row = conn.execute(sa.select(JOURNAL).where(JOURNAL.c.id == entry_id)).first()
        if row is None:
            raise StoreError(f"Journal entry {entry_id} does not exist.", hint="This is a bug in Baton.")
        raise cas.already_settled(journal_from_row(row))

    @store_operation("record re-used results")
    def journal_record_cached(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        """Copy the stored rows of `entries` (by id) into `run_id`'s journal, in one transaction.

        Copies are `completed` now, with no tokens spent; `cached_from` names the run that
        computed the result (the origin, also when the entry was itself a copy). Components
        and artifacts are copied by the database as stored (INSERT … SELECT: nothing is
        decoded or re-encoded), except that the copy of an original that spent tokens notes
        them (`KeyNotes.saved_tokens`): what re-using it saved."""
        if not entries:
            return
        now = self._db.now()
        plain = [e.id for e in entries if not (e.tokens_in or e.tokens_out)]
        spent = [e for e in entries if e.tokens_in or e.tokens_out]
        with self._db.engine.begin() as conn:
            for start in range(0, len(plain), _COPY_CHUNK):
                conn.execute(_copy_rows(run_id, now, plain[start : start + _COPY_CHUNK]))
            if spent:
                conn.execute(sa.insert(JOURNAL), [_copy_with_tokens(run_id, now, e) for e in spent])

    @store_operation("read the journal")
    def journal(self, run_ids: Sequence[str]) -> list[JournalEntry]:
        ids = list(dict.fromkeys(run_ids))
        if not ids:
            return []
        query = sa.select(*_READ_COLUMNS).where(JOURNAL.c.run_id.in_(ids)).order_by(JOURNAL.c.id)
        with self._db.single.connect() as conn:
            return [journal_from_values(row) for row in conn.execute(query)]

    @store_operation("read the journal")
    def journal_outline(self, run_ids: Sequence[str]) -> list[JournalEntry]:
        ids = list(dict.fromkeys(run_ids))
        if not ids:
            return []
        query = sa.select(*_OUTLINE_COLUMNS).where(JOURNAL.c.run_id.in_(ids)).order_by(JOURNAL.c.id)
        with self._db.single.connect() as conn:
            return [outline_from_values(row) for row in conn.execute(query)]

    @store_operation("read a run's lineage")
    def lineage(self, run_id: str) -> list[str]:
        with self._db.single.connect() as conn:
            ids = list(conn.execute(_LINEAGE, {"run_id": run_id}).scalars())
        if not ids:
            raise RunNotFound(f"No run has the id {run_id}.", run_id=run_id)
        return ids


def _copy_rows(run_id: str, now: float, entry_ids: Sequence[int]) -> sa.Insert:
    """INSERT … SELECT: copies of these journal rows into `run_id`, made by the database."""
    source = (
        sa.select(
            sa.literal(run_id, sa.String),
            JOURNAL.c.node_id,
            JOURNAL.c.attempt,
            JOURNAL.c.cache_key,
            JOURNAL.c.components,
            sa.literal(NodeStatus.COMPLETED.value, sa.String),
            sa.literal(now, sa.Float),
            sa.literal(now, sa.Float),
            JOURNAL.c.output_digest,
            JOURNAL.c.idempotency_key,
            sa.literal(0, sa.Integer),
            sa.literal(0, sa.Integer),
            JOURNAL.c.artifacts,
            sa.func.coalesce(JOURNAL.c.cached_from, JOURNAL.c.run_id),
        )
        .where(JOURNAL.c.id.in_(entry_ids))
        .order_by(JOURNAL.c.id)
    )
    return sa.insert(JOURNAL).from_select(_COPY_COLUMNS, source)


def _copy_with_tokens(run_id: str, now: float, entry: JournalEntry) -> dict[str, Any]:
    saved = entry.tokens_in + entry.tokens_out + entry.notes.saved_tokens
    return {
        "run_id": run_id,
        "node_id": entry.node_id,
        "attempt": entry.attempt,
        "cache_key": entry.cache_key,
        "components": stored(entry.components, dataclasses.replace(entry.notes, saved_tokens=saved)),
        "status": NodeStatus.COMPLETED.value,
        "started_at": now,
        "finished_at": now,
        "output_digest": entry.output_digest,
        "error": None,
        "idempotency_key": entry.idempotency_key,
        "tokens_in": 0,
        "tokens_out": 0,
        "artifacts": entry.artifacts,
        "cached_from": entry.cached_from or entry.run_id,
        "invalidated_by": None,
    }
