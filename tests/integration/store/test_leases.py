"""Leases: renewal, lapsed runs, a dead owner's runs, and exactly-one take-over."""

from __future__ import annotations

import pytest

from core.errors import RunNotResumable
from core.store.port import Store, Transition
from core.store.records import RunStatus
from tests.integration.store.conftest import Clock, MakeRun


def _running(store: Store, make_run: MakeRun, owner: str, seconds: float = 10) -> str:
    run = make_run(RunStatus.FAILED)
    store.runs.transition(Transition(run.id, RunStatus.RUNNING, actor="slack:U1", lease_owner=owner,
                                     lease_seconds=seconds))
    return run.id


def test_renew_leases_extends_only_the_owners_running_runs(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    mine = [_running(store, make_run, "host-a:1:x") for _ in range(2)]
    theirs = _running(store, make_run, "host-b:2:y")
    clock.advance(5)
    assert store.leases.renew_leases("host-a:1:x", 30) == 2
    for run_id in mine:
        assert store.runs.get_run(run_id).lease_expires_at == pytest.approx(clock.now + 30, abs=0.01)
    assert store.runs.get_run(theirs).lease_expires_at == pytest.approx(clock.now - 5 + 10, abs=0.01)
    assert store.leases.renew_leases("nobody", 30) == 0


def test_lapsed_runs_are_running_runs_past_their_lease(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    short = _running(store, make_run, "host-a:1:x", seconds=5)
    long = _running(store, make_run, "host-b:2:y", seconds=60)
    paused = make_run(RunStatus.PAUSED)
    assert store.leases.lapsed_runs() == []
    clock.advance(10)
    assert [r.id for r in store.leases.lapsed_runs()] == [short]
    assert {r.id for r in store.leases.lapsed_runs(now=clock.now + 100)} == {short, long}
    assert paused.id not in {r.id for r in store.leases.lapsed_runs(now=clock.now + 100)}


def test_runs_leased_by_matches_an_owner_prefix_literally(store: Store, make_run: MakeRun) -> None:
    dead = _running(store, make_run, "host_a:%1:x")
    _running(store, make_run, "hostXa:91:x")  # would match if `_` and `%` were wildcards
    assert [r.id for r in store.leases.runs_leased_by("host_a:%1:")] == [dead]
    assert store.leases.runs_leased_by("host_a:%2:") == []


def test_take_over_has_exactly_one_winner(store: Store, make_run: MakeRun, clock: Clock) -> None:
    run_id = _running(store, make_run, "host-a:1:x", seconds=5)
    clock.advance(10)
    (lapsed,) = store.leases.lapsed_runs()
    won = store.leases.take_over(lapsed, "host-b:2:y", 15)
    assert (won.lease_owner, won.version, won.status) == ("host-b:2:y", lapsed.version + 1, RunStatus.RUNNING)
    assert won.lease_expires_at == pytest.approx(clock.now + 15, abs=0.01)
    with pytest.raises(RunNotResumable) as info:
        store.leases.take_over(lapsed, "host-c:3:z", 15)
    assert info.value.by == "host-b:2:y"
    assert info.value.message == f"run {run_id} was already taken over by host-b:2:y (now running)"


def test_take_over_loses_when_the_owner_renewed_meanwhile(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    _running(store, make_run, "host-a:1:x", seconds=5)
    clock.advance(10)
    (lapsed,) = store.leases.lapsed_runs()
    assert store.leases.renew_leases("host-a:1:x", 15) == 1  # it was slow, not dead
    with pytest.raises(RunNotResumable) as info:
        store.leases.take_over(lapsed, "host-b:2:y", 15)
    assert info.value.by == "host-a:1:x"


def test_take_over_of_a_run_that_stopped_running_loses(store: Store, make_run: MakeRun) -> None:
    run_id = _running(store, make_run, "host-a:1:x")
    running = store.runs.get_run(run_id)
    store.runs.transition(Transition(run_id, RunStatus.FAILED, actor="host-a:1:x", reason="boom"))
    with pytest.raises(RunNotResumable) as info:
        store.leases.take_over(running, "host-b:2:y", 15)
    assert info.value.status == "failed"
