"""Natural-language approval: `classify(text) -> Decision(approve | reject | unclear)`.

Pure and deliberately conservative. Only a *clear* answer decides a gate; anything with a
question, a hedge ("maybe", "but", "wait"), mixed signals or a negated approval word is never
an approval. "don't approve", "do not ship it" and "not approved" are rejections.

An explicit head ("approve, looks fine" / "reject: too risky") makes the rest the comment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class DecisionKind(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"
    UNCLEAR = "unclear"


@dataclass(frozen=True, slots=True)
class Decision:
    kind: DecisionKind
    comment: str | None = None


# Approval phrases (whole words). Verbs that a negation turns into a rejection are in _VERBS.
_APPROVE = (
    "approve", "approved", "approving", "lgtm", "ship it", "ship", "go ahead", "yes", "yep",
    "yeah", "yup", "y", "ok", "okay", "sure", "proceed", "do it", "go for it", "sounds good",
    "looks good", "looks great", "all good", "good to go", "confirm", "confirmed", "accept",
    "accepted", "let's go", "lets go", "green light", "publish", "merge", "deploy", "go",
    "continue", "+1", "aye", "affirmative", "👍", "✅", "🚀", "🚢", "👌", "✔", "✔️",
)
_REJECT = (
    "no", "nope", "nah", "reject", "rejected", "rejecting", "deny", "denied", "decline",
    "declined", "stop", "abort", "halt", "veto", "no go", "no-go", "n", "-1", "👎", "❌", "🛑", "⛔",
)
_VERBS = r"(approve|approved|ship|go|proceed|publish|merge|deploy|continue|accept|accepted|lgtm|do it)"
_NEGATIONS = (
    r"(don't|dont|do not|doesn't|does not|not|never|no|cannot|can't|cant|won't|wont|shouldn't|shouldnt)"
)
_NEGATED = re.compile(rf"\b{_NEGATIONS}\b(\s+\S+){{0,4}}?\s+{_VERBS}\b")
_ANY_NEGATION = re.compile(rf"\b{_NEGATIONS}\b")
_HEDGES = re.compile(
    r"\b(maybe|perhaps|probably|possibly|might|unless|if|but|wait|hold on|hold off|not sure|"
    r"later|unsure|hmm+|idk|depends|not yet|should we|can we|could we|what|why|how|when|which)\b"
)
_HEAD = re.compile(
    r"^(?P<head>approved?|lgtm|ship it|reject(?:ed)?|deny|denied|declined?|no|nope)"
    r"\s*[:,;\-–—]\s*(?P<rest>.+)$",
    re.IGNORECASE | re.DOTALL,
)
_MENTION = re.compile(r"<@[^>]+>|@baton\b|@workflow\b", re.IGNORECASE)


def _phrase(p: str) -> re.Pattern[str]:
    if re.fullmatch(r"[\w' +\-]+", p):
        return re.compile(rf"(?<![\w'+\-]){re.escape(p)}(?![\w'+\-])")
    return re.compile(re.escape(p))


_APPROVE_RE = [_phrase(p) for p in _APPROVE]
_REJECT_RE = [_phrase(p) for p in _REJECT]
_REJECT_HEADS = {"reject", "rejected", "deny", "denied", "decline", "declined", "no", "nope"}
_WEAK_HEADS = {"lgtm", "ship it", "no", "nope"}  # their comment must not say the opposite
_IDIOMS = re.compile(r"\bno (problem|worries|idea|clue|rush|need)\b")


def normalize(text: str) -> str:
    text = _MENTION.sub(" ", text).replace("\u2019", "'").replace("\u2018", "'")
    return " ".join(text.lower().split()).strip(" .!,;")


def classify(text: str) -> Decision:
    """Classify a plain reply to a waiting gate."""
    head = _HEAD.match(_MENTION.sub(" ", text).strip())
    if head:
        word = head.group("head").lower()
        comment = head.group("rest").strip() or None
        kind = DecisionKind.REJECT if word in _REJECT_HEADS else DecisionKind.APPROVE
        if word in _WEAK_HEADS and comment and classify(comment).kind not in (kind, DecisionKind.UNCLEAR):
            return Decision(DecisionKind.UNCLEAR)
        return Decision(kind, comment)
    norm = normalize(text)
    if not norm or "?" in norm or _IDIOMS.search(norm):
        return Decision(DecisionKind.UNCLEAR)
    if _NEGATED.search(norm):
        return Decision(DecisionKind.REJECT) if not _HEDGES.search(norm) else Decision(DecisionKind.UNCLEAR)
    if _HEDGES.search(norm):
        return Decision(DecisionKind.UNCLEAR)
    approves = any(p.search(norm) for p in _APPROVE_RE)
    rejects = any(p.search(norm) for p in _REJECT_RE)
    if approves and not rejects and not _ANY_NEGATION.search(norm):
        return Decision(DecisionKind.APPROVE)
    if rejects and not approves:
        return Decision(DecisionKind.REJECT)
    return Decision(DecisionKind.UNCLEAR)
