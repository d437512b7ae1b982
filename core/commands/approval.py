"""Natural-language approval: `classify(text) -> Decision(approve | reject | unclear)`.

A closed grammar, not a word list with exceptions (DESIGN.md "Natural-language approval").
A false approval fires a side effect; a missed one costs one click. So a reply approves only
when *every* word of it is known below, and anything the grammar does not cover asks back.

    reply      := head-form | clause (SEP clause)*        SEP: , ; : . ! — – - and line breaks
    clause     := APPROVE | REJECT | FILLER | UNCLEAR
    APPROVE    := (YES | FILLER)+, at least one YES             "yes please, ship it 🚀"
    REJECT     := (NO | FILLER)+, at least one NO                "nope", "reject 👎"
                | FILLER* NOT FILLER* YES (YES | FILLER)*        "I wouldn't approve this"
                | FILLER* ("no way" | "never") FILLER*
    UNCLEAR    := any other clause: an unknown word, a question mark, an ellipsis, someone
                  else mentioned, YES and NO together, two negations, a negation of nothing

    a reply approves when its clauses are APPROVE or FILLER (one APPROVE at least);
    it rejects when they are REJECT or FILLER (one REJECT at least); otherwise it is unclear.

    head-form  := HEAD SEP comment                 "approve: looks fine", "reject: too risky"
        decides like HEAD and keeps the comment, unless the comment conditions, defers, narrows
        or contradicts the decision (`_comment_undercuts`): then the reply is unclear.

Code and quotes are never a decision: a fenced block (```lgtm```), an inline code span
(`approve`) or a quoted line (`> lgtm`) is someone else's words or an example, not this
person's answer. Each is read as one unknown word (`_neutralized`), so a reply that is only
code asks back, and a head form may still carry code in its comment ("approve: fixed in `a1f`").

The vocabulary is the whole grammar: to teach Baton a new way of saying yes, add it to `YES`;
nothing else approves. The bot's own mention is removed by the adapter before this runs;
any other mention (`<@U123>`, `@bob`) brings in a third party, and so is unclear.
"""

from __future__ import annotations

import re
import unicodedata
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


# -- the vocabulary (phrases are matched longest first, as whole words) ----------------------

YES = (
    "approve", "approved", "approving", "approves", "i approve", "lgtm", "sgtm", "ship", "shipit",
    "yes", "yep", "yeah", "yup", "yea", "yas", "y", "ok", "okay", "okey", "sure", "sure thing", "go",
    "go ahead", "go for it", "proceed", "do it", "send it", "make it so", "carry on", "continue",
    "sounds good", "sounds great", "looks good", "looks great", "looks fine", "all good",
    "good to go", "ready to go", "good to ship", "we're good", "we are good",
    "we're good to go", "we are good to go", "confirm",
    "confirmed", "accept", "accepted", "let's go", "lets go", "let's do it", "lets do it",
    "green light", "greenlight", "greenlit", "+1", "aye", "affirmative", "merge",
    "deploy", "publish", "release", "sign off", "signed off", "works for me", "fine by me",
    "fine with me", "ok by me", "ok with me", "okay with me", "good with me", "good by me",
    "happy with this", "happy with it",
    "👍", "✅", "✔", "☑", "🚀", "🚢", "👌", "🆗", "🟢", "(y)", ":+1:", ":thumbsup:",
    ":white_check_mark:", ":heavy_check_mark:", ":ballot_box_with_check:", ":rocket:", ":ship:",
    ":shipit:", ":ok_hand:", ":ok:",
    # other languages' common yes
    "oui", "d'accord", "ja", "jawohl", "genehmigt", "freigegeben", "sí", "si", "vale", "claro",
    "dale", "aprobado", "approuvé", "sim", "aprovado", "certo", "va bene", "da", "да", "tak",
    "evet", "hai", "はい", "了解", "是", "是的", "好", "好的", "可以", "네", "예",
)  # fmt: skip
NO = (
    "no", "nope", "nah", "naw", "n", "reject", "rejected", "rejecting", "deny", "denied",
    "decline", "declined", "veto", "vetoed", "-1", "stop", "abort", "halt", "cancel",
    "no go", "no-go", "nogo", "hard no", "hell no", "absolutely not", "definitely not",
    "certainly not", "not a chance", "not good", "no good", "not ready", "isn't ready",
    "is not ready", "aren't ready", "don't think so", "dont think so", "over my dead body",
    "👎", "❌", "✖", "🛑", "⛔", "🚫", "🙅", ":-1:", ":thumbsdown:", ":x:", ":no_entry:",
    ":no_entry_sign:", ":octagonal_sign:", ":no_good:",
    # other languages' common no
    "non", "nein", "nee", "nej", "nie", "não", "nao", "нет", "いいえ", "不", "不行", "不要",
    "hayır", "rechazado", "rejeté", "abgelehnt", "아니요",
)  # fmt: skip
NOT = (
    "not", "never", "nobody", "no way", "don't", "dont", "do not", "doesn't", "does not",
    "won't", "wont", "will not", "wouldn't", "wouldnt", "would not", "couldn't", "couldnt",
    "could not", "can't", "cant", "cannot", "can not", "shouldn't", "shouldnt", "should not",
    "mustn't", "must not", "ain't", "aint", "isn't", "isnt", "is not", "aren't", "are not",
    "am not", "i'm not", "im not", "nobody should", "no one should", "not going to",
    "not gonna", "ain't gonna", "isn't ready to", "is not ready to", "not ready to",
    "don't want to", "do not want to", "don't wanna", "don't think we should",
    "dont think we should", "do not think we should", "don't think i should",
)  # fmt: skip
#: "no way" and "never" also refuse on their own.
NOT_ALONE = frozenset({"no way", "never"})
FILLER = (
    "please", "pls", "plz", "thanks", "thank you", "thx", "thnx", "ty", "tysm", "cheers",
    "nice work", "great work", "good work", "nice job", "good job", "great job", "well done",
    "nice", "great", "awesome", "perfect", "excellent", "cool", "sweet", "lovely", "amazing",
    "brilliant", "good", "fine", "i", "i'm", "im", "i am", "we", "we're", "we are", "me", "this",
    "this is", "that", "that's", "that is", "it", "it's", "it is", "this one", "hey", "hi",
    "hello", "baton", "@baton", "@workflow", "bot",
    "totally", "definitely", "absolutely", "certainly", "really", "very", "so", "super",
    "for sure", "of course", "indeed", "just", "and", "&", "now", "from me", "for me",
    "to me", "by me", "with me", "on my end", "on my side", "100%", "merci", "danke", "bitte",
    "gracias", "por favor", "grazie", "obrigado", "obrigada", "spasibo", "спасибо", "谢谢",
    "ありがとう",
    "🎉", "🥳", "🙌", "👏", "🙏", "😀", "😃", "😄", "😁", "😊", "🙂", "☺", "😎", "🤝", "💪",
    "🔥", "❤", "💚", "💙", "💜", "🧡", "💛", "✨", "⭐", "🌟", "💯", ":)", ":-)", ":d", "*", "_",
    "(", ")", ":tada:", ":pray:", ":raised_hands:", ":clap:", ":smile:", ":slightly_smiling_face:",
    ":blush:", ":fire:", ":100:", ":sparkles:", ":muscle:", ":heart:", ":green_heart:",
)  # fmt: skip
#: Idioms that begin like a refusal or a yes but are neither.
IDIOMS = (
    "no problem", "no problems", "no worries", "no idea", "no clue", "no rush", "no need",
    "no objection", "no objections", "not sure", "not yet", "ok so", "yeah right",
    "sure jan", "go home", "go away",
)  # fmt: skip
#: Asking someone else to decide.
ASKING = (
    "please approve", "pls approve", "plz approve", "approve please", "approve pls",
    "please confirm", "confirm please", "please accept", "please sign off", "please review",
)  # fmt: skip
SEPARATORS = frozenset({",", ";", ":", ".", "!", "-", "–", "—", "\n", "、", "。", "！"})

#: Words that make a head form's comment condition, defer, narrow or hedge the decision, take
#: it back, or joke about it: "approve: after the freeze", "lgtm, except the migration", "no,
#: wait", "approve, nvm".
QUALIFIERS = frozenset({
    # conditions
    "if", "unless", "once", "when", "whenever", "after", "before", "until", "till", "til",
    "provided", "providing", "assuming", "pending", "given", "depends", "depending", "long",
    # deferrals
    "later", "tomorrow", "tonight", "soon", "eventually", "next", "first", "wait", "hold",
    "pause", "morning", "afternoon", "evening", "weekend", "monday", "tuesday", "wednesday",
    "thursday", "friday", "saturday", "sunday", "eod", "eow", "hour", "hours", "min", "mins",
    "minutes", "day", "days", "week", "weeks", "freeze",
    # narrowing, contrast, something else
    "only", "except", "excluding", "exclude", "partial", "partially", "part", "but", "though",
    "although", "however", "yet", "still", "instead", "rather", "other", "another", "else",
    "staging", "stage", "canary", "prod", "production", "dev", "qa", "step", "steps",
    # hedges
    "maybe", "perhaps", "probably", "possibly", "might", "may", "guess", "hope", "hopefully",
    "think", "unsure", "idk", "dunno", "hmm", "hm", "um", "uh",
    # the same in a few other languages
    "mais", "aber", "pero", "ma", "mas", "sauf", "außer", "ausser", "excepto", "salvo", "seulement",
    "nur", "solo", "sólo", "si", "wenn", "falls", "quand", "cuando", "quando", "demain", "morgen",
    "mañana", "manana", "domani", "amanhã", "après", "apres", "nach", "später", "spater", "después",
    "despues", "luego", "dopo", "depois", "pas", "nicht", "kein", "keine", "peut-être", "vielleicht",
    "quizás", "quizas", "forse", "talvez", "明天", "以后", "之后", "但是", "如果", "只", "明日", "後で",
    "でも", "もし",
    # taking it back, a slip, a try: "approve, nvm", "lgtm: oops, wrong run", "approve: just testing"
    "nvm", "nevermind", "mind", "scratch", "ignore", "ignoring", "disregard", "oops", "whoops",
    "oopsie", "typo", "mistake", "mistakenly", "accident", "accidentally", "retract", "retracted",
    "retracting", "thought", "thoughts", "strike", "sorry", "test", "testing", "wip", "draft",
    "forget", "misclick", "mis-click", "finger", "accidental", "revoke", "revoked", "withdraw",
    "withdrawn", "back", "vergiss", "vergessen", "abbrechen",
    # sarcasm
    "/s", "jk", "j/k", "kidding", "joking", "lol", "lmao", "rofl", "haha", "hahaha", "hehe",
    "sarcasm", "sarcastic", "🙄", "😒", "🤡", "😏", "😂", "🤣", "🙃", "😬", "🤔", "😅",
})  # fmt: skip
#: ... and words that cast doubt on an approval in particular (a rejection may well give them
#: as its reason: "reject: too risky"): risks, what still has to happen, someone else.
DOUBTS = frozenset({
    "without", "rollback", "roll", "revert", "undo", "kill", "should", "would", "could", "will",
    "gonna", "going", "need", "needs", "must", "let", "ask", "asked", "check", "checking",
    "verify", "review", "reviewing", "fails", "failing", "fail", "broken", "risky",
    "risk", "wrong", "bad", "blocked", "blocker", "block", "nothing", "none", "neither", "nor",
    "nobody",
    # something is failing: "approve, tests are red", "lgtm - CI failed"
    "red", "failed", "broke", "breaks", "breaking", "error", "errors", "flaky", "crash", "crashed",
    "crashes", "crashing", "outage", "incident", "regression", "regressed", "bug", "bugs",
    # misgivings, a yes given against one's judgment, a shrug: "approve: worried", "lgtm: yolo"
    "disagree", "hate", "worried", "worry", "worrying", "concern", "concerned", "concerns",
    "nervous", "scary", "scared", "afraid", "fear", "danger", "dangerous", "yikes", "ugh", "meh",
    "yolo", "crossed", "whatever", "funeral", "famous", "protest", "judgment", "judgement",
    "duress", "forced", "overruled", "reservations", "reluctantly", "reluctant", "blame",
})  # fmt: skip
COMMENT_WORDS = 20  # a longer comment may hide a condition: ask instead

# -- reading a reply -----------------------------------------------------------------------

_TOKEN = re.compile(
    r"""<[@#!][^>]*>            # a platform mention: someone else (the bot's is already gone)
      | :[a-z0-9_+-]+:          # an emoji shortcode (Slack writes 👍 as :+1:)
      | [:;]-?[()dp/|\\]        # an emoticon
      | \(y\)
      | \.{2,} | …              # an ellipsis: a hesitation
      | [+-]1(?![\w.])          # +1 / -1
      | /s\b | j/k              # sarcasm markers
      | @\w+                    # @name
      | \d+%
      | [^\W_]+(?:['-][^\W_]+)*  # a word (don't, no-go, y'all)
      | \S                      # anything else, one character: punctuation, an emoji
    """,
    re.VERBOSE,
)
#: variation selectors, zero-width joiner, skin tones, the gender signs of ZWJ sequences
_INVISIBLE = dict.fromkeys([0xFE0E, 0xFE0F, 0x200D, 0x2640, 0x2642, *range(0x1F3FB, 0x1F400)])
_SKIN_TONE = re.compile(r":skin-tone-\d:")
_HELD = re.compile(r"([^\W\d_])\1{2,}")  # a letter held long: "yesss"


class Kind(StrEnum):
    YES = "yes"
    NO = "no"
    NOT = "not"
    FILLER = "filler"
    SEP = "sep"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Word:
    text: str
    kind: Kind


def _split_lines(text: str) -> list[str]:
    """Tokens, with each line break kept as a token of its own (a separator)."""
    out: list[str] = []
    for i, line in enumerate(text.split("\n")):
        if i:
            out.append("\n")
        out.extend(m.group(0) for m in _TOKEN.finditer(line))
    return out


def _phrases(*groups: tuple[tuple[str, ...], Kind]) -> dict[tuple[str, ...], Kind]:
    table: dict[tuple[str, ...], Kind] = {}
    for phrases, kind in groups:
        for phrase in phrases:
            table[tuple(_split_lines(phrase))] = kind
    return table


_LEXICON = _phrases(
    (FILLER, Kind.FILLER), (YES, Kind.YES), (NO, Kind.NO), (NOT, Kind.NOT), (IDIOMS, Kind.UNKNOWN),
    (ASKING, Kind.UNKNOWN),
)
_LONGEST = max(len(p) for p in _LEXICON)


def lex(text: str) -> list[Word]:
    """The reply as words of the vocabulary, longest phrase first; anything else is UNKNOWN."""
    toks = [_unheld(t) for t in _split_lines(_normal(text))]
    words: list[Word] = []
    i = 0
    while i < len(toks):
        for size in range(min(_LONGEST, len(toks) - i), 0, -1):
            kind = _LEXICON.get(tuple(toks[i : i + size]))
            if kind is not None:
                words.append(Word(" ".join(toks[i : i + size]), kind))
                i += size
                break
        else:
            tok = toks[i]
            words.append(Word(tok, Kind.SEP if tok in SEPARATORS else Kind.UNKNOWN))
            i += 1
    return words


def _normal(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).translate(_INVISIBLE).lower()
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u02bc", "'")
    return _SKIN_TONE.sub("", text)



def _unheld(token: str) -> str:
    """A letter held long, undone: "yesss" -> "yes", "coool" -> "cool", "noooo" -> "no"."""
    if not _HELD.search(token):
        return token
    for held in (_HELD.sub(r"\1", token), _HELD.sub(r"\1\1", token)):
        if (held,) in _LEXICON:
            return held
    return _HELD.sub(r"\1", token)


def _clauses(words: list[Word]) -> list[list[Word]]:
    clauses: list[list[Word]] = [[]]
    for word in words:
        if word.kind is Kind.SEP:
            clauses.append([])
        else:
            clauses[-1].append(word)
    return [c for c in clauses if c]


def _clause(words: list[Word]) -> DecisionKind | None:
    """APPROVE / REJECT / None (filler only), or UNCLEAR."""
    kinds = [w.kind for w in words if w.kind is not Kind.FILLER]
    if not kinds:
        return None
    if Kind.UNKNOWN in kinds:
        return DecisionKind.UNCLEAR
    if set(kinds) == {Kind.YES}:
        return DecisionKind.APPROVE
    if set(kinds) == {Kind.NO}:
        return DecisionKind.REJECT
    if kinds[0] is Kind.NOT and kinds.count(Kind.NOT) == 1:
        rest = set(kinds[1:])
        if rest == {Kind.YES}:  # "I wouldn't approve this"
            return DecisionKind.REJECT
        if not rest and next(w for w in words if w.kind is Kind.NOT).text in NOT_ALONE:
            return DecisionKind.REJECT  # "no way", "never"
    return DecisionKind.UNCLEAR  # YES with NO, a negation of nothing, two negations


def _grammar(words: list[Word]) -> DecisionKind:
    found = {k for k in (_clause(c) for c in _clauses(words)) if k is not None}
    return found.pop() if len(found) == 1 else DecisionKind.UNCLEAR


# -- head forms ----------------------------------------------------------------------------

_APPROVE_HEADS = ("approve", "approved", "approving", "lgtm", "ship it")
_REJECT_HEADS = ("reject", "rejected", "deny", "denied", "decline", "declined", "veto", "no",
                 "nope", "nah")  # fmt: skip
_HEAD = re.compile(
    r"^\s*(?P<head>" + "|".join(re.escape(h) for h in (*_APPROVE_HEADS, *_REJECT_HEADS)) + r")"
    r"(?P<sep>\s*[:;,]|\s*[–—]|\s+-)\s*(?P<comment>\S.*)$",
    re.IGNORECASE | re.DOTALL,
)
_BOT_NAME = re.compile(r"^\s*@(?:baton|workflow)\b[\s,:]*", re.IGNORECASE)


def _comment_undercuts(words: list[Word], head: DecisionKind) -> bool:
    """Whether a head form's comment conditions, defers, narrows or contradicts the head."""
    if _grammar(words) not in (head, DecisionKind.UNCLEAR):
        return True  # "lgtm, nope" / "no, ship it"
    if len([w for w in words if w.kind is not Kind.SEP]) > COMMENT_WORDS:
        return True
    for word in words:
        if word.kind is Kind.UNKNOWN and word.text.startswith(("<", "@", "..", "…", "?")):
            return True  # someone else, a hesitation, a question
        if word.text in IDIOMS or word.text in ASKING:
            return True  # "approve, yeah right"
        if head is DecisionKind.APPROVE and word.kind in (Kind.NO, Kind.NOT):
            return True  # "approve, over my dead body"
        for part in word.text.split():  # each word of a phrase too: "not sure"
            if part in QUALIFIERS:
                return True
            negates = _LEXICON.get((part,)) in (Kind.NO, Kind.NOT) or part.endswith("n't")
            if head is DecisionKind.APPROVE and (negates or part in DOUBTS):
                return True
    if head is DecisionKind.REJECT:  # a yes that no negation governs: "no, ship it tomorrow"
        for clause in _clauses(words):
            kinds = [w.kind for w in clause]
            if Kind.YES in kinds and Kind.NOT not in kinds[: kinds.index(Kind.YES)]:
                return True
    return False


#: a code span or fenced block (closed by as many backticks as opened it), then any stray backtick
_CODE = re.compile(r"(`+)[\s\S]*?\1|`")
#: a quoted line (Slack sends `>` as `&gt;`)
_QUOTE = re.compile(r"^[ \t]*(?:>|&gt;).*$", re.MULTILINE)
_UNREAD = " \u27e6code\u27e7 "  # what a code span or quote reads as: one word outside the vocabulary


def _neutralized(text: str) -> str:
    """`text` with each code span, fenced block and quoted line replaced by an unknown word."""
    if "`" not in text and ">" not in text:
        return text
    return _QUOTE.sub(_UNREAD, _CODE.sub(_UNREAD, text))


def undercut(comment: str) -> bool:
    """Whether `comment`, the words of an `approve` whose run Baton infers (`approve after the
    tests pass`), conditions, defers, narrows or contradicts the approval, as a head form's
    comment would (`approve: after the tests pass` asks back)."""
    return _comment_undercuts(lex(_neutralized(comment).strip()), DecisionKind.APPROVE)


def classify(text: str) -> Decision:
    """Classify a plain reply to a waiting gate."""
    text = _BOT_NAME.sub("", text)
    read = _neutralized(text)  # what is read; the comment kept is the text as written
    head = _HEAD.match(read)
    if head is not None and lex(head.group("sep") + head.group("comment"))[0].kind is Kind.SEP:
        word = " ".join(head.group("head").lower().split())
        kind = DecisionKind.APPROVE if word in _APPROVE_HEADS else DecisionKind.REJECT
        if _comment_undercuts(lex(head.group("comment").strip()), kind):
            return Decision(DecisionKind.UNCLEAR)
        # nothing up to the separator was code or a quote: it ends at the same place in `text`
        return Decision(kind, text[head.end("sep") :].strip())
    return Decision(_grammar(lex(read)))
