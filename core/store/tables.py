"""The tables of the run store: SQLAlchemy Core `Table`s. They never leave `core/store/`.

The repository reads and writes them through SQLAlchemy Core (`RUNS`, `JOURNAL`, ...) and
converts rows to the frozen records of `records.py`. They were SQLModel classes, used only
for their `__table__`; declaring them as SQLModel made every start import sqlmodel, the
SQLAlchemy ORM and build seven pydantic models (≈ 0.2 s of a cold start, issue 18).
The alembic revisions (`migrations/versions/`: `0001_initial.py`, `0002_gate_cache_key.py`,
`0003_platform_state.py`, `0004_event_handling.py`, `0005_origin_event_partial_index.py`,
`0006_runs_args_digest_index.py`, `0007_runs_conversation_recent_index.py`,
`0008_gate_votes_deadlines.py`, `0009_outbox.py`, `0010_retention.py`, `0012_queue.py`,
`0013_notify.py`, `0014_schedules.py`; `0011_signing_key_row.py` only deletes a row)
create exactly this schema; `tests/integration/store/test_migrations.py` checks they agree.

Statuses are stored as short strings (the `StrEnum` values), timestamps as float
epoch seconds, JSON documents with the portable `JSON` type.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

#: Every Baton table; alembic compares against it.
metadata = sa.MetaData()


def _text(name: str, length: int | None = None, **kw: Any) -> sa.Column[Any]:
    return sa.Column(name, sa.String(length), **kw)


def _json(name: str) -> sa.Column[Any]:
    return sa.Column(name, sa.JSON, nullable=False)


def _float(name: str, *, nullable: bool) -> sa.Column[Any]:
    return sa.Column(name, sa.Float, nullable=nullable)


RUNS = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.String(12), primary_key=True),
    _text("workflow", nullable=False),
    _text("platform", nullable=False),
    _text("conversation", nullable=False),
    _text("thread", nullable=True),
    _text("requester", nullable=False),
    _text("args_digest", nullable=False),
    _text("status", nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    _float("created_at", nullable=False),
    _float("updated_at", nullable=False),
    _text("resumed_from", 12, nullable=True),
    _text("lease_owner", nullable=True),
    _float("lease_expires_at", nullable=True),
    _text("status_by", nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    # "<platform>:<event_id>" of the chat command that started the run (revision 0004)
    _text("origin_event", nullable=True),
    # how a run nobody typed was started (`schedule:<id>`) and the fire's due time (revision 0014_schedules)
    _text("started_by", nullable=True),
    _float("scheduled_for", nullable=True),
    # its concurrency key and policy (`Concurrency`), when it joined the key's queue (revision 0012)
    _text("concurrency_key", nullable=True),
    sa.Column("concurrency", sa.JSON, nullable=True),
    _float("queued_at", nullable=True),
    # the run and step whose `workflow:` started it (revision 0015_subruns)
    _text("parent_run", 12, nullable=True),
    _text("parent_node", nullable=True),
    _text("parent_key", nullable=True),
    # the fresh-run prompt: unfinished runs of a workflow in a conversation, newest first
    sa.Index("ix_runs_unfinished", "platform", "conversation", "workflow", "status", "created_at"),
    sa.Index("ix_runs_thread", "platform", "conversation", "thread"),
    # `runs`: a conversation's newest runs, without sorting all of them (revision 0007)
    sa.Index("ix_runs_recent", "platform", "conversation", "created_at"),
    sa.Index("ix_runs_created", "created_at"),
    # `--args @handle`: the runs whose args digest starts with a prefix (revision 0006)
    sa.Index("ix_runs_args_digest", "args_digest"),
    # a schedule's overlap rule: its runs still active (revision 0014_schedules)
    sa.Index("ix_runs_started_by", "started_by", "status"),
    # a run's sub-runs (revision 0015_subruns); only runs a `workflow:` step started: most
    # have none, and SQLite's planner scanned the table for `parent_run IN (…)` with a full
    # index (revision 0016_runs_parent_partial)
    sa.Index("ix_runs_parent", "parent_run", "parent_node", sqlite_where=sa.text("parent_run IS NOT NULL")),
    # admission: a key's active and queued runs (revision 0012)
    sa.Index("ix_runs_concurrency", "concurrency_key", "status", "queued_at"),
    # lease recovery: running runs whose lease lapsed
    sa.Index("ix_runs_lease", "status", "lease_expires_at"),
    # a redelivered `run` command finds the run its first delivery started (revision 0004);
    # only runs chat commands started: most have none, and SQLite's planner, told so by
    # ANALYZE, scanned the table instead of using a full index (revision 0005)
    # (its PostgreSQL `WHERE`: `postgresql_options`)
    sa.Index("ix_runs_origin_event", "origin_event", sqlite_where=sa.text("origin_event IS NOT NULL")),
    # retention: "was any run resumed from this one?" (revision 0010_retention); few runs have one
    sa.Index("ix_runs_resumed_from", "resumed_from", sqlite_where=sa.text("resumed_from IS NOT NULL")),
    # `LIKE 'abc%'` prefix lookups; SQLite uses the primary key with a range instead
    sa.Index("ix_runs_id_prefix", "id").ddl_if(dialect="postgresql"),
)

JOURNAL = sa.Table(
    "journal",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(12), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    _text("node_id", nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    _text("cache_key", nullable=False),
    _json("components"),
    _text("status", nullable=False),
    _float("started_at", nullable=False),
    _float("finished_at", nullable=True),
    _text("output_digest", nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    _text("idempotency_key", nullable=True),
    sa.Column("tokens_in", sa.Integer, nullable=False),
    sa.Column("tokens_out", sa.Integer, nullable=False),
    _json("artifacts"),
    _text("cached_from", 12, nullable=True),
    _text("invalidated_by", nullable=True),
    sa.Index("ix_journal_run", "run_id", "id"),
    # the blob sweep: is a digest still some step's output? (revision 0010_retention)
    sa.Index("ix_journal_output", "output_digest"),
)

#: An approval gate. Platform, conversation and thread are copied from the run (and kept in
#: step by `set_thread`) so that waiting gates are found with one index.
GATES = sa.Table(
    "gates",
    metadata,
    sa.Column("run_id", sa.String(12), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("node_id", sa.String(), primary_key=True),
    sa.Column("prompt", sa.Text, nullable=False),
    _text("status", nullable=False),
    _float("created_at", nullable=False),
    _text("platform", nullable=False),
    _text("conversation", nullable=False),
    _text("thread", nullable=True),
    _text("decided_by", nullable=True),
    sa.Column("comment", sa.Text, nullable=True),
    _float("decided_at", nullable=True),
    # the approval node's cache key the decision answers (revision 0002); "" for older gates
    sa.Column("cache_key", sa.String(), nullable=False, server_default=""),
    # the choice decided and what it carries (values, approvers): revision 0008
    _text("decision", nullable=True),
    sa.Column("outcome", sa.JSON, nullable=True),
    sa.Index("ix_gates_where", "platform", "conversation", "thread", "status"),
)

#: One person's ballot on one opening of a gate (revision 0008). The primary key is the
#: compare-and-swap: a second identical ballot inserts nothing, so it counts once.
GATE_VOTES = sa.Table(
    "gate_votes",
    metadata,
    sa.Column("run_id", sa.String(12), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("node_id", sa.String(), primary_key=True),
    sa.Column("opened_at", sa.Float, primary_key=True),
    sa.Column("user", sa.String(), primary_key=True),
    sa.Column("ballot", sa.String(8), primary_key=True),  # vote | reject
    _text("choice", nullable=False),
    _float("at", nullable=False),
    sa.Column("comment", sa.Text, nullable=False),
    _json("vals"),
)

#: A durable deadline of one opening of a gate (revision 0008): reminders, escalation,
#: timeout. Firing is a compare-and-swap on `fired_at IS NULL`, so one replica fires it.
GATE_DEADLINES = sa.Table(
    "gate_deadlines",
    metadata,
    sa.Column("run_id", sa.String(12), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("node_id", sa.String(), primary_key=True),
    sa.Column("opened_at", sa.Float, primary_key=True),
    sa.Column("name", sa.String(16), primary_key=True),
    _float("due_at", nullable=False),
    _float("fired_at", nullable=True),
    _text("fired_by", nullable=True),
    sa.Index("ix_gate_deadlines_due", "fired_at", "due_at"),
)

AUDIT = sa.Table(
    "audit_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    _float("at", nullable=False),
    _text("actor", nullable=False),
    _text("action", nullable=False),
    _text("run_id", 12, nullable=True),
    _json("details"),
    sa.Index("ix_audit_run", "run_id", "id"),
)

#: Content-addressed bytes: args documents, node outputs, artifacts.
BLOBS = sa.Table(
    "blobs",
    metadata,
    sa.Column("digest", sa.String(), primary_key=True),
    sa.Column("data", sa.LargeBinary, nullable=False),
    sa.Column("size", sa.Integer, nullable=False),
    sa.Index("ix_blobs_digest_prefix", "digest").ddl_if(dialect="postgresql"),
)

#: Incoming platform event ids claimed (Slack retries, Discord redeliveries). `done` is false
#: while the claimer handles it; a claim not done after a while may be re-claimed.
PROCESSED_EVENTS = sa.Table(
    "processed_events",
    metadata,
    sa.Column("platform", sa.String(), primary_key=True),
    sa.Column("event_id", sa.String(), primary_key=True),
    _float("at", nullable=False),
    # revision 0004; rows from before it were handled
    sa.Column("done", sa.Boolean, nullable=False, server_default=sa.true()),
    # the message itself, recorded before the platform was acknowledged (revision 0010_retention):
    # a claim its process never finished is handled after a restart from it
    sa.Column("payload", sa.JSON(none_as_null=True), nullable=True),
    sa.Index("ix_processed_events_open", "done", "at"),
)

#: Small values a chat adapter keeps across restarts (a progress message id, …).
PLATFORM_STATE = sa.Table(
    "platform_state",
    metadata,
    sa.Column("platform", sa.String(), primary_key=True),
    sa.Column("key", sa.String(), primary_key=True),
    sa.Column("value", sa.Text(), nullable=False),
    _float("at", nullable=False),
)

#: State-carrying replies (revision 0009): written in the unit of work that changes the run's
#: state, delivered at least once by whichever replica claims the row (a lease: `claimed_by`,
#: `lease_expires_at`), retried at `due_at`; delivered rows are pruned by housekeeping.
OUTBOX = sa.Table(
    "outbox",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(12), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    _text("kind", 32, nullable=False),
    _text("platform", nullable=False),
    _text("conversation", nullable=False),
    _text("thread", nullable=True),
    _json("payload"),
    _float("created_at", nullable=False),
    _float("due_at", nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    _text("claimed_by", nullable=True),
    _float("lease_expires_at", nullable=True),
    _float("delivered_at", nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    # revision 0010: a notice's key, once per (place, run, event); NULL for a run's own replies
    _text("dedupe", nullable=True),
    # what is due: undelivered rows by due time (delivered rows keep a time, so they sort apart)
    sa.Index("ix_outbox_due", "delivered_at", "due_at"),
    # one run's rows in order: a row waits for the run's older undelivered ones
    sa.Index("ix_outbox_run", "run_id", "id"),
    sa.Index("ux_outbox_dedupe", "dedupe", unique=True),
)

#: Conversations subscribed to a workflow's events (revision 0010): one row per place,
#: workflow (`*`: every one) and event; `created_by` is whose right to view the runs it rests on.
SUBSCRIPTIONS = sa.Table(
    "subscriptions",
    metadata,
    sa.Column("platform", sa.String(), primary_key=True),
    sa.Column("conversation", sa.String(), primary_key=True),
    sa.Column("workflow", sa.String(), primary_key=True),
    sa.Column("event", sa.String(32), primary_key=True),
    _text("created_by", nullable=False),
    _float("created_at", nullable=False),
    sa.Index("ix_subscriptions_workflow", "workflow", "event"),
)


#: Runs exempt from pruning (`pin <run>`; revision 0010_retention).
RUN_PINS = sa.Table(
    "run_pins",
    metadata,
    sa.Column("run_id", sa.String(12), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    _text("pinned_by", nullable=False),
    _float("at", nullable=False),
)

#: What is left of a pruned run (revision 0010_retention): an old button or link to it answers
#: "pruned on …" instead of "no such run".
PRUNED_RUNS = sa.Table(
    "pruned_runs",
    metadata,
    sa.Column("id", sa.String(12), primary_key=True),
    _text("workflow", nullable=False),
    _text("status", nullable=False),
    _float("pruned_at", nullable=False),
    sa.Index("ix_pruned_runs_id_prefix", "id").ddl_if(dialect="postgresql"),
)

#: Blobs a pruned run referenced (revision 0010_retention): the sweep's candidates. A candidate
#: still unreferenced `grace` seconds after it was marked is deleted; one referenced again
#: (a new run with the same args) is unmarked.
BLOB_SWEEP = sa.Table(
    "blob_sweep",
    metadata,
    sa.Column("digest", sa.String(), primary_key=True),
    _float("marked_at", nullable=False),
    # it was an artifact: only then is the journal's `artifacts` (unindexed JSON) looked through
    sa.Column("artifact", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Index("ix_blob_sweep_marked", "marked_at"),
)

#: Schedules (revision 0014_schedules): a workflow's `schedules:` (synced from the catalog) and those
#: added in chat. Every change is a compare-and-swap on `version`.
SCHEDULES = sa.Table(
    "schedules",
    metadata,
    sa.Column("id", sa.String(), primary_key=True),
    _text("workflow", nullable=False),
    _text("source", 8, nullable=False),
    _text("cron", nullable=True),
    _float("every", nullable=True),
    _text("timezone", nullable=False),
    _json("args"),
    _text("overlap", 16, nullable=False),
    _text("catchup", 8, nullable=False),
    _float("catchup_window", nullable=False),
    _text("platform", nullable=False),
    _text("conversation", nullable=False),
    _text("principal", nullable=False),
    _text("owner", nullable=True),
    _float("created_at", nullable=False),
    _float("updated_at", nullable=False),
    _float("evaluated_until", nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("paused", sa.Boolean, nullable=False),
    sa.Column("note", sa.Text, nullable=True),
    _text("paused_by", nullable=True),
)

#: What became of each due time of a schedule (revision 0014_schedules). The primary key (schedule,
#: due time) is the exactly-once rule: the fire's row is inserted in the unit of work that
#: creates its run, so of replicas racing, one inserts it and starts the run.
SCHEDULE_FIRES = sa.Table(
    "schedule_fires",
    metadata,
    sa.Column("schedule_id", sa.String(), primary_key=True),
    sa.Column("due_at", sa.Float, primary_key=True),
    _text("outcome", 16, nullable=False),
    _float("at", nullable=False),
    _text("by", nullable=False),
    _text("run_id", 12, nullable=True),
    _json("detail"),
    # `schedule show`: a schedule's latest fires
    sa.Index("ix_schedule_fires_recent", "schedule_id", "at"),
)


def postgresql_options() -> None:
    """Give the indexes their PostgreSQL-only options (a partial index's `WHERE`, the
    `text_pattern_ops` of the prefix indexes). Naming a dialect's options loads that dialect's
    whole package (all its drivers); a process on SQLite never needs them, so they are set only
    when a PostgreSQL engine is opened (`database.open_engine`). Idempotent."""
    options: dict[str, dict[str, Any]] = {
        "ix_runs_origin_event": {"where": sa.text("origin_event IS NOT NULL")},
        "ix_runs_resumed_from": {"where": sa.text("resumed_from IS NOT NULL")},
        "ix_runs_parent": {"where": sa.text("parent_run IS NOT NULL")},
        "ix_runs_id_prefix": {"ops": {"id": "text_pattern_ops"}},
        "ix_blobs_digest_prefix": {"ops": {"digest": "text_pattern_ops"}},
        "ix_pruned_runs_id_prefix": {"ops": {"id": "text_pattern_ops"}},
    }
    for table in (RUNS, BLOBS, PRUNED_RUNS):
        for index in table.indexes:
            for key, value in options.get(str(index.name), {}).items():
                index.dialect_options["postgresql"][key] = value

#: one row per concurrency key: what a unit of work admitting runs of the key locks first
#: (on PostgreSQL, an upsert taking its row lock), so two replicas never admit past the limit
#: (revision 0012)
CONCURRENCY_LOCKS = sa.Table(
    "concurrency_locks",
    metadata,
    sa.Column("key", sa.String(), primary_key=True),
    _float("touched_at", nullable=False),
)
