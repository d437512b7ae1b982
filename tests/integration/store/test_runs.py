"""Runs: creation, lookup by id and prefix, the unfinished runs a `run` command reads, threads."""

from __future__ import annotations

import pytest

from core.commands.hints import hint
from core.errors import AmbiguousRunId, RunNotFound
from core.store.port import Store, Transition
from core.store.records import RunStatus
from tests.factories import create_run
from tests.integration.store.conftest import Clock, MakeRun


def test_create_run_returns_what_get_run_reads(store: Store) -> None:
    digest = store.blobs.put_blob(b'{"message":"A"}')
    created = create_run(
        store,
        workflow="release-notes",
        platform="slack",
        conversation="C1",
        thread="1700000000.0001",
        requester="slack:U1",
        args_digest=digest,
    )
    assert len(created.id) == 12 and int(created.id, 16) >= 0
    assert created.status is RunStatus.PENDING and created.version == 1
    assert created.status_by == "slack:U1" and created.lease_owner is None
    assert created.handle == f"args:{digest[:8]}"
    assert store.runs.get_run(created.id) == created


def test_create_run_running_takes_a_lease(store: Store, clock: Clock) -> None:
    run = create_run(
        store,
        workflow="w",
        platform="console",
        conversation="local",
        thread=None,
        requester="console:ana",
        args_digest="d",
        status=RunStatus.RUNNING,
        lease_owner="host:1:a",
        lease_seconds=30,
        resumed_from=None,
    )
    assert run.lease_owner == "host:1:a"
    assert run.lease_expires_at == pytest.approx(clock.now + 30, abs=0.01)
    assert store.runs.get_run(run.id) == run


def test_get_run_unknown_raises_run_not_found(store: Store) -> None:
    with pytest.raises(RunNotFound) as info:
        store.runs.get_run("000000000000")
    assert info.value.message == "No run has the id 000000000000."
    assert "/workflow runs" in hint(info.value)


def test_find_run_by_exact_id_and_unique_prefix(store: Store, make_run: MakeRun) -> None:
    runs = [make_run() for _ in range(6)]
    for run in runs:
        assert store.runs.find_run(run.id) == run
        assert store.runs.find_run(run.id.upper()) == run
        # the shortest prefix that no other run shares
        length = next(n for n in range(1, 13) if sum(r.id.startswith(run.id[:n]) for r in runs) == 1)
        assert store.runs.find_run(run.id[:length]) == run


def test_find_run_ambiguous_prefix_lists_candidates(store: Store, make_run: MakeRun) -> None:
    runs = [make_run() for _ in range(17)]  # 17 ids, 16 hex digits: two share a first digit
    first = next(c for c in "0123456789abcdef" if sum(r.id.startswith(c) for r in runs) >= 2)
    sharing = [r.id for r in runs if r.id.startswith(first)]
    with pytest.raises(AmbiguousRunId) as info:
        store.runs.find_run(first)
    assert info.value.message.startswith(f"Run id {first} matches several runs: ")
    listed = [part for part in info.value.message.split(": ", 1)[1].rstrip(".").split(", ") if part != "…"]
    # at most five, the newest (17 random ids may well give one first digit six of them)
    assert set(listed) <= set(sharing) and len(listed) == min(len(sharing), 5), (listed, sharing)
    assert info.value.message.endswith(", ….") == (len(sharing) > 5)
    assert info.value.hint == "Type more characters of the run id."


def test_find_run_without_match_raises_run_not_found(store: Store, make_run: MakeRun) -> None:
    runs = [make_run() for _ in range(5)]
    unused = next(f"{n:02x}" for n in range(256) if not any(r.id.startswith(f"{n:02x}") for r in runs))
    for text in (unused, "", "not-hex", "%", "_", runs[0].id + "0"):
        with pytest.raises(RunNotFound):
            store.runs.find_run(text)


def test_unfinished_runs_are_newest_first_and_scoped(store: Store, make_run: MakeRun) -> None:
    failed = make_run(RunStatus.FAILED)
    paused = make_run(RunStatus.PAUSED)
    attention = make_run(RunStatus.NEEDS_ATTENTION)
    for status in (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.COMPLETED, RunStatus.CANCELLED):
        make_run(status)
    make_run(RunStatus.FAILED, workflow="other")
    make_run(RunStatus.FAILED, conversation="C2")
    make_run(RunStatus.FAILED, platform="discord")

    _, found = store.views.command_runs("slack:none", "release-notes", "slack", "C1")
    assert [r.id for r in found] == [attention.id, paused.id, failed.id]


def test_abandoning_removes_a_run_from_the_unfinished_list(store: Store, make_run: MakeRun) -> None:
    failed = make_run(RunStatus.FAILED)
    store.runs.transition(Transition(failed.id, RunStatus.CANCELLED, actor="slack:U1"))
    assert store.views.command_runs("slack:none", "release-notes", "slack", "C1") == (None, [])


def test_recent_runs_filters_and_limits(store: Store, make_run: MakeRun) -> None:
    first = make_run()
    second = make_run(conversation="C2")
    third = make_run(platform="discord")
    assert [r.id for r in store.runs.recent_runs()] == [third.id, second.id, first.id]
    assert [r.id for r in store.runs.recent_runs(limit=2)] == [third.id, second.id]
    assert [r.id for r in store.runs.recent_runs(platform="slack")] == [second.id, first.id]
    assert [r.id for r in store.runs.recent_runs(platform="slack", conversation="C1")] == [first.id]


def test_recent_runs_of_a_workflow_or_status_are_filtered_before_the_limit(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    wanted = make_run(RunStatus.FAILED, workflow="deploy")
    for _ in range(3):  # newer runs of another workflow fill the page
        clock.advance(1)
        make_run(RunStatus.COMPLETED)
    assert [r.id for r in store.runs.recent_runs(workflow="deploy", limit=2)] == [wanted.id]
    assert [r.id for r in store.runs.recent_runs(status="failed", limit=2)] == [wanted.id]
    assert store.runs.recent_runs(workflow="deploy", status="completed") == []


def test_set_thread_and_runs_in_thread(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.RUNNING)
    other = make_run(thread="T9")
    updated = store.runs.set_thread(run.id, "T1")
    assert updated.thread == "T1" and updated.version == run.version
    assert [r.id for r in store.runs.runs_in_thread("slack", "C1", "T1")] == [run.id]
    assert [r.id for r in store.runs.runs_in_thread("slack", "C1", "T9")] == [other.id]
    assert store.runs.runs_in_thread("slack", "C2", "T1") == []
    with pytest.raises(RunNotFound):
        store.runs.set_thread("000000000000", "T1")


def test_recent_runs_of_one_requester_across_conversations(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    mine = make_run(requester="slack:U1")
    clock.advance(1)
    make_run(requester="slack:U2")
    clock.advance(1)
    also_mine = make_run(requester="slack:U1", conversation="C2")

    mine_first = store.runs.recent_runs(platform="slack", requester="slack:U1")
    assert [r.id for r in mine_first] == [also_mine.id, mine.id]
    assert [r.id for r in store.runs.recent_runs(requester="slack:U1", limit=1)] == [also_mine.id]
