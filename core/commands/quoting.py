"""Shell-like word splitting for chat commands, and its inverse.

`split_words` follows POSIX shell quoting closely enough that a command Baton suggests
(`quote_word`) always reads back to the same words:

- whitespace separates words; `'…'` is literal; `"…"` is literal except that a backslash
  escapes `\\`, `"`, a backtick and `$`; outside quotes a backslash escapes any character;
- typographic quotes (`“…”`, as Slack and phones insert them) quote like `"…"`;
- an unbalanced quote is a `UsageError` naming where it opened, never a crash.

Nothing here ever reaches a shell: the words are data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.errors import UsageError

_DOUBLE_ESCAPABLE = frozenset('\\"`$')
_CURLY = frozenset("\u201c\u201d")  # “ ”
_SAFE_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./\-]+")


@dataclass(frozen=True, slots=True)
class Word:
    text: str
    quoted: bool = False  # it began with a quote or escape: text, never a flag

    @property
    def is_flag(self) -> bool:
        return not self.quoted and self.text.startswith("--") and len(self.text) > 2


def split_words(text: str) -> list[Word]:
    """Split `text` into words; raise UsageError on an unbalanced quote."""
    words: list[Word] = []
    buf: list[str] = []
    in_word = quoted = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            if in_word:
                words.append(Word("".join(buf), quoted))
                buf, in_word, quoted = [], False, False
            i += 1
            continue
        if not in_word:
            in_word, quoted = True, ch in "\\'\"" or ch in _CURLY
        if ch == "\\":
            if i + 1 < n:
                buf.append(text[i + 1])
                i += 2
            else:
                buf.append(ch)
                i += 1
        elif ch == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise _unbalanced("'", i)
            buf.append(text[i + 1 : end])
            i = end + 1
        elif ch == '"' or ch in _CURLY:
            i = _read_double(text, i, buf)
        else:
            buf.append(ch)
            i += 1
    if in_word:
        words.append(Word("".join(buf), quoted))
    return words


def _read_double(text: str, start: int, buf: list[str]) -> int:
    """Read a double-quoted part opening at `start`; return the index after its close."""
    closers = _CURLY if text[start] in _CURLY else frozenset('"')
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in _DOUBLE_ESCAPABLE:
            buf.append(text[i + 1])
            i += 2
        elif ch in closers:
            return i + 1
        else:
            buf.append(ch)
            i += 1
    raise _unbalanced(text[start], start)


def _unbalanced(quote: str, at: int) -> UsageError:
    return UsageError(
        f"unbalanced quote: the {quote} opened at character {at + 1} is never closed",
        hint='Close the quote, or write a literal quote as \\" (or inside \'single quotes\').',
    )


def escape_double(text: str) -> str:
    """Escape `\\`, `"` and backticks so `text` can sit inside `"…"` and read back verbatim."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")


def quote_word(text: str) -> str:
    """`text` as one word of a command: bare when that is unambiguous, else `"…"` escaped."""
    if _SAFE_WORD.fullmatch(text) and not text.startswith("--"):
        return text
    return f'"{escape_double(text)}"'
