"""The closed grammar of `core.commands.approval`: what its vocabulary does on its own, what
any word outside it does, and what a head form keeps as its comment."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from core.commands.approval import (
    _APPROVE_HEADS,
    ASKING,
    FILLER,
    IDIOMS,
    NO,
    NOT,
    QUALIFIERS,
    YES,
    Decision,
    DecisionKind,
    classify,
)

A, R, U = DecisionKind.APPROVE, DecisionKind.REJECT, DecisionKind.UNCLEAR

HEAD_FORMS: list[tuple[str, DecisionKind, str | None]] = [
    ("approve, looks fine", A, "looks fine"), ("approved: nice work", A, "nice work"),
    ("LGTM - great notes", A, "great notes"), ("Approve: Tested on my laptop.", A, "Tested on my laptop."),
    ("ship it — notes read well", A, "notes read well"), ("@baton approve: fine", A, "fine"),
    ("reject: too risky", R, "too risky"), ("Rejected - wrong version", R, "wrong version"),
    ("no, too risky", R, "too risky"), ("deny: not today", R, "not today"),
    ("nah, breaks the API", R, "breaks the API"), ("declined; needs a changelog", R, "needs a changelog"),
    # a comment that conditions, defers, narrows or contradicts: ask back
    ("approve: after the freeze", U, None), ("lgtm, except the migration", U, None),
    ("approve: only the API", U, None), ("approve: tomorrow", U, None), ("approve: jk", U, None),
    ("approve: Bob should check it", U, None), ("approve: is CI green?", U, None),
    ("approve: not sure", U, None), ("approve: no", U, None), ("lgtm, nope", U, None),
    ("no, ship it", U, None), ("no, wait", U, None), ("reject: maybe later", U, None),
    ("approve: " + "fine " * 30, U, None), ("approve: <@U123> did it", U, None),
    ("approve: ok...", U, None), ("approve, tests are red", U, None), ("approve - CI red", U, None),
    ("lgtm: deploy failed twice", U, None), ("approve: fixes the bug", U, None),
    # taken back, a slip, a try
    ("approve, nvm", U, None), ("approve: never mind", U, None), ("approve, scratch that", U, None),
    ("approve; ignore that", U, None), ("lgtm: oops, wrong run", U, None), ("approve: typo", U, None),
    ("approve: on second thought", U, None), ("approve: just testing", U, None), ("approve: WIP", U, None),
    ("approve, my bad", U, None), ("reject: nvm", U, None), ("reject, sorry, wrong thread", U, None),
    ("reject: bad idea", R, "bad idea"),
    # not head forms: an emoticon is not a separator
    ("lgtm :p", U, None), ("lgtm :)", A, None), ("approve-ish", U, None),
]


@pytest.mark.parametrize(("text", "kind", "comment"), HEAD_FORMS)
def test_head_forms_keep_their_comment_unless_it_undercuts_them(
    text: str, kind: DecisionKind, comment: str | None
) -> None:
    assert classify(text) == Decision(kind, comment)


@pytest.mark.parametrize("phrase", YES)
def test_every_yes_of_the_vocabulary_approves_alone(phrase: str) -> None:
    assert classify(phrase).kind is A


@pytest.mark.parametrize("phrase", NO)
def test_every_no_of_the_vocabulary_rejects_alone(phrase: str) -> None:
    assert classify(phrase).kind is R


@pytest.mark.parametrize("phrase", [*FILLER, *IDIOMS, *ASKING])
def test_filler_and_idioms_alone_decide_nothing(phrase: str) -> None:
    assert classify(phrase).kind is U


_yes = st.sampled_from(YES)
_filler = st.sampled_from(FILLER)
_outside = st.sampled_from(  # ("si" is a yes, and also "if" in a comment)
    [*sorted(QUALIFIERS - set(YES)), "tests", "Bob", "<@U123>", "?", "...", "the", "cancel", "🤔"]
)
_sep = st.sampled_from([" ", ", ", " - ", ". ", "! ", "\n"])


@given(st.lists(st.one_of(_yes, _filler), min_size=1, max_size=6), _outside, st.integers(0, 6), _sep)
def test_one_word_outside_the_vocabulary_never_approves(
    words: list[str], stranger: str, at: int, sep: str
) -> None:
    words.insert(min(at, len(words)), stranger)
    # not a head form ("approve, tests pass" keeps its comment: HEAD_FORMS judge those)
    assume(not (len(words) > 1 and words[0].lower() in _APPROVE_HEADS and sep in (", ", " - ")))
    assert classify(sep.join(words)).kind is not A


@settings(max_examples=500)
@given(st.lists(st.one_of(_yes, _filler), max_size=5), st.sampled_from(NO + NOT + IDIOMS),
       st.integers(0, 6), st.lists(_sep, min_size=6, max_size=6))
def test_a_no_a_negation_or_an_idiom_anywhere_never_approves(
    words: list[str], no: str, at: int, seps: list[str]
) -> None:
    words.insert(min(at, len(words)), no)  # also after a head: "approve, approve, over my dead body"
    text = words[0] + "".join(sep + word for sep, word in zip(seps, words[1:], strict=False))
    assert classify(text).kind is not A


@given(st.sampled_from(NOT), st.lists(_filler, max_size=2), _yes)
def test_a_negated_yes_never_approves(negation: str, filler: list[str], yes: str) -> None:
    assert classify(" ".join([negation, *filler, yes])).kind is not A


@given(st.lists(st.one_of(_yes, _filler), min_size=1, max_size=5), st.sampled_from(NO), _sep)
def test_a_yes_and_a_no_together_are_unclear(words: list[str], no: str, sep: str) -> None:
    if not any(w in YES for w in words):
        words.append("yes")
    assert classify(sep.join([*words, no])).kind is U


@pytest.mark.parametrize(
    ("text", "kind"),
    [("yesss", A), ("coool, lgtm", A), ("noooo", R), ("don’t ship it", R), ("👍🏿", A), ("✔️", A),
     (":+1::skin-tone-4:", A), ("ＬＧＴＭ！", A), ("lgtm？", U), ("", U), ("   ", U), ("\n", U)],
)
def test_spelling_variants_read_as_the_word(text: str, kind: DecisionKind) -> None:
    assert classify(text).kind is kind
