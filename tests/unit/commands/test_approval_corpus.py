"""The classifier against a corpus of real chat replies: zero false approvals, and at least
90 % of the clear approvals recognised. Run with `-s` to see the confusion matrix."""

from __future__ import annotations

from collections import Counter

from core.commands.approval import classify
from tests.unit.commands.approval_corpus import CODE_AND_QUOTES, CORPUS, FROM_THE_ISSUE

LABELS = ("approve", "reject", "unclear")


def confusion(corpus: list[tuple[str, str]]) -> tuple[Counter[tuple[str, str]], list[tuple[str, str, str]]]:
    matrix: Counter[tuple[str, str]] = Counter()
    wrong: list[tuple[str, str, str]] = []
    for text, label in corpus:
        got = str(classify(text).kind)
        matrix[(label, got)] += 1
        if got != label:
            wrong.append((label, got, text))
    return matrix, wrong


def table(matrix: Counter[tuple[str, str]]) -> str:
    rows = ["labelled \\ classified  " + "  ".join(f"{g:>8}" for g in LABELS)]
    for label in LABELS:
        rows.append(f"{label:<22} " + "  ".join(f"{matrix[(label, g)]:>8}" for g in LABELS))
    return "\n".join(rows)


def test_the_corpus_is_large_and_labelled_once() -> None:
    texts = {text for text, _ in CORPUS}
    assert len(texts) >= 400
    assert {label for _, label in CORPUS} == set(LABELS)
    assert len(set(CORPUS)) == len(texts), "a text with two different labels"


def test_no_false_approvals_and_nine_in_ten_clear_approvals() -> None:
    matrix, wrong = confusion(sorted(set(CORPUS)))
    print("\n" + table(matrix))
    approvals = sum(matrix[("approve", g)] for g in LABELS)
    false_approvals = [(label, text) for label, got, text in wrong if got == "approve"]
    assert false_approvals == [], table(matrix)
    recognised = matrix[("approve", "approve")] / approvals
    print(f"clear approvals recognised: {recognised:.1%} of {approvals}")
    assert recognised >= 0.9, table(matrix)


def test_a_clear_approval_is_never_taken_for_a_rejection() -> None:
    matrix, _ = confusion(sorted(set(CORPUS)))
    assert matrix[("approve", "reject")] == 0, table(matrix)


def test_every_example_of_the_issue_is_in_the_corpus_and_none_approves_unless_it_should() -> None:
    corpus = dict(CORPUS)
    for text, label in FROM_THE_ISSUE:
        assert corpus[text] == label
        if label != "approve":
            assert str(classify(text).kind) != "approve", text


def test_code_and_quotes_are_never_a_decision() -> None:
    for text, label in CODE_AND_QUOTES:
        assert str(classify(text).kind) == label, text
    assert classify("approve: fixed in `a1f3`").comment == "fixed in `a1f3`"  # kept as written
