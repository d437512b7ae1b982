"""Schema migrations, the tables/migration agreement, indexes in use, connection setup."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from contextlib import closing
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from core.errors import ConfigurationError, StoreError
from core.store import database, migration
from core.store.database import run_pragmas, sqlite_pragmas
from core.store.port import StepEntry, Transition
from core.store.records import GateStatus, NodeStatus, RunStatus
from core.store.repository import SqlStore
from core.store.tables import metadata
from tests.factories import create_run

TABLES = {"runs", "journal", "gates", "audit_events", "blobs", "processed_events", "platform_state", "outbox",
          "run_pins", "pruned_runs", "blob_sweep", "concurrency_locks", "subscriptions",
          "alembic_version"}
POSTGRES_ONLY_INDEXES = {"ix_runs_id_prefix", "ix_blobs_digest_prefix", "ix_pruned_runs_id_prefix"}


def _tables(store: SqlStore) -> set[str]:
    return set(sa.inspect(store._engine).get_table_names())


def test_migrate_creates_everything_and_twice_is_a_no_op(database_url: str) -> None:
    with SqlStore(database_url) as store:
        store.migrate()
        assert _tables(store) >= TABLES
        run = create_run(
            store,
            workflow="w",
            platform="console",
            conversation="c",
            thread=None,
            requester="console:a",
            args_digest="d",
        )
        store.migrate()
        with store._engine.connect() as conn:
            assert migration.current_revision(conn) == migration.head_revision() == migration.HEAD_REVISION
            assert conn.execute(sa.text("SELECT count(*) FROM alembic_version")).scalar() == 1
        assert store.runs.get_run(run.id) == run


def test_head_revision_constant_matches_the_migration_files() -> None:
    # HEAD_REVISION lets start-up skip importing alembic; a new migration must update it
    assert migration.head_revision() == migration.HEAD_REVISION


def test_a_database_at_head_is_checked_without_importing_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'baton.db'}"
    with SqlStore(url) as store:
        store.migrate()
        with store._engine.connect() as conn:
            assert migration.at_head(store._engine)
            assert migration.current_revision(conn) == migration.HEAD_REVISION
    probe = (
        "import sys; from core.store.repository import SqlStore\n"
        f"with SqlStore({url!r}) as s: s.migrate()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('alembic', 'procrastinate')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


def test_a_database_behind_head_is_still_upgraded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'baton.db'}"
    with SqlStore(url) as store:
        migration.upgrade(store._engine, "0002")
        assert not migration.at_head(store._engine)
        store.migrate()
        assert migration.at_head(store._engine) and "platform_state" in _tables(store)


def test_a_database_a_newer_baton_migrated_is_refused_in_one_line_and_left_alone(database_url: str) -> None:
    with SqlStore(database_url) as store:
        store.migrate()
        with store._engine.begin() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = '0099_from_a_newer_baton'"))
    with SqlStore(database_url) as store:
        with pytest.raises(ConfigurationError) as refused:
            store.migrate()
        with store._engine.connect() as conn:
            versions = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all()
    assert "schema revision `0099_from_a_newer_baton`" in refused.value.message
    assert "newer Baton" in refused.value.message and refused.value.hint
    assert versions == ["0099_from_a_newer_baton"]


def test_tables_and_migrations_agree(database_url: str) -> None:
    with SqlStore(database_url) as store:
        store.migrate()
        with store._engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
        if store.dialect == "sqlite":  # these exist on PostgreSQL only, by design
            diff = [d for d in diff if not (d[0] == "add_index" and d[1].name in POSTGRES_ONLY_INDEXES)]
        assert diff == []


def _plan(store: SqlStore, sql: str) -> str:
    with store._engine.connect() as conn:
        if store.dialect == "sqlite":
            return " ".join(str(row[-1]) for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"))
        conn.exec_driver_sql("SET enable_seqscan = off")
        escaped = sql.replace("%", "%%")  # psycopg placeholders
        return " ".join(str(row[0]) for row in conn.exec_driver_sql(f"EXPLAIN {escaped}"))


def _seed_runs(store: SqlStore, count: int = 3000) -> None:
    """Enough varied rows (then ANALYZE) that the planner's choice reflects the indexes."""
    from core.store.tables import JOURNAL, RUNS

    statuses = [s.value for s in RunStatus]
    rows = [
        {
            "id": f"{n:012x}",
            "workflow": f"w{n % 10}",
            "platform": "slack",
            "conversation": f"C{n % 30}",
            "thread": f"T{n}",
            "requester": "slack:U1",
            "args_digest": "d",
            "status": statuses[n % len(statuses)],
            "version": 1,
            "created_at": float(n),
            "updated_at": float(n),
            "lease_expires_at": float(n) if statuses[n % len(statuses)] == "running" else None,
        }
        for n in range(count)
    ]
    entries = [
        {
            "run_id": f"{n % count:012x}",
            "node_id": f"n{n}",
            "attempt": 1,
            "cache_key": "k",
            "components": {},
            "status": "completed",
            "started_at": float(n),
            "tokens_in": 0,
            "tokens_out": 0,
            "artifacts": {},
        }
        for n in range(count * 3)
    ]
    with store._engine.begin() as conn:
        conn.execute(sa.insert(RUNS), rows)
        conn.execute(sa.insert(JOURNAL), entries)
        conn.exec_driver_sql("ANALYZE")


def test_lookups_use_indexes(database_url: str) -> None:
    with SqlStore(database_url) as store:
        store.migrate()
        _seed_runs(store)
        prefix = _plan(store, "SELECT * FROM runs WHERE id LIKE 'abc%' AND id >= 'abc' AND id < 'abcg'")
        like_only = _plan(store, "SELECT * FROM runs WHERE id LIKE 'abc%'")
        unfinished = _plan(
            store,
            "SELECT * FROM runs WHERE platform = 'slack' AND conversation = 'C1' AND workflow = 'w1'"
            " AND status IN ('failed', 'paused', 'needs_attention') ORDER BY created_at DESC",
        )
        journal = _plan(
            store, "SELECT * FROM journal WHERE run_id IN ('000000000001', '000000000002') ORDER BY id"
        )
        gates = _plan(
            store,
            "SELECT * FROM gates WHERE platform = 's' AND conversation = 'c' AND thread = 't'"
            " AND status = 'waiting'",
        )
        lease = _plan(store, "SELECT * FROM runs WHERE status = 'running' AND lease_expires_at < 5")
        recent = _plan(
            store,
            "SELECT * FROM runs WHERE platform = 'slack' AND conversation = 'C1'"
            " ORDER BY created_at DESC LIMIT 20",
        )
    if store.dialect == "sqlite":
        assert "USING INDEX sqlite_autoindex_runs_1 (id>? AND id<?)" in prefix
        # on this small seed the planner may walk the conversation's newest runs instead
        # (with a million runs of history it picks ix_runs_unfinished; bench/FINDINGS.md)
        assert "USING INDEX ix_runs_unfinished" in unfinished or "USING INDEX ix_runs_recent" in unfinished
        assert "USING INDEX ix_runs_recent" in recent and "TEMP B-TREE" not in recent
        assert "USING INDEX ix_journal_run" in journal
        assert "USING INDEX ix_gates_where" in gates
        assert "USING INDEX ix_runs_lease" in lease
    else:
        assert "Seq Scan" not in prefix + like_only
        assert "ix_runs_id_prefix" in like_only or "runs_pkey" in like_only
        assert "ix_runs_unfinished" in unfinished
        assert "Seq Scan" not in recent
        assert "ix_journal_run" in journal
        assert "ix_gates_where" in gates
        assert "ix_runs_lease" in lease


def test_postgres_prefix_index_uses_text_pattern_ops(postgres_url: str) -> None:
    with SqlStore(postgres_url) as store:
        store.migrate()
        with store._engine.connect() as conn:
            definition = conn.execute(
                sa.text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_runs_id_prefix'")
            ).scalar()
    assert definition is not None and "text_pattern_ops" in definition


def test_connections_opening_a_new_sqlite_file_together_all_switch_it_to_wal(tmp_path: Path) -> None:
    """Eight connections opening a new file at once all switch it to WAL; SQLite refuses some
    of them "database is locked" at once, busy timeout or not (its deadlock avoidance), which
    failed three of eight processes racing to migrate in CI. `run_pragmas` (what the engine,
    the hot path and the checkpointer run on each new connection) retries: all open. Without
    the retry about one round in sixteen failed here."""
    failures: list[BaseException] = []
    for round_ in range(100):
        path = tmp_path / f"r{round_}.db"
        barrier = threading.Barrier(8)

        def connect(path: Path = path, barrier: threading.Barrier = barrier) -> None:
            barrier.wait(30)
            try:
                with closing(sqlite3.connect(path, isolation_level=None)) as conn:
                    run_pragmas(conn, sqlite_pragmas("NORMAL"))
                    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            except BaseException as exc:  # collected, asserted below
                failures.append(exc)

        threads = [threading.Thread(target=connect) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert failures == []


def test_the_engine_opens_its_connections_with_the_retrying_pragmas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[list[str]] = []
    real = database.run_pragmas

    def recorded(cursor: object, pragmas: list[str]) -> None:
        opened.append(list(pragmas))
        real(cursor, pragmas)

    monkeypatch.setattr(database, "run_pragmas", recorded)
    with SqlStore(f"sqlite:///{tmp_path / 'baton.db'}") as store:
        store.migrate()
    assert opened and all(database.WAL_PRAGMA in pragmas for pragmas in opened)


@pytest.mark.parametrize("synchronous", ["NORMAL", "FULL"])
def test_sqlite_connection_setup(tmp_path: Path, synchronous: str) -> None:
    path = tmp_path / "nested" / "dir" / "baton.db"  # the parent is created
    with SqlStore(f"sqlite:///{path}", sqlite_synchronous=synchronous) as store:  # type: ignore[arg-type]
        store.migrate()
        with store._engine.connect() as conn:
            pragma = {
                name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
                for name in ("journal_mode", "busy_timeout", "synchronous", "foreign_keys")
            }
        run = create_run(
            store,
            workflow="w",
            platform="console",
            conversation="c",
            thread=None,
            requester="console:a",
            args_digest="d",
        )
        store.steps.journal_finish(
            store.steps.journal_start(StepEntry(
                run_id=run.id, node_id="n", cache_key="k", components={}, attempt=1, idempotency_key=None
            )),
            status=NodeStatus.COMPLETED,
        )
    assert pragma == {
        "journal_mode": "wal",
        "busy_timeout": 10_000,
        "synchronous": {"NORMAL": 1, "FULL": 2}[synchronous],
        "foreign_keys": 1,
    }
    with closing(sqlite3.connect(path)) as raw:  # the hot path's commits are visible to anyone
        assert raw.execute("SELECT status FROM journal").fetchone() == ("completed",)


def test_in_memory_sqlite_shares_one_database() -> None:
    with SqlStore("sqlite://") as store:
        store.migrate()
        run = create_run(
            store,
            workflow="w",
            platform="console",
            conversation="c",
            thread=None,
            requester="console:a",
            args_digest="d",
        )
        store.runs.transition(Transition(run.id, RunStatus.RUNNING, actor="console:a"))
        entry_id = store.steps.journal_start(StepEntry(
            run_id=run.id, node_id="n", cache_key="k", components={"x": 1}, attempt=1, idempotency_key=None
        ))
        store.steps.journal_finish(
            entry_id, status=NodeStatus.COMPLETED, output_digest=store.blobs.put_blob(b"out")
        )
        (entry,) = store.steps.journal([run.id])
        assert (
            entry.status, store.blobs.get_blob(entry.output_digest or "")
        ) == (NodeStatus.COMPLETED, b"out")
        with pytest.raises(StoreError):  # foreign key: no such run; the shared connection rolls back
            store.steps.journal_start(StepEntry(
                run_id="000000000000",
                node_id="n",
                cache_key="k",
                components={},
                attempt=1,
                idempotency_key=None,
            ))
        assert store.blobs.get_blob(store.blobs.put_blob(b"still fine")) == b"still fine"


def test_unreachable_postgres_is_a_one_line_store_error() -> None:
    with SqlStore("postgresql://postgres@127.0.0.1:1/nowhere") as store:
        for call in (lambda: store.runs.get_run("abc"), lambda: store.blobs.put_blob(b"x"), store.migrate):
            with pytest.raises(StoreError) as info:
                call()
            assert info.value.message.startswith("The run store could not ")
            assert "\n" not in info.value.message
            assert info.value.hint == StoreError.hint


def test_alembic_command_line_uses_the_ini_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    repo = Path(__file__).resolve().parents[3]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "alembic",
            "-c",
            str(repo / "alembic.ini"),
            "-x",
            f"url={url}",
            "upgrade",
            "head",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    with SqlStore(url) as store:
        with store._engine.connect() as conn:
            assert migration.current_revision(conn) == migration.HEAD_REVISION
        store.migrate()
        assert _tables(store) >= TABLES


def test_gates_opened_before_0002_keep_their_decision_and_have_no_key(database_url: str) -> None:
    with SqlStore(database_url) as store:
        migration.upgrade(store._engine, "0001")
        with store._engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO runs (id, workflow, platform, conversation, requester, args_digest, status,"
                    " version, created_at, updated_at) VALUES ('000000000009', 'w', 'console', 'c',"
                    " 'console:a', 'd', 'paused', 2, 1.0, 1.0)"
                )
            )
            conn.execute(
                sa.text(
                    "INSERT INTO gates (run_id, node_id, prompt, status, created_at, platform, conversation,"
                    " decided_by) VALUES ('000000000009', 'review', 'ok?', 'approved', 1.0, 'console', 'c',"
                    " 'console:bo')"
                )
            )
        store.migrate()
        gate = store.gates.get_gate("000000000009", "review")
        assert (gate.cache_key, gate.status, gate.decided_by) == ("", GateStatus.APPROVED, "console:bo")
        assert store.gates.open_gate("000000000009", "review", "ok?") == gate  # no key given: as it is


def test_0010_deletes_the_page_signing_key_kept_in_the_database_and_nothing_else(database_url: str) -> None:
    # earlier versions kept the run pages' signing key in `platform_state`, where a step
    # reading the database file could find it and sign links as anyone
    with SqlStore(database_url) as store:
        migration.upgrade(store._engine, "0009")
        with store._engine.begin() as conn:
            for platform, key in (("baton", "web_signing_key"), ("slack", "progress:1"), ("baton", "other")):
                insert = "INSERT INTO platform_state (platform, key, value, at) VALUES (:p, :k, 'v', 1.0)"
                conn.execute(sa.text(insert), {"p": platform, "k": key})
        store.migrate()
        assert store.state.get_state("baton", "web_signing_key") is None
        assert (
            store.state.get_state("slack", "progress:1"), store.state.get_state("baton", "other")
        ) == ("v", "v")
