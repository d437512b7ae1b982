"""The pure compare-and-swap rules: legal sources, run ids, prefixes, the losers' errors."""

from __future__ import annotations

import itertools

import pytest

from core.commands.hints import hint
from core.errors import InvalidTransition, Next, RunNotResumable
from core.store import cas
from core.store.records import TRANSITIONS, Run, RunStatus

LEGAL = sorted((src, dst) for src, targets in TRANSITIONS.items() for dst in targets)
ILLEGAL = sorted(
    (src, dst) for src, dst in itertools.product(RunStatus, RunStatus) if dst not in TRANSITIONS[src]
)


def make_run(status: RunStatus, *, version: int = 2, by: str | None = "slack:U123") -> Run:
    return Run(
        id="3f9a1c2b0d11",
        workflow="release-notes",
        platform="slack",
        conversation="C1",
        thread=None,
        requester="slack:U999",
        args_digest="ab" * 32,
        status=status,
        version=version,
        created_at=1.0,
        updated_at=2.0,
        status_by=by,
    )


def test_new_run_ids_are_12_lowercase_hex_and_distinct() -> None:
    ids = {cas.new_run_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 12 and i == i.lower() and int(i, 16) >= 0 for i in ids)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("3F9A", "3f9a"), ("  3f9a1c ", "3f9a1c"), ("", None), ("3f9z", None), ("3f%", None), ("a_b", None)],
)
def test_normalize_prefix(text: str, expected: str | None) -> None:
    assert cas.normalize_prefix(text) == expected


def test_prefix_upper_bound_is_above_every_hex_continuation() -> None:
    bound = cas.prefix_upper_bound("3f")
    assert "3f" < "3f0" < "3fffffffffff" < bound < "40"


@pytest.mark.parametrize(("src", "dst"), LEGAL)
def test_every_legal_source_is_allowed(src: RunStatus, dst: RunStatus) -> None:
    assert src in cas.allowed_sources(dst, None)
    assert cas.allowed_sources(dst, [src]) == {src}


@pytest.mark.parametrize(("src", "dst"), ILLEGAL)
def test_an_illegal_change_is_refused_before_any_sql(src: RunStatus, dst: RunStatus) -> None:
    with pytest.raises(InvalidTransition) as info:
        cas.allowed_sources(dst, [src])
    assert f"from {src.value} to {dst.value}" in info.value.message
    assert hint(info.value) == "Check the run's status with `/workflow status <run>`."


def test_allowed_from_is_intersected_with_the_legal_sources() -> None:
    allowed = cas.allowed_sources(RunStatus.RUNNING, [RunStatus.FAILED, RunStatus.COMPLETED])
    assert allowed == {RunStatus.FAILED}


def test_nothing_may_become_pending() -> None:
    with pytest.raises(InvalidTransition):
        cas.allowed_sources(RunStatus.PENDING, None)


def test_losing_a_resume_race_names_the_winner() -> None:
    current = make_run(RunStatus.RUNNING, version=4)
    allowed = cas.allowed_sources(RunStatus.RUNNING, None)
    error = cas.lost_race(current, RunStatus.RUNNING, allowed, None)
    assert isinstance(error, RunNotResumable)
    assert error.message == "run 3f9a1c2b0d11 is already running (resumed by slack:U123)"
    assert (error.run_id, error.status, error.by) == ("3f9a1c2b0d11", "running", "slack:U123")
    assert error.next_step is Next.FOLLOW and not error.hint  # the commands layer words it
    assert hint(error) == "Follow it with `/workflow status 3f9a1c2b0d11`."


def test_a_freshly_started_run_is_started_not_resumed() -> None:
    error = cas.lost_race(make_run(RunStatus.RUNNING, version=2), RunStatus.RUNNING, frozenset(), None)
    assert "(started by slack:U123)" in error.message


def test_resuming_a_finished_run_points_to_resume_from() -> None:
    error = cas.lost_race(make_run(RunStatus.COMPLETED), RunStatus.RUNNING, frozenset(), None)
    assert isinstance(error, RunNotResumable)
    assert error.message == "run 3f9a1c2b0d11 is completed (completed by slack:U123) and cannot be resumed"
    assert (error.workflow, error.next_step) == ("release-notes", Next.NEW_FROM)
    assert hint(error) == "Start a new run from it: `/workflow run release-notes --resume-from 3f9a1c2b0d11`."


def test_a_version_mismatch_says_the_run_changed() -> None:
    allowed = cas.allowed_sources(RunStatus.CANCELLED, None)
    error = cas.lost_race(make_run(RunStatus.FAILED, version=7), RunStatus.CANCELLED, allowed, 5)
    assert isinstance(error, InvalidTransition)
    assert "changed while you acted on it (now failed, failed by slack:U123)" in error.message


def test_other_losses_are_invalid_transitions_with_the_current_status() -> None:
    allowed = cas.allowed_sources(RunStatus.COMPLETED, None)
    error = cas.lost_race(make_run(RunStatus.CANCELLED, by=None), RunStatus.COMPLETED, allowed, None)
    assert isinstance(error, InvalidTransition)
    assert error.message == "run 3f9a1c2b0d11 is cancelled (cancelled); it cannot become completed"
    assert (error.status, error.by) == ("cancelled", None)


def test_a_lost_takeover_names_the_lease_holder() -> None:
    current = make_run(RunStatus.RUNNING).evolve(lease_owner="host-b:42:ab")
    error = cas.lost_takeover(current)
    assert error.by == "host-b:42:ab"
    assert error.message == "run 3f9a1c2b0d11 was already taken over by host-b:42:ab (now running)"
