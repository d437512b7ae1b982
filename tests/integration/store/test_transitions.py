"""Compare-and-swap status changes: every legal one works, every illegal one is refused,
and a loser is told the current status and who changed it."""

from __future__ import annotations

import itertools

import pytest

from core.commands.hints import hint
from core.errors import InvalidTransition, RunNotResumable, RunStateError
from core.store.cas import DEFAULT_LEASE_SECONDS
from core.store.port import Store, Transition
from core.store.records import TRANSITIONS, RunStatus
from tests.integration.store.conftest import Clock, MakeRun

LEGAL = sorted((src, dst) for src, targets in TRANSITIONS.items() for dst in targets)
ILLEGAL = sorted(
    (src, dst) for src, dst in itertools.product(RunStatus, RunStatus) if dst not in TRANSITIONS[src]
)


@pytest.mark.parametrize(("src", "dst"), LEGAL, ids=lambda s: s.value)
def test_every_legal_transition(store: Store, make_run: MakeRun, src: RunStatus, dst: RunStatus) -> None:
    run = make_run(src)
    moved = store.runs.transition(Transition(run.id, dst, actor="slack:U7", reason=f"to {dst.value}"))
    assert (moved.status, moved.version, moved.status_by, moved.reason) == (
        dst,
        run.version + 1,
        "slack:U7",
        f"to {dst.value}",
    )
    assert moved.updated_at > run.updated_at
    assert store.runs.get_run(run.id) == moved


@pytest.mark.parametrize(("src", "dst"), ILLEGAL, ids=lambda s: s.value)
def test_every_illegal_transition_is_refused(
    store: Store, make_run: MakeRun, src: RunStatus, dst: RunStatus
) -> None:
    run = make_run(src)
    expected = RunNotResumable if dst is RunStatus.RUNNING else InvalidTransition
    with pytest.raises(expected) as info:
        store.runs.transition(Transition(run.id, dst, actor="slack:U7"))
    assert isinstance(info.value, RunStateError)
    if dst is not RunStatus.PENDING:  # nothing may become pending: refused before reading the run
        assert (info.value.run_id, info.value.status, info.value.by) == (run.id, src.value, run.status_by)
    assert info.value.next_step is not None and hint(info.value)  # what is allowed next, worded
    assert store.runs.get_run(run.id) == run


def test_illegal_changes_are_refused_before_any_sql(store: Store) -> None:
    # an unknown id would raise RunNotFound if the store had queried it
    with pytest.raises(InvalidTransition):
        store.runs.transition(Transition("000000000000", RunStatus.PENDING, actor="a"))
    with pytest.raises(InvalidTransition):
        store.runs.transition(Transition("000000000000", RunStatus.RUNNING, actor="a",
                                         allowed_from=[RunStatus.COMPLETED]))


def test_allowed_from_narrows_the_sources(store: Store, make_run: MakeRun) -> None:
    paused = make_run(RunStatus.PAUSED)
    with pytest.raises(RunNotResumable) as info:
        store.runs.transition(Transition(paused.id, RunStatus.RUNNING, actor="slack:U2",
                                         allowed_from=[RunStatus.FAILED]))
    assert info.value.status == "paused"
    resumed = store.runs.transition(Transition(
        paused.id, RunStatus.RUNNING, actor="slack:U2", allowed_from=[RunStatus.PAUSED, RunStatus.FAILED]
    ))
    assert resumed.status is RunStatus.RUNNING


def test_second_resumer_is_told_who_won(store: Store, make_run: MakeRun) -> None:
    failed = make_run(RunStatus.FAILED)
    store.runs.transition(Transition(failed.id, RunStatus.RUNNING, actor="slack:U123"))
    with pytest.raises(RunNotResumable) as info:
        store.runs.transition(Transition(failed.id, RunStatus.RUNNING, actor="slack:U456"))
    assert info.value.message == f"run {failed.id} is already running (resumed by slack:U123)"
    assert (info.value.status, info.value.by) == ("running", "slack:U123")


def test_resume_of_a_completed_run_points_to_resume_from(store: Store, make_run: MakeRun) -> None:
    done = make_run(RunStatus.COMPLETED)
    with pytest.raises(RunNotResumable) as info:
        store.runs.transition(Transition(done.id, RunStatus.RUNNING, actor="slack:U1"))
    assert f"--resume-from {done.id}" in hint(info.value)
    assert info.value.status == "completed"


def test_expected_version_guards_against_a_stale_read(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.FAILED)
    resumed = store.runs.transition(
        Transition(run.id, RunStatus.RUNNING, actor="a", expected_version=run.version)
    )
    store.runs.transition(Transition(run.id, RunStatus.FAILED, actor="engine", reason="boom again"))
    with pytest.raises(InvalidTransition) as info:  # still failed, but not the failure we read
        store.runs.transition(Transition(run.id, RunStatus.CANCELLED, actor="slack:U1",
                                         expected_version=run.version))
    assert "changed while you acted on it" in info.value.message
    assert info.value.by == "engine"
    assert store.runs.get_run(run.id).version == resumed.version + 1


def test_transition_of_an_unknown_run_raises_run_not_found(store: Store) -> None:
    from core.errors import RunNotFound

    with pytest.raises(RunNotFound):
        store.runs.transition(Transition("000000000000", RunStatus.CANCELLED, actor="a"))


def test_running_takes_the_lease_and_leaving_clears_it(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    run = make_run(RunStatus.FAILED)
    resumed = store.runs.transition(Transition(
        run.id, RunStatus.RUNNING, actor="slack:U1", lease_owner="host:7:x", lease_seconds=40
    ))
    assert resumed.lease_owner == "host:7:x"
    assert resumed.lease_expires_at == pytest.approx(clock.now + 40, abs=0.01)
    assert resumed.reason is None
    defaulted = store.runs.transition(Transition(make_run(RunStatus.PAUSED).id, RunStatus.RUNNING,
                                                 actor="slack:U2"))
    assert defaulted.lease_owner == "slack:U2"
    assert defaulted.lease_expires_at == pytest.approx(clock.now + DEFAULT_LEASE_SECONDS, abs=0.01)
    paused = store.runs.transition(Transition(run.id, RunStatus.PAUSED, actor="engine"))
    assert (paused.lease_owner, paused.lease_expires_at) == (None, None)
