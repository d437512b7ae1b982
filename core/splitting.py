"""Splitting rendered markdown into chunks within a platform's limit, without breaking code.

`split_chunks(text, limit)` returns `Chunk`s whose bodies, joined, are `text` character for
character; each chunk's `text` (a reopened fence or code span, the body, the closing one) is at
most `limit` units wide (UTF-16 code units, what Discord and Slack count: `width`).

What a split never does:
- cut inside a fenced code block without closing it at the end of the chunk and reopening it
  (same length, same language where the platform has languages) at the start of the next, so
  every chunk's fences are balanced. A fence closes only with a line of backticks at least as
  long as its opener and nothing else on it (CommonMark): a stray ``` line inside a ````
  block is content, not a close;
- leave an empty code block behind: a chunk never ends just after a fence opened, and never
  starts with only the fence's close (a 9,000-character line in a block is cut inside it);
- cut inside an inline code span (`/workflow resume 3f9a`, a command to copy), a mention or
  link (`<@U1>`, `<#C1|x>`, `[label](<url>)`), an entity (`&amp;`), an emoji shortcode or a
  character sequence drawn as one (an emoji with its modifiers and joiners), as long as that
  piece fits in a chunk at all. A code span pairs its backticks across the lines of one
  paragraph, as CommonMark does (never across a blank line, a fence or a heading, quote or
  list line): a chunk never ends at a line break inside one. A code span wider than a whole
  chunk is cut, closed and reopened with its own backticks (a run over a quarter of the limit
  opens no span, as it opens no fence), and the chunk says so (`Chunk.whole` is False): the caller
  then attaches the whole text as a file, where every command is whole and pastes back exactly.

Where a line is longer than what is left of a chunk, the cut falls after a space near the end
of the room when there is one outside code, else at the last place allowed above.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from itertools import accumulate

_OPEN = re.compile(r"^ {0,3}(`{3,})([^`]*)$")
_CLOSE = re.compile(r"^ {0,3}(`{3,})[ \t]*$")
_LANG = re.compile(r"^[\w+#.\-]{1,20}$")
_RUN = re.compile(r"`+")
#: a line that starts a block (heading, quote, list item): a code span never pairs across it
_BLOCK = re.compile(r"^ {0,3}(?:#{1,6}(?:[ \t]|$)|>|[-+*](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$))")
#: a line that is a block of its own (an ATX heading, a thematic break, a setext underline)
_ALONE = re.compile(r"^ {0,3}(?:#{1,6}(?:[ \t].*)?|(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,}"
                    r"|=+[ \t]*)$")
#: pieces of a line of text (outside code) a split must not fall inside
_TOKENS = re.compile(
    r"<[^<>\s][^<>\n]{0,300}>"  # Slack <@U1> <#C1|x> <url|label>, Discord <@1> <#1> <t:1>
    r"|\[[^\[\]\n]{1,200}\]\(<?[^()\s<>]{1,500}>?\)"  # a masked link
    r"|&#?\w{1,10};"  # an entity
    r"|:[\w+\-]{1,40}:"  # an emoji shortcode
    r"|@(?:everyone|here)"
)
_JOINERS = frozenset("\u200d\ufe0e\ufe0f\u20e3")
MIN_LIMIT = 64


@dataclass(frozen=True, slots=True)
class Chunk:
    prefix: str  # a reopened code fence or code span, or ""
    body: str  # a slice of the input, in order
    suffix: str  # the closing fence or backticks, or ""
    whole: bool = True  # False: a code span wider than a chunk was cut here

    @property
    def text(self) -> str:
        return self.prefix + self.body + self.suffix


def width(text: str) -> int:
    """Length as the platforms count it (UTF-16 code units)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def fit(text: str, limit: int) -> str:
    """`text` when it has at most `limit` characters, else its start and "…" in `limit`: where a
    platform refuses a longer label, title or placeholder (never a message: that is split)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class _Fence:
    run: int  # backticks in the opener
    reopen: str  # the line that reopens it in the next chunk (without "\n")


@dataclass(frozen=True, slots=True)
class _Line:
    start: int
    end: int  # past the "\n" (or the end of the text)
    kind: str  # "open", "close", "code" (inside a fence) or "text"
    before: _Fence | None  # the fence open at the start of the line
    after: _Fence | None  # the fence open after it
    mark: int  # where a cut inside an "open" / "close" line may start (past its backticks)


def fence_of(line: str, limit: int, *, languages: bool = True) -> _Fence | None:
    """The fence `line` opens (None: not an opener). A run of backticks too long to reopen
    within `limit` (over a quarter of it) is text."""
    match = _OPEN.match(line.rstrip("\n"))
    if match is None or len(match.group(1)) > limit // 4:
        return None
    lang = match.group(2).strip()
    return _Fence(len(match.group(1)), match.group(1) + (lang if languages and _LANG.match(lang) else ""))


def closes(line: str, fence: _Fence, limit: int) -> int | None:
    """Where the backticks of `line` end when it closes `fence` (None: it does not). A run too
    long to fit a quarter of `limit` is content."""
    match = _CLOSE.match(line.rstrip("\n"))
    if match is None or not fence.run <= len(match.group(1)) <= limit // 4:
        return None
    return match.end(1)


def _scan(text: str, limit: int, languages: bool) -> list[_Line]:
    lines: list[_Line] = []
    fence: _Fence | None = None
    start = 0
    while start < len(text):
        newline = text.find("\n", start)
        end = len(text) if newline < 0 else newline + 1
        line = text[start:end]
        if fence is not None and (mark := closes(line, fence, limit)) is not None:
            lines.append(_Line(start, end, "close", fence, None, start + mark))
            fence = None
        elif fence is not None:
            lines.append(_Line(start, end, "code", fence, fence, start))
        elif (opened := fence_of(line, limit, languages=languages)) is not None:
            lines.append(_Line(start, end, "open", None, opened, start + line.index("`") + opened.run))
            fence = opened
        else:
            lines.append(_Line(start, end, "text", None, None, start))
        start = end
    return lines


def code_spans(line: str) -> list[tuple[int, int, int]]:
    """The inline code spans of one line of text: (start, end, backticks). A backtick escaped
    with a backslash opens nothing; a run with no closing run of its length is text."""
    spans: list[tuple[int, int, int]] = []
    index = 0
    while (match := _RUN.search(line, index)) is not None:
        slashes = len(line[: match.start()]) - len(line[: match.start()].rstrip("\\"))
        run = len(match.group(0))
        opener = match.start() + (slashes % 2)  # an escaped first backtick is text
        run -= opener - match.start()
        if run == 0:
            index = match.end()
            continue
        closer = next((m for m in _RUN.finditer(line, match.end()) if len(m.group(0)) == run), None)
        if closer is None:
            index = match.end()
            continue
        spans.append((opener, closer.end(), run))
        index = closer.end()
    return spans


def paragraph_spans(text: str, lines: list[_Line], limit: int) -> list[tuple[int, int, int]]:
    """The inline code spans of `text` (absolute offsets, backticks), paired as CommonMark pairs
    them: across the lines of one paragraph (a soft line break inside a span is part of it),
    never across a blank line, a fence or a block start (heading, quote, list item, break).
    A span opened by a run too long to reopen within `limit` (over a quarter of it) is text."""
    spans: list[tuple[int, int, int]] = []
    paragraphs: list[list[int]] = []
    current: list[int] | None = None
    for line in lines:
        body = text[line.start : line.end].rstrip("\r\n")
        if line.kind != "text" or not body.strip():
            current = None
            continue
        if current is None or _BLOCK.match(body) or _ALONE.match(body):
            current = [line.start, line.end]
            paragraphs.append(current)
        else:
            current[1] = line.end
        if _ALONE.match(body):
            current = None
    for start, end in paragraphs:
        spans.extend((start + a, start + b, run) for a, b, run in code_spans(text[start:end])
                     if run <= limit // 4)
    return spans


def _tokens(text: str, line: _Line, spans: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """The protected tokens of a text line (absolute offsets) outside its code spans."""
    body = text[line.start : line.end]
    tokens: list[tuple[int, int]] = []
    for match in _TOKENS.finditer(body):
        a, b = line.start + match.start(), line.start + match.end()
        if not any(sa < b and a < sb for sa, sb, _ in spans):
            tokens.append((a, b))
    return tokens


def _joined(text: str, cut: int) -> bool:
    """`cut` falls inside a character drawn as one (a modifier, a joiner or a mark follows)."""
    if cut <= 0 or cut >= len(text):
        return False
    after, before = text[cut], text[cut - 1]
    return (after in _JOINERS or before == "\u200d" or unicodedata.combining(after) != 0
            or "\U0001f3fb" <= after <= "\U0001f3ff" or "\U000e0020" <= after <= "\U000e007f"
            or (before == "\r" and after == "\n"))


class _Splitter:
    def __init__(self, text: str, limit: int, languages: bool) -> None:
        self.text, self.limit = text, limit
        self.lines = _scan(text, limit, languages)
        self.cum = [0, *accumulate(width(ch) for ch in text)]
        # soon[j]: from line j on, only blank code lines, then the fence's close
        self.soon = [False] * (len(self.lines) + 1)
        for j in range(len(self.lines) - 1, -1, -1):
            line = self.lines[j]
            blank = not text[line.start : line.end].strip()
            self.soon[j] = line.kind == "close" or (line.kind == "code" and blank and self.soon[j + 1])
        # the code spans over each line, and the span a line's end falls inside (a soft break)
        self.spans: list[list[tuple[int, int, int]]] = [[] for _ in self.lines]
        self.inner: list[tuple[int, int, int] | None] = [None] * len(self.lines)
        for span in paragraph_spans(text, self.lines, limit):
            first, final = self._line_at(span[0]), self._line_at(span[1] - 1)
            for j in range(first, final + 1):
                self.spans[j].append(span)
            for j in range(first, final):
                self.inner[j] = span

    def w(self, a: int, b: int) -> int:
        return self.cum[b] - self.cum[a]

    def chunks(self) -> list[Chunk]:
        out: list[Chunk] = []
        pos, index, span = 0, 0, 0  # span: backticks of a code span cut open at `pos`
        while pos < len(self.text):
            while self.lines[index].end <= pos:
                index += 1
            line = self.lines[index]
            fence = line.before if pos == line.start or line.kind != "open" else line.after
            prefix = "`" * span if span else (fence.reopen + "\n" if fence is not None else "")
            room = self.limit - width(prefix)
            end, suffix, whole, span = self._end(pos, index, room, None if span else fence)
            out.append(Chunk(prefix, self.text[pos:end], suffix, whole))
            pos = end
        return out or [Chunk("", "", "")]

    def _suffix(self, end: int, fence: _Fence | None) -> str:
        if fence is None:
            return ""
        return ("" if self.text[end - 1] == "\n" else "\n") + "`" * fence.run

    def _end(self, pos: int, index: int, room: int, fence: _Fence | None) -> tuple[int, str, bool, int]:
        """The end of the chunk starting at `pos`: after the last whole line that fits and leaves
        no empty code block on either side, else inside a line."""
        best: int | None = None
        last: int | None = None  # the last line end that fits, even with an empty block left
        empty = fence is not None  # a reopened block with nothing in it yet
        blocked: tuple[int, int, int] | None = None  # a code span the last line ends that fit fall in
        j = index
        while j < len(self.lines):
            line = self.lines[j]
            filled = bool(self.text[max(pos, line.start) : line.end].strip())
            empty = line.kind == "open" or (empty and line.kind == "code" and not filled)
            if self.w(pos, line.end) + width(self._suffix(line.end, line.after)) > room:
                break
            if j == len(self.lines) - 1:
                return line.end, self._suffix(line.end, line.after), True, 0
            inside = line.after is not None
            last = line.end
            if self.inner[j] is not None:  # never end a chunk inside a code span that spans lines
                blocked = self.inner[j]
            elif not (inside and (empty or self.soon[j + 1])):
                best, blocked = line.end, None
            j += 1
        if best is not None and (blocked is not None or not self._cut_anyway(j, room)):
            return best, self._suffix(best, self.lines[self._line_at(best - 1)].after), True, 0
        if blocked is not None:  # a span over lines that does not fit in what is left
            if pos < blocked[0]:  # it opens after this chunk's start: cut before it if allowed,
                # as late as allowed (on its line, else on the lines before, down to the first)
                for k in range(self._line_at(blocked[0]), index - 1, -1):
                    cut = self._cut_line(pos, k, room, force=False)
                    if cut is not None and cut[0] <= blocked[0]:
                        return cut
                if self.w(pos, blocked[0]) > room:  # the text before it is wider than a chunk
                    forced = self._cut_line(pos, index, room)
                    assert forced is not None
                    return forced
            return self._in_span(pos, room, blocked)
        k = j
        if self.lines[k].kind == "close" or self.soon[k]:  # keep some code for the close to follow
            k = next((i for i in range(k - 1, index - 1, -1) if self.lines[i].kind in ("code", "open")
                      and self.text[max(pos, self.lines[i].mark) : self.lines[i].end].strip()), k)
        cut = self._cut_line(pos, k, room, force=last is None)
        if cut is None:  # no allowed place in line `k` fits: end after the last whole line
            end = best if best is not None else last
            assert end is not None
            return end, self._suffix(end, self.lines[self._line_at(end - 1)].after), True, 0
        return cut

    def _cut_anyway(self, j: int, room: int) -> bool:
        """Line `j` is wider than any chunk: cut it here rather than leave this chunk short."""
        if j >= len(self.lines) or self.lines[j].kind not in ("code", "text"):
            return False
        line = self.lines[j]
        return self.w(line.start, line.end) + 1 + self.limit // 4 > room

    def _line_at(self, offset: int) -> int:
        lo, hi = 0, len(self.lines) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self.lines[mid].end <= offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _cut_line(self, pos: int, k: int, room: int, *,
                  force: bool = True) -> tuple[int, str, bool, int] | None:
        """The chunk ends inside line `k`: at the last allowed place that fits. None when there
        is none and not `force` (the caller has a line end to fall back on)."""
        line = self.lines[k]
        fence = line.after if line.kind == "open" else (None if line.kind == "close" else line.before)
        suffix = "\n" + "`" * fence.run if fence is not None else ""
        lo = max(pos, line.mark)
        hi = line.end
        if line.kind == "code":  # leave something to show after the cut (the close follows)
            hi = line.start + len(self.text[line.start : line.end].rstrip())
        spans = self.spans[k] if line.kind == "text" else []
        tokens = _tokens(self.text, line, spans) if line.kind == "text" else []

        def inside(cut: int) -> bool:
            """`cut` falls inside a protected piece, or leaves a piece that reads as a fence."""
            if any(a < cut < b for a, b in tokens) or any(a < cut < b for a, b, _ in spans):
                return True
            pieces = (self.text[max(pos, line.start) : cut], self.text[cut : line.end])
            if line.kind == "open":  # the opener itself, closed by the suffix; then no backtick
                return False
            if fence is not None and line.kind == "code":
                return any(closes(p, fence, self.limit) is not None for p in pieces)
            # a run of backticks too long to be a fence is text here as everywhere else
            return any(fence_of(p, self.limit) is not None for p in pieces)

        far = lo
        while far < hi and self.w(pos, far + 1) + width(suffix) <= room:
            far += 1
        cut = next((c for c in range(far, lo, -1) if not inside(c) and not _joined(self.text, c)), None)
        if cut is not None and line.kind == "text":
            floor = max(lo, pos + (far - pos) * 3 // 4)
            space = self.text.rfind(" ", floor, cut)
            while space >= floor and inside(space + 1):
                space = self.text.rfind(" ", floor, space)
            if space >= floor and space + 1 > pos:
                cut = space + 1
        if cut is not None and cut > pos:
            return cut, self._suffix(cut, fence), True, 0
        if not force:
            return None
        # what starts at `pos` is wider than a chunk: cut it (a code span closed and reopened)
        span = next((s for s in spans if s[0] <= pos < s[1]), None)
        if span is not None:
            return self._in_span(pos, room, span)
        far = max(far, pos + 1)
        while far > pos + 1 and _joined(self.text, far):
            far -= 1
        return far, self._suffix(far, fence), False, 0  # no "\n" before the close at a line's start

    def _in_span(self, pos: int, room: int, span: tuple[int, int, int]) -> tuple[int, str, bool, int]:
        """Inside (or before, on its line) a code span too wide for what is left: as much as
        fits, closed with its backticks. Never next to a backtick of its content (which would
        change the run) nor a line break, and never leaving a line that reads as a fence."""
        start, end, run = span
        text = self.text
        opening = pos <= start
        if self.w(pos, end) <= room:
            if self._starts_clean(end) and self._ends_clean(pos, end, ""):
                return end, "", True, 0
            # a chunk ending right after it would end (or the next start) with a line that reads
            # as a fence (a span "``` … \n   ```"): end further on its last line instead, at a
            # place allowed there (never inside the command that may follow)
            later = self._cut_line(pos, self._line_at(end - 1), room, force=False)
            if later is not None and later[0] >= end:
                return later
        floor = max(pos, start + run) if opening else pos  # keep some content before a cut
        top = floor
        while top < end - run - 1 and self.w(pos, top + 1) + run <= room:
            top += 1
        # what reads as a mention, link or emoji in it stays whole where a place allows it
        pieces = [m.span() for m in _TOKENS.finditer(text, start, end)]
        for avoid in (pieces, []):
            cut = top
            while cut > floor and (any(a < cut < b for a, b in avoid) or not (
                    self._reopens_at(cut, run) and self._ends_clean(pos, cut, "`" * run))):
                cut -= 1
            if cut > floor:
                return cut, "`" * run, False, run
        # no place in it closes and reopens cleanly (its lines read as fences when cut): cut it
        # raw where neither side reads as a fence, as the last resort
        far = pos + 1
        while far < len(text) and self.w(pos, far + 1) <= room:
            far += 1
        cut = next((c for c in range(far, pos, -1) if not _joined(text, c) and self._starts_clean(c)
                    and self._ends_clean(pos, c, "")), far)
        return cut, "", False, 0

    def _starts_clean(self, cut: int) -> bool:
        """A chunk starting at `cut` does not open with a line that reads as a fence."""
        eol = self.text.find("\n", cut)
        return fence_of(self.text[cut : len(self.text) if eol < 0 else eol], self.limit) is None

    def _ends_clean(self, pos: int, cut: int, suffix: str) -> bool:
        """The last line of a chunk from `pos` to `cut`, closed with `suffix`, is no fence."""
        start = max(pos, self.text.rfind("\n", 0, cut) + 1)
        return fence_of(self.text[start:cut] + suffix, self.limit) is None

    def _reopens_at(self, cut: int, run: int) -> bool:
        """A span of `run` backticks can be closed before `cut` and reopened after it."""
        text = self.text
        if _joined(text, cut) or "`" in text[cut - 1 : cut + 1] or "\n" in text[cut - 1 : cut + 1]:
            return False
        if text[cut - 1] == "\r" or text[cut] == "\r":
            return False
        eol = text.find("\n", cut)
        return fence_of("`" * run + text[cut : len(text) if eol < 0 else eol], self.limit) is None


def split_chunks(text: str, limit: int, *, languages: bool = True) -> list[Chunk]:
    """Split `text` into chunks of at most `limit` units: fences balanced in each, no code span,
    mention or emoji cut that fits in a chunk, nothing lost. `languages=False` (Slack, which
    has none) reopens a fence without its language."""
    if limit < MIN_LIMIT:
        raise ValueError(f"limit {limit} is too small to split into (minimum {MIN_LIMIT})")
    return _Splitter(text, limit, languages).chunks()
