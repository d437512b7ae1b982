"""The arithmetic of approval policies: quorum of distinct eligible people, duplicates once,
one rejection ends it, eligibility with groups, escalation and the requester, deadlines."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.engine.approval_policy import (
    DeadlineKind,
    Policy,
    Standing,
    Verdict,
    Vote,
    deadlines,
    due,
    outstanding,
    same_thing,
    shortfall,
    tally,
)
from core.workflows.approval_spec import ApprovalSpec

GROUPS = {"sre": ["console:sam", "console:sue"], "leads": ["console:lee"]}
REQUESTER = "console:rita"
OPENED = 1_000.0


def members(refs: Iterable[str]) -> frozenset[str]:
    found: set[str] = set()
    for ref in refs:
        found.update(GROUPS.get(ref.removeprefix("group:"), ()) if ref.startswith("group:") else [ref])
    return frozenset(found)


def policy(**spec: object) -> Policy:
    return Policy.of(
        ApprovalSpec.model_validate({"question": "Go?", **spec}),
        approvers=["console:default"],
        admins=["console:root"],
    )


def vote(user: str, choice: str = "approve", at: float = OPENED + 1) -> Vote:
    return Vote(user, choice, at)


def decide(p: Policy, *votes: Vote) -> tuple[Verdict, str | None, int]:
    t = tally(p, votes, requester=REQUESTER, opened_at=OPENED, members=members)
    return t.verdict, t.decision, t.leading


def test_a_quorum_of_two_distinct_approvers_opens_the_gate() -> None:
    p = policy(approvers=["group:sre"], required=2)
    assert decide(p, vote("console:sam")) == (Verdict.PENDING, None, 1)
    assert decide(p, vote("console:sam"), vote("console:sue", at=OPENED + 2)) == (
        Verdict.DECIDED,
        "approve",
        2,
    )


def test_the_same_person_approving_twice_counts_once() -> None:
    p = policy(approvers=["group:sre"], required=2)
    twice = (vote("console:sam"), vote("console:sam", at=OPENED + 5))
    assert decide(p, *twice) == (Verdict.PENDING, None, 1)


def test_one_rejection_ends_the_gate_even_after_approvals() -> None:
    p = policy(approvers=["group:sre", "console:lee"], required=2)
    verdict = decide(
        p,
        vote("console:sam"),
        vote("console:lee", "reject", at=OPENED + 2),
        vote("console:sue", at=OPENED + 3),
    )
    assert verdict[:2] == (Verdict.REJECTED, "reject")


def test_an_approver_may_still_reject_but_never_switch_between_approvals() -> None:
    p = policy(approvers=["group:sre"], required=2, choices=["approve", "hotfix", "reject"])
    assert decide(p, vote("console:sam"), vote("console:sam", "reject", at=OPENED + 2))[0] is Verdict.REJECTED
    switched = decide(
        p,
        vote("console:sam"),
        vote("console:sam", "hotfix", at=OPENED + 2),
        vote("console:sue", "hotfix", at=OPENED + 3),
    )
    assert switched == (Verdict.PENDING, None, 1)


def test_votes_of_people_not_eligible_count_for_nothing() -> None:
    p = policy(approvers=["group:sre"], required=1)
    assert decide(p, vote("console:mallory")) == (Verdict.PENDING, None, 0)
    assert decide(p, vote("console:mallory", "reject"))[0] is Verdict.PENDING  # not even a rejection


def test_the_requester_is_excluded_when_the_policy_says_so_admins_included() -> None:
    p = policy(approvers=["*"], requester_may_approve=False)
    assert (
        p.standing(REQUESTER, requester=REQUESTER, opened_at=OPENED, now=OPENED, members=members)
        is Standing.REQUESTER
    )
    assert decide(p, vote(REQUESTER))[0] is Verdict.PENDING
    admin_requester = p.standing(
        "console:root", requester="console:root", opened_at=OPENED, now=OPENED, members=members
    )
    assert admin_requester is Standing.REQUESTER


def test_access_four_eyes_cannot_be_loosened_by_the_workflow() -> None:
    spec = ApprovalSpec(question="Go?", approvers=["*"], requester_may_approve=True)
    p = Policy.of(spec, approvers=[], approver_not_requester=True)
    assert p.exclude_requester


def test_admins_are_eligible_and_a_short_form_gate_uses_the_workflow_approvers() -> None:
    p = Policy.of(None, approvers=["group:leads"], admins=["console:root"])
    assert p.required == 1 and p.choices == ("approve", "reject")
    assert decide(p, vote("console:lee"))[:2] == (Verdict.DECIDED, "approve")
    assert decide(p, vote("console:root"))[:2] == (Verdict.DECIDED, "approve")
    assert decide(p, vote("console:sam"))[0] is Verdict.PENDING


def test_escalation_widens_who_may_vote_from_its_time_on() -> None:
    p = policy(approvers=["group:sre"], escalate={"after": "1h", "to": ["group:leads"]})
    early = Vote("console:lee", "approve", OPENED + 3599)
    late = Vote("console:lee", "approve", OPENED + 3600)
    assert decide(p, early)[0] is Verdict.PENDING
    assert decide(p, late)[:2] == (Verdict.DECIDED, "approve")
    assert (
        p.standing("console:lee", requester=REQUESTER, opened_at=OPENED, now=OPENED + 3600, members=members)
        is Standing.ELIGIBLE
    )


def test_a_choice_decides_only_with_its_own_quorum() -> None:
    p = policy(approvers=["group:sre", "console:lee"], required=2, choices=["approve", "hotfix", "reject"])
    mixed = decide(p, vote("console:sam", "hotfix"), vote("console:sue", "approve", at=OPENED + 2))
    assert mixed == (Verdict.PENDING, None, 1)
    hotfix = decide(
        p, vote("console:sam", "hotfix"), vote("console:sue"), vote("console:lee", "hotfix", at=OPENED + 3)
    )
    assert hotfix[:2] == (Verdict.DECIDED, "hotfix")


def test_a_quorum_approves_one_thing_the_first_votes_values() -> None:
    p = policy(approvers=["group:sre", "console:lee"], required=2)
    five = Vote("console:sam", "approve", OPENED + 1, "five", {"replicas": 5})
    four = Vote("console:sue", "approve", OPENED + 2, "four", {"replicas": 4})
    t = tally(p, [five, four], requester=REQUESTER, opened_at=OPENED, members=members)
    assert (t.verdict, t.leading, t.proposal) == (Verdict.PENDING, 1, five)  # 4 is not counted toward 5
    agree = Vote("console:lee", "approve", OPENED + 3, "", {"replicas": 5})
    t = tally(p, [four, agree, five], requester=REQUESTER, opened_at=OPENED, members=members)
    assert (t.verdict, t.decision) == (Verdict.DECIDED, "approve")
    assert [v.user for v in t.deciders()] == ["console:sam", "console:lee"]
    assert all(same_thing(v, five) for v in t.deciders())


def test_a_choice_the_gate_does_not_offer_is_ignored() -> None:
    assert decide(policy(approvers=["*"]), vote("console:sam", "hotfix"))[0] is Verdict.PENDING


def test_the_deciders_are_the_quorum_in_vote_order() -> None:
    p = policy(approvers=["*"], required=2)
    t = tally(
        p,
        [vote("console:b", at=OPENED + 2), vote("console:a"), vote("console:c", at=OPENED + 3)],
        requester=REQUESTER,
        opened_at=OPENED,
        members=members,
    )
    assert [v.user for v in t.deciders()] == ["console:a", "console:b"]


def test_reminders_go_to_eligible_people_who_have_not_answered() -> None:
    p = policy(
        approvers=["group:sre", REQUESTER],
        requester_may_approve=False,
        escalate={"after": "2h", "to": ["group:leads"]},
    )
    before = outstanding(
        p, [vote("console:sam")], requester=REQUESTER, opened_at=OPENED, now=OPENED + 60, members=members
    )
    assert before == {"console:sue"}
    after = outstanding(
        p, [vote("console:sam")], requester=REQUESTER, opened_at=OPENED, now=OPENED + 7200, members=members
    )
    assert after == {"console:sue", "console:lee"}


def test_deadlines_in_time_order_and_none_past_the_timeout() -> None:
    p = policy(timeout="4h", remind=["3h", "1h", "5h"][:2], escalate={"after": "2h", "to": ["group:leads"]})
    found = deadlines(p, OPENED)
    assert [(d.at - OPENED, d.kind, d.name) for d in found] == [
        (3600, DeadlineKind.REMIND, "remind:0"),
        (7200, DeadlineKind.ESCALATE, "escalate"),
        (10800, DeadlineKind.REMIND, "remind:1"),
        (14400, DeadlineKind.TIMEOUT, "timeout"),
    ]
    assert deadlines(policy(), OPENED) == ()


def test_due_deadlines_are_those_reached_and_not_fired() -> None:
    found = deadlines(policy(timeout="4h", remind=["1h", "3h"]), OPENED)
    assert [d.name for d in due(found, [], OPENED + 3599)] == []
    assert [d.name for d in due(found, [], OPENED + 3 * 3600)] == ["remind:0", "remind:1"]
    assert [d.name for d in due(found, ["remind:0"], OPENED + 5 * 3600)] == ["remind:1", "timeout"]


def test_on_timeout_is_reject_unless_written() -> None:
    assert policy(timeout="1h").on_timeout == "reject"
    assert policy(timeout="1h", on_timeout="approve").on_timeout == "approve"


PEOPLE = ["console:sam", "console:sue", "console:lee", "console:root", REQUESTER, "console:x"]
votes_strategy = st.lists(
    st.builds(
        Vote,
        st.sampled_from(PEOPLE),
        st.sampled_from(["approve", "hotfix", "reject"]),
        st.floats(OPENED, OPENED + 10_000),
        st.just(""),
        st.sampled_from([{}, {"replicas": 4}, {"replicas": 5}]),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(votes_strategy, st.integers(1, 4), st.booleans())
@example(  # one person's two votes at one instant, with other values: arrival order must not pick
    [Vote("console:sam", "approve", 1000.0, "", {}),
     Vote("console:sam", "approve", 1000.0, "", {"replicas": 4}),
     Vote("console:sue", "approve", 1000.0, "", {})], 2, False)
def test_properties_of_any_sequence_of_votes(votes: list[Vote], required: int, exclude: bool) -> None:
    p = policy(
        approvers=["group:sre", "console:lee", REQUESTER],
        required=required,
        requester_may_approve=not exclude,
        choices=["approve", "hotfix", "reject"],
    )
    t = tally(p, votes, requester=REQUESTER, opened_at=OPENED, members=members)
    eligible = members(["group:sre", "console:lee", REQUESTER, "console:root"]) - (
        {REQUESTER} if exclude else set()
    )
    # nobody counts twice, and only eligible people count
    assert len(t.voters) == len(
        {v.user for v in t.counted if v.choice != "reject"} | {v.user for v in t.counted}
    )
    assert t.voters <= eligible
    if t.verdict is Verdict.DECIDED:
        assert t.decision != "reject" and len({v.user for v in t.deciders()}) == required
        # a quorum approves one thing: the proposal, choice and values alike
        assert t.proposal is not None and all(same_thing(v, t.proposal) for v in t.deciders())
    # the order votes arrive in (a race) never changes the outcome
    again = tally(p, list(reversed(votes)), requester=REQUESTER, opened_at=OPENED, members=members)
    assert (again.verdict, again.decision) == (t.verdict, t.decision)
    # a duplicate of any vote changes nothing
    if votes:
        dup = tally(p, [*votes, votes[0]], requester=REQUESTER, opened_at=OPENED, members=members)
        assert (dup.verdict, dup.decision) == (t.verdict, t.decision)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 100), max_size=4, unique=True), st.integers(1, 200), st.floats(0, 30_000))
def test_deadlines_are_ordered_and_end_at_the_timeout(remind: list[int], timeout: int, now: float) -> None:
    p = Policy(approvers=("*",), timeout=timeout * 60.0, remind=tuple(m * 60.0 for m in remind))
    found = deadlines(p, OPENED)
    assert list(found) == sorted(found, key=lambda d: d.at)
    assert found[-1].kind is DeadlineKind.TIMEOUT and all(d.at < found[-1].at for d in found[:-1])
    fired = [d.name for d in due(found, [], OPENED + now)]
    assert not set(fired) & {d.name for d in due(found, fired, OPENED + now)}


@pytest.mark.parametrize("required", [1, 2, 3])
def test_exactly_required_distinct_people_open_the_gate(required: int) -> None:
    p = policy(approvers=["*"], required=required)
    people = [f"console:p{i}" for i in range(required)]
    before = decide(p, *(vote(u, at=OPENED + i) for i, u in enumerate(people[:-1])))
    after = decide(p, *(vote(u, at=OPENED + i) for i, u in enumerate(people)))
    assert before[0] is Verdict.PENDING and after[:2] == (Verdict.DECIDED, "approve")


def test_an_agent_never_counts_on_a_run_it_started_and_never_on_a_humans_only_gate() -> None:
    open_to_all = policy(approvers=["*"])
    standing = lambda p, user, requester=REQUESTER: p.standing(  # noqa: E731
        user, requester=requester, opened_at=OPENED, now=OPENED + 1, members=members)
    assert standing(open_to_all, "mcp:ci", requester="mcp:ci") is Standing.AGENT_OWN_RUN
    assert standing(open_to_all, "mcp:other", requester="mcp:ci") is Standing.ELIGIBLE
    assert standing(open_to_all, "console:rita") is Standing.ELIGIBLE  # people: as the policy says
    humans = policy(approvers=["*", "mcp:ci"], humans_only=True)
    assert standing(humans, "mcp:ci") is Standing.HUMANS_ONLY
    assert standing(humans, "console:sam") is Standing.ELIGIBLE
    admin_agent = Policy.of(ApprovalSpec(question="Go?", humans_only=True), approvers=["*"],
                            admins=["mcp:ci"])
    assert standing(admin_agent, "mcp:ci") is Standing.HUMANS_ONLY  # admins included
    # a vote of theirs counts for nothing, whatever the order it arrives in
    assert decide(humans, vote("mcp:ci", "reject"), vote("console:sam", at=OPENED + 2))[0] is Verdict.DECIDED


def test_a_policy_nobody_can_meet_says_why() -> None:
    lack = shortfall(policy(approvers=["group:nobody"], required=2), members)
    assert lack is not None and (lack.required, lack.people, lack.empty) == (2, 1, ("nobody",))  # the admin
    assert shortfall(policy(approvers=["group:sre"], required=2), members) is None  # sam and sue
    excluded = policy(approvers=["group:sre"], required=3, requester_may_approve=False)
    assert shortfall(excluded, members) is None  # sam, sue and the admin
    assert shortfall(excluded, members, requester="console:sam") is not None  # sam asked: two left
    escalated = policy(approvers=["group:nobody"], required=2, escalate={"after": "1h", "to": ["group:sre"]})
    assert shortfall(escalated, members) is None  # enough once it escalates
    assert shortfall(policy(approvers=["*"], required=5), members) is None  # anyone


def test_one_person_is_one_voice_whichever_account_they_use() -> None:
    """BATON_ACCESS's `people`: sam's Slack and Discord ids (here two console ids) are one
    person: one vote toward a quorum, one requester, reminded once, counted once as eligible."""
    sam = {"console:sam": "person:sam", "console:sam2": "person:sam"}
    spec = ApprovalSpec.model_validate({"question": "Go?", "approvers": ["group:sre", "console:sam2"],
                                        "required": 2, "requester_may_approve": False})
    p = Policy.of(spec, approvers=[], admins=[], people=sam)
    both = (vote("console:sam"), vote("console:sam2", at=OPENED + 2))
    assert decide(p, *both) == (Verdict.PENDING, None, 1)
    assert decide(p, *both, vote("console:sue", at=OPENED + 3))[0] is Verdict.DECIDED
    # a rejection from the other account still ends it (the safe direction)
    rejected = decide(p, vote("console:sam"), vote("console:sam2", "reject", at=OPENED + 2))
    assert rejected[0] is Verdict.REJECTED
    # sam requested the run: excluded on either account
    standing = p.standing("console:sam2", requester="console:sam", opened_at=OPENED, now=OPENED + 1,
                          members=members)  # fmt: skip
    assert standing is Standing.REQUESTER
    # sam, sam2 and sue are two people: a quorum of 3 can never be met, of 2 not once sam asked
    assert shortfall(Policy.of(spec.model_copy(update={"required": 3}), approvers=[], people=sam), members)
    assert shortfall(p, members) is None
    assert shortfall(p, members, requester="console:sam") is not None
    # sam voted on one account: neither is reminded
    left = outstanding(p, [vote("console:sam2")], requester=REQUESTER, opened_at=OPENED, now=OPENED + 60,
                       members=members)  # fmt: skip
    assert left == {"console:sue"}
