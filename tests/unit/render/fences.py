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
