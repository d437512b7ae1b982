from __future__ import annotations

import pytest

from core.commands.approval import Decision, DecisionKind, classify

A, R, U = DecisionKind.APPROVE, DecisionKind.REJECT, DecisionKind.UNCLEAR

TABLE: list[tuple[str, DecisionKind, str | None]] = [
    # clear approvals
    ("approve", A, None), ("approved", A, None), ("Approved ✅", A, None), ("lgtm", A, None),
    ("LGTM!", A, None), ("ship it", A, None), ("Ship it 🚢", A, None), ("yes go ahead", A, None),
    ("Yes, go ahead.", A, None), ("👍", A, None), ("+1", A, None), ("go for it", A, None),
    ("sounds good to me", A, None), ("looks good, ship it", A, None), ("ok", A, None), ("proceed", A, None),
    ("<@U024BE7LH> lgtm", A, None), ("@baton approve", A, None),
    ("approve, looks fine", A, "looks fine"), ("approved: nice work", A, "nice work"),
    ("LGTM - great notes", A, "great notes"),
    # clear rejections
    ("no", R, None), ("No.", R, None), ("nope", R, None), ("nah, too risky", R, None), ("stop", R, None),
    ("reject: too risky", R, "too risky"), ("Rejected - wrong version", R, "wrong version"),
    ("no, too risky", R, "too risky"), ("don't ship", R, None), ("don’t ship it", R, None),
    ("do not ship it", R, None), ("don't approve", R, None), ("not approved", R, None), ("no go", R, None),
    ("👎", R, None), ("-1", R, None), ("abort", R, None), ("I would not approve this", R, None),
    ("I dont think we should ship", R, None), ("deny: not today", R, "not today"),
    # unclear
    ("maybe", U, None), ("what does it change?", U, None), ("not yet?", U, None), ("not yet", U, None),
    ("approve?", U, None), ("why?", U, None), ("ship it but fix the title first", U, None),
    ("yes no", U, None), ("no problem", U, None), ("hold on", U, None), ("please hold off", U, None),
    ("hello there", U, None), ("", U, None), ("no, ship it", U, None), ("lgtm, nope", U, None),
    ("probably fine", U, None), ("if the tests pass, ship it", U, None), ("can we wait", U, None),
]


def test_table_has_at_least_forty_phrases() -> None:
    assert len(TABLE) >= 40


@pytest.mark.parametrize(("text", "kind", "comment"), TABLE)
def test_classify(text: str, kind: DecisionKind, comment: str | None) -> None:
    assert classify(text) == Decision(kind, comment)


@pytest.mark.parametrize(
    "text",
    ["don't approve", "do not approve it", "not approved", "never approve this", "I can't approve",
     "don't ship it yet", "won't ship", "no, don't go ahead", "shouldn't merge", "dont lgtm"],
)
def test_negated_approvals_are_never_approvals(text: str) -> None:
    assert classify(text).kind is not DecisionKind.APPROVE
