"""A reply laid out by a block platform's rules, in the core (`core.commands.block_messages`)."""

from __future__ import annotations

from core.commands.block_messages import Layout, Rules, laid_out, sections, split_lines
from core.commands.messages import Button, Reply
from core.redaction import Redactor
from core.render import Rendered, format_of
from core.splitting import fit

RULES = Rules(section=10, upload_over=40, sections=3, fallback=12, value=8, option_value=4,
              unescape=lambda text: text.replace("&amp;", "&"))
FMT = format_of("slack")  # its sentences: the note of an upload


class Kept:
    def value(self, command: str, limit: int) -> str:
        return command if len(command) <= limit else "ref:1"


def _layout(chunks: tuple[str, ...], *, attach: bool, whole: bool = True) -> Layout:
    reply = Reply("status", run_id="r1", buttons=(Button("Go", "go r1"), Button("Long", "x" * 9)))
    text = Rendered("\n".join(chunks), chunks, whole)
    return laid_out(reply, text, FMT, RULES, Redactor(()), Kept(), attach=attach)  # type: ignore[arg-type]


def test_lines_are_split_within_the_limit_and_empty_parts_dropped() -> None:
    assert split_lines("aaaa\nbbbbbbbbbbbb", 10) == ["aaaa", "bbbbbbbbbb", "bb"]
    assert split_lines("aaaa\n\n", 4) == ["aaaa"]  # what is left is blank: dropped
    assert sections(["", "ccc"], 10) == ["ccc"]


def test_a_short_reply_shows_every_section_and_its_buttons_carry_their_values() -> None:
    layout = _layout(("hello", "world &amp; more"), attach=True)
    assert layout.sections == ("hello", "world &amp", "; more")
    assert layout.fallback == fit("hello\nworld &amp; more", 12)
    assert [b.command for b in layout.buttons] == ["go r1", "ref:1"]
    assert layout.upload is None and layout.note is None


def test_a_reply_too_long_shows_its_first_chunk_and_uploads_the_whole_text_when_it_may() -> None:
    chunks = ("first", "x" * 50)
    shown = _layout(chunks, attach=True)
    assert shown.sections == ("first",)
    assert shown.upload == "first\n" + "x" * 50 and shown.filename == "status-r1.txt"
    assert shown.note
    kept = _layout(chunks, attach=False)
    assert kept.sections == ("first",) and kept.upload is None and kept.note is None
    assert _layout(("a", "b"), attach=True, whole=False).upload == "a\nb"
