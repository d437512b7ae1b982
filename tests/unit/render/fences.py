"""CommonMark backtick fences, read independently of `core.splitting`, for its tests."""

from __future__ import annotations

import re


def fences_balanced(chunk: str, longest: int = 10**9) -> bool:
    """CommonMark backtick fences, checked independently of the splitter: every block opened in
    the chunk is closed in it, and only by a run at least as long as its opener. A run longer
    than `longest` is text (the splitter's rule: a quarter of the limit)."""
    open_run = 0
    for line in chunk.split("\n"):
        if open_run:
            close = re.fullmatch(r" {0,3}(`{3,})[ \t]*", line)
            if close and open_run <= len(close.group(1)) <= longest:
                open_run = 0
        else:
            opener = re.fullmatch(r" {0,3}(`{3,})[^`]*", line)
            if opener and len(opener.group(1)) <= longest:
                open_run = len(opener.group(1))
    return open_run == 0


def outside_fences(text: str) -> list[tuple[int, int]]:
    """Offsets of the text outside fenced blocks (same grammar as above)."""
    spans, open_run, start, pos = [], 0, 0, 0
    for line in text.split("\n"):
        end = pos + len(line) + 1
        if open_run:
            close = re.fullmatch(r" {0,3}(`{3,})[ \t]*", line)
            if close and len(close.group(1)) >= open_run:
                open_run, start = 0, end
        else:
            opener = re.fullmatch(r" {0,3}(`{3,})[^`]*", line)
            if opener:
                spans.append((start, pos))
                open_run = len(opener.group(1))
        pos = end
    if not open_run:
        spans.append((start, len(text)))
    return spans


def wide_code_spans(text: str, limit: int) -> list[tuple[int, int]]:
    """Offsets of inline code spans opened by two or more backticks (CommonMark: closed by a run
    of the same length) that are wider than `limit`: a single-backtick command inside one is
    code text, not a command, and such a span must be cut somewhere."""
    span = re.compile(r"(?<!`)(`{2,})(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)
    return [(m.start(), m.end()) for m in span.finditer(text) if m.end() - m.start() > limit]


def paragraphs(text: str) -> list[tuple[int, int]]:
    """Offsets of the paragraphs outside fenced blocks, as CommonMark delimits them for inline
    code: a blank line ends one, a fence line ends one, a heading, quote or list line starts a
    new one, and a heading or a break (---, ***, ===) is a paragraph of its own."""
    starts = re.compile(r" {0,3}(#{1,6}([ \t]|$)|>|[-+*]([ \t]|$)|\d{1,9}[.)]([ \t]|$))")
    alone = re.compile(r" {0,3}(#{1,6}([ \t].*)?|(-[ \t]*){3,}|(\*[ \t]*){3,}|(_[ \t]*){3,}|=+[ \t]*)")
    found: list[tuple[int, int]] = []
    for start, end in outside_fences(text):
        pos, current = start, None
        for line in text[start:end].split("\n"):
            stop = pos + len(line) + 1
            bare = line.rstrip("\r")
            if not bare.strip() or re.fullmatch(r" {0,3}`{3,}[^`]*", bare):
                current = None
            elif current is None or starts.match(bare) or alone.fullmatch(bare):
                found.append((pos, min(stop, end)))
                current = len(found) - 1
                if alone.fullmatch(bare):
                    current = None
            else:
                found[current] = (found[current][0], min(stop, end))
            pos = stop
    return found
