"""Sub-runs (`workflow:` steps): a child run names its parent run, step and the step's key
(revision 0015_subruns); `child_runs` lists a lineage's children newest first; `adopt_child`
hands a child of an earlier run of the lineage to the run that resumed it."""

from __future__ import annotations

import pytest

from core.errors import RunNotFound
from core.store.port import Store
from core.store.records import RunStatus
from tests.factories import create_run
from tests.integration.store.conftest import Clock


def test_a_child_records_its_parent_step_and_key(store: Store) -> None:
    parent = create_run(store, workflow="p", platform="console", conversation="c", thread="t",
                        requester="console:ana", args_digest="d")  # fmt: skip
    child = create_run(store, workflow="c", platform="console", conversation="c", thread="t",
                       requester="console:ana", args_digest="d", started_by=f"parent:{parent.id}",
                       parent_run=parent.id, parent_node="notes[2]", parent_key="k1")  # fmt: skip
    read = store.runs.get_run(child.id)
    assert read == child
    assert (read.parent_run, read.parent_node, read.parent_key) == (parent.id, "notes[2]", "k1")
    assert read.started_by == f"parent:{parent.id}"
    assert store.runs.get_run(parent.id).parent_run is None


def test_child_runs_lists_the_children_of_the_runs_asked_newest_first(store: Store, clock: Clock) -> None:
    one = create_run(store, workflow="p", platform="console", conversation="c", thread=None,
                     requester="u", args_digest="d")  # fmt: skip
    two = create_run(store, workflow="p", platform="console", conversation="c", thread=None,
                     requester="u", args_digest="d", resumed_from=one.id)  # fmt: skip
    other = create_run(store, workflow="p", platform="console", conversation="c", thread=None,
                       requester="u", args_digest="d")  # fmt: skip
    made = []
    for parent, node in ((one, "a"), (two, "a"), (two, "b"), (other, "a")):
        clock.advance(1)
        made.append(create_run(store, workflow="c", platform="console", conversation="c", thread=None,
                               requester="u", args_digest="d", parent_run=parent.id,
                               parent_node=node, parent_key=node))  # fmt: skip
    assert [r.id for r in store.runs.child_runs([two.id])] == [made[2].id, made[1].id]
    assert [r.id for r in store.runs.child_runs([two.id, one.id])] == [made[2].id, made[1].id, made[0].id]
    assert store.runs.child_runs([]) == []
    assert store.runs.child_runs(["000000000000"]) == []


def test_adopt_child_moves_it_to_the_resuming_run_and_keeps_its_version(store: Store) -> None:
    old = create_run(store, workflow="p", platform="console", conversation="c", thread=None,
                     requester="u", args_digest="d")  # fmt: skip
    new = create_run(store, workflow="p", platform="console", conversation="c", thread=None,
                     requester="u", args_digest="d", resumed_from=old.id)  # fmt: skip
    child = create_run(store, workflow="c", platform="console", conversation="c", thread=None,
                       requester="u", args_digest="d", parent_run=old.id, parent_node="n",
                       parent_key="k", status=RunStatus.RUNNING)  # fmt: skip
    adopted = store.runs.adopt_child(child.id, new.id)
    assert adopted.parent_run == new.id and adopted.version == child.version
    assert adopted.parent_node == "n" and adopted.parent_key == "k"
    assert store.runs.get_run(child.id) == adopted
    assert [r.id for r in store.runs.child_runs([new.id])] == [child.id]
    assert store.runs.child_runs([old.id]) == []
    with pytest.raises(RunNotFound):
        store.runs.adopt_child("000000000000", new.id)


def test_paused_parents_lists_only_paused_runs_that_started_children(store: Store, clock: Clock) -> None:
    def run(status: RunStatus, parent: str | None = None) -> str:
        clock.advance(1)
        return create_run(store, workflow="p", platform="console", conversation="c", thread=None,
                          requester="u", args_digest="d", status=status, parent_run=parent,
                          parent_node="n" if parent else None, parent_key="k" if parent else None).id

    waiting = run(RunStatus.PAUSED)
    run(RunStatus.COMPLETED, parent=waiting)
    running = run(RunStatus.RUNNING)
    run(RunStatus.COMPLETED, parent=running)
    at_gate = run(RunStatus.PAUSED)  # paused with no child: a gate of its own, not ours to wake
    later = run(RunStatus.PAUSED)
    run(RunStatus.PAUSED, parent=later)
    run(RunStatus.FAILED, parent=later)
    assert [r.id for r in store.runs.paused_parents()] == [waiting, later]
    assert [r.id for r in store.runs.paused_parents(limit=1)] == [waiting]
    assert at_gate not in {r.id for r in store.runs.paused_parents()}


def test_child_runs_searches_the_parent_index_where_most_runs_have_no_parent(
    migrated_sqlite_url: str, clock: Clock
) -> None:
    """SQLite's statistics counted every run without a parent as one value of a full index;
    with them its planner scanned the whole table for `parent_run IN (…)` (`status` of a run,
    1,000,000 runs of history: 334 ms). ix_runs_parent holds only runs with a parent (revision
    0016_runs_parent_partial): the plain select `child_runs` sends searches it, and so does
    `paused_parents`' search for a run's children."""
    import sqlalchemy as sa

    from core.store.repository import SqlStore

    with SqlStore(migrated_sqlite_url, clock=clock) as store:
        store.migrate()
        runs = [create_run(store, workflow="p", platform="console", conversation="c", thread=None,
                           requester="u", args_digest="d") for _ in range(40)]  # fmt: skip
        child = create_run(store, workflow="c", platform="console", conversation="c", thread=None,
                           requester="u", args_digest="d", parent_run=runs[0].id,
                           parent_node="a")  # fmt: skip
        sent: list[tuple[str, object]] = []
        engine = store._engine  # the statement as sent, to ask SQLite its plan
        with engine.connect() as conn:
            conn.execute(sa.text("ANALYZE"))
            conn.commit()

        def record(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
            if "parent_run IN" in statement or "child.parent_run" in statement:
                sent.append((statement, parameters))

        sa.event.listen(engine, "before_cursor_execute", record)
        try:
            assert [r.id for r in store.runs.child_runs([runs[0].id, runs[1].id])] == [child.id]
            assert store.runs.paused_parents() == []
        finally:
            sa.event.remove(engine, "before_cursor_execute", record)
        assert len(sent) == 2, sent
        for statement, parameters in sent:
            assert "INDEXED BY" not in statement  # the planner's own choice
            with engine.connect() as conn:
                rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)  # type: ignore[arg-type]
                plan = " ".join(str(row[-1]) for row in rows)
            assert "INDEX ix_runs_parent" in plan, plan
