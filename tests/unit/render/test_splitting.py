"""The splitter over random markdown: every chunk within the limit, fences balanced per chunk,
nothing lost, and no command, mention or emoji cut when it fits in a chunk."""

from __future__ import annotations

import itertools
import re
from itertools import accumulate

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.splitting import Chunk, code_spans, split_chunks, width
from tests.unit.render.fences import fences_balanced, outside_fences, paragraphs, wide_code_spans

COMMANDS = [f"/workflow run deploy --set n={n}" for n in range(5)] + ["/workflow resume 3f9a1c2b"]
MENTIONS = ["<@U123ABC>", "<#C42|ops>", "@everyone", "<@1234567890>"]
EMOJI = ["😀", "👩\u200d👩\u200d👧", "👍🏽", "❤️", "1\ufe0f\u20e3"]
FENCES = ["```", "````", "```py", "`````text", "~~~"]


_piece = st.one_of(
    st.sampled_from(["\n", "\n\n", "word", "*bold*", "_it_", "# head", "> quote", "||spoiler||"]),
    st.sampled_from([f"\n{f}\n" for f in FENCES]),  # fences, stray or not
    st.sampled_from(["```", "````", "x```", "\n   ```"]),  # backticks glued to text
    st.sampled_from(["`", "``", "y`", "`\n", "\\`"]),  # backticks that pair across lines, or not
    st.sampled_from([f"`{c}`" for c in COMMANDS]),
    st.sampled_from(MENTIONS + EMOJI),
    st.integers(1, 3500).map(lambda n: "`" + "x" * n + "`"),  # long inline code
    st.integers(1, 9000).map(lambda n: "y" * n),  # a long one-line output
    st.text(alphabet=st.characters(blacklist_characters="`", blacklist_categories=("Cs",)), max_size=40),
)
_markdown = st.lists(_piece, max_size=60).map(" ".join)


# a ```` opener whose first code line is too wide to start in the chunk it ends
_WIDE_FIRST_LINE = " ".join(["`/workflow resume 3f9a1c2b`", "y" * 561, "\n````\n", "`" + "x" * 147 + "`"])


@settings(max_examples=300, deadline=None)
@given(text=_markdown, limit=st.sampled_from([200, 257, 2000, 3000]))
@example(text=_WIDE_FIRST_LINE, limit=200)
@example(text=" ".join(["````", "word", "word", "<@U123ABC>", "y" * 472, "\n\n"]), limit=257)
# one span over three lines, and a span "`\n `" that leaves the command's backticks as text
@example(text="x" * 170 + " `/workflow run\ndeploy --set\nn=1` and more words.\n", limit=200)
@example(text=" ".join(["`\n", "`" + "x" * 196 + "`"]), limit=200)
# a span "``` ```` \n   ```" that fits, but a chunk ending right after it would end on a
# line that reads as a fence: the chunk ends later, before the command, not inside it
@example(text=" ".join(["```", "````", "\n   ```", "`" + "x" * 206 + "`", f"`{COMMANDS[0]}`"]), limit=257)
# a span as wide as the chunk, then a span "``` \n <@U…> ```" that cannot close and reopen but
# around the mention in it (ending before it would start the next chunk with a fence)
@example(text=" ".join(["`" + "x" * 1979 + "`", "```", "\n", "<@U123ABC>", "```"]), limit=2000)
# a short span over two lines that opens on the chunk's second line (the first is inside an
# earlier span): the chunk ends before it, not inside it (found by this test at random)
@example(text=" ".join(["`", "\n", "word", "*bold*", "```", "```", "````", f"`{COMMANDS[0]}`",
                        "`" + "x" * 180 + "`", "000000\n\U00010000\U00010000", "`"]), limit=257)
def test_split_random_markdown(text: str, limit: int) -> None:
    chunks = split_chunks(text, limit)
    assert "".join(c.body for c in chunks) == text  # no character lost
    cuts, offset = set(), 0
    for chunk in chunks:
        assert width(chunk.text) <= limit
        assert fences_balanced(chunk.text, limit // 4), chunk.text
        offset += len(chunk.body)
        cuts.add(offset)
    outside = outside_fences(text)
    spans = paired_spans(text)
    wide = wide_code_spans(text, limit) + [(a, b) for a, b, _ in spans if width(text[a:b]) > limit]
    whole_pieces = [f"`{c}`" for c in COMMANDS] + MENTIONS
    for piece in whole_pieces:
        for match in re.finditer(re.escape(piece), text):
            inside_wide = any(a < match.start() and match.end() < b for a, b in wide)
            if piece.startswith("`") and not any((a, b) == match.span() for a, b, _ in spans):
                continue  # its backticks pair with others (across lines): not a command span
            if not piece.startswith("`") and any(a < match.start() and match.end() < b and any(
                    a < cut < b for cut in cuts) for a, b, _ in spans):
                continue  # inside a code span the split had to cut (its chunk is not whole): code text
            if not inside_wide and any(a <= match.start() and match.end() <= b for a, b in outside):
                assert not any(match.start() < cut < match.end() for cut in cuts), (piece, limit)
    for emoji in EMOJI:
        for match in re.finditer(re.escape(emoji), text):
            assert not any(match.start() < cut < match.end() for cut in cuts), emoji
    assert_spans_whole_or_reopened(text, chunks, limit)


def paired_spans(text: str) -> list[tuple[int, int, int]]:
    """The inline code spans of `text` (offsets, backticks), paired across the lines of their
    paragraph as CommonMark pairs them."""
    return [(start + a, start + b, run) for start, end in paragraphs(text)
            for a, b, run in code_spans(text[start:end])]


def assert_spans_whole_or_reopened(text: str, chunks: list[Chunk], limit: int) -> None:
    """Every inline code span, paired across the lines of its paragraph, is whole in one chunk
    when it fits in one; else each cut inside it closes it and reopens it with its backticks,
    and says so. (A span of three or more backticks over lines, or a paragraph with a line that
    starts with such a run, may leave no place that keeps fences balanced and the span closed:
    the cut still says so.)"""
    ends = list(accumulate(len(c.body) for c in chunks))
    for start, end in paragraphs(text):
        fence_like = re.search(r"(^|\n) {0,3}```", text[start:end]) is not None
        for a, b, run in code_spans(text[start:end]):
            a, b = start + a, start + b
            for i, cut in enumerate(ends[:-1]):
                if a < cut < b:
                    assert not chunks[i].whole, chunks[i]
                    if not fence_like and run < 3:
                        assert width(text[a:b]) > limit, (text[a:b], limit)
                        assert chunks[i].suffix == chunks[i + 1].prefix == "`" * run, chunks[i : i + 2]


@settings(max_examples=100, deadline=None)
@given(commands=st.lists(st.sampled_from(COMMANDS), min_size=1, max_size=80),
       limit=st.sampled_from([2000, 3000]))
def test_every_command_is_whole_in_one_chunk(commands: list[str], limit: int) -> None:
    text = "\n".join(f"{i}. Option {i}: `{c}` (" + "é" * (i * 13 % 90) + ")" for i, c in enumerate(commands))
    for chunk in split_chunks(text, limit):
        assert chunk.whole
        for span in re.findall(r"`([^`]*)`", chunk.text):
            assert span in COMMANDS  # whole, exactly as typed


def test_stray_short_fence_does_not_close_a_longer_one() -> None:
    output = "\n".join("```" if i % 5 == 0 else f"# not a heading {i} ||x||" for i in range(400))
    text = "Output:\n````\n" + output + "\n````\nafter"
    chunks = split_chunks(text, 2000)
    assert len(chunks) > 2
    for chunk in chunks[1:]:
        assert chunk.prefix == "````\n" or chunk.body.startswith("after")
    for chunk in chunks[:-1]:
        assert chunk.suffix.endswith("````")


def test_long_one_line_output_never_shows_an_empty_code_block() -> None:
    text = "Output:\n```\n" + "z" * 9000 + "\n```\nDone."
    chunks = split_chunks(text, 2000)
    for chunk in chunks:
        blocks = re.findall(r"```\n(.*?)\n?```", chunk.text, re.DOTALL)
        assert blocks and all(b.strip() for b in blocks), chunk.text[:40]


def test_a_chunk_never_ends_on_a_fence_opened_for_a_line_that_does_not_fit() -> None:
    chunks = split_chunks(_WIDE_FIRST_LINE, 200)
    assert "".join(c.body for c in chunks) == _WIDE_FIRST_LINE
    for chunk in chunks:
        assert width(chunk.text) <= 200, chunk
        assert fences_balanced(chunk.text, 50), chunk.text
        assert not chunk.body.endswith("````\n"), chunk  # no empty block left behind
    opened = next(c for c in chunks if "````" in c.body)
    assert opened.body.startswith("````\n `x") and opened.suffix == "\n````"  # opener with its code


def test_a_fence_cut_at_a_line_end_closes_without_an_extra_newline() -> None:
    # an opener whose info string is wider than a chunk, then an unclosed block
    text = " ".join(["````", "word", "word", "<@U123ABC>", "y" * 472, "\n\n"])
    chunks = split_chunks(text, 257)
    assert "".join(c.body for c in chunks) == text
    for chunk in chunks:
        assert width(chunk.text) <= 257, chunk
        assert fences_balanced(chunk.text, 257 // 4), chunk.text
        assert not (chunk.body.endswith("\n") and chunk.suffix.startswith("\n")), chunk


def test_a_run_of_backticks_too_long_to_be_a_fence_is_not_cut_into_one() -> None:
    # 17 backticks are text at a limit of 64; cut after 1, the rest (16) would open a fence
    text = "`" + "x" * 44 + "` \n" + "`" * 17 + " " + "y" * 30
    chunks = split_chunks(text, 64)
    assert "".join(c.body for c in chunks) == text
    for chunk in chunks:
        assert width(chunk.text) <= 64, chunk
        assert fences_balanced(chunk.text, 64 // 4), chunk.text
    assert [c.body for c in chunks] == [text[:48], text[48:]]  # the line moves whole


@pytest.mark.parametrize("close", ["```", "````"])
def test_an_opener_wider_than_a_chunk_is_cut_in_its_text_not_in_the_close(close: str) -> None:
    # "```py" then a long info string and the close: never cut inside the close line
    text = " ".join(["\n```py", "😀" * 217, "<@U123ABC>", f"\n{close}\n"])
    chunks = split_chunks(text, 64)
    assert "".join(c.body for c in chunks) == text
    for chunk in chunks:
        assert width(chunk.text) <= 64, chunk
        assert fences_balanced(chunk.text, 64 // 4), chunk.text
    assert chunks[-1].body.endswith(f"{close}\n") and chunks[-1].suffix == ""


def test_a_code_line_no_cut_of_which_is_content_moves_whole() -> None:
    # 17 backticks are content in a ````` block at a limit of 64; any cut of them would close it
    text = "\n`````text " + "y" * 30 + " \n" + "`" * 17 + "\n"
    chunks = split_chunks(text, 64, languages=False)
    assert "".join(c.body for c in chunks) == text
    for chunk in chunks:
        assert width(chunk.text) <= 64, chunk
        assert fences_balanced(chunk.text, 64 // 4), chunk.text
    assert chunks[-1].body == "`" * 17 + "\n" and chunks[-1].prefix == "`````\n"


def test_a_code_span_whose_backticks_could_not_be_reopened_is_text() -> None:
    # a span opened by 50 backticks at a limit of 64: closing and reopening it takes 100
    text = "\n" + "`" * 50 + " " + "`" * 50 + "\n"
    chunks = split_chunks(text, 64, languages=False)
    assert "".join(c.body for c in chunks) == text
    assert all(width(c.text) <= 64 and not c.prefix and not c.suffix for c in chunks)


def test_utf16_units_are_counted() -> None:
    text = "😀" * 1500  # 3,000 units, 1,500 characters
    chunks = split_chunks(text, 2000)
    assert len(chunks) == 2 and all(width(c.text) <= 2000 for c in chunks)


def test_a_code_span_wider_than_a_chunk_is_closed_reopened_and_flagged() -> None:
    text = "run: `" + "c" * 4500 + "` ok"
    chunks = split_chunks(text, 2000)
    assert "".join(c.body for c in chunks) == text
    assert not all(c.whole for c in chunks)
    for chunk in chunks:
        assert chunk.text.count("`") % 2 == 0


def test_slack_reopens_without_a_language() -> None:
    text = "```python\n" + "\n".join(f"x = {i}" for i in range(600)) + "\n```"
    chunks = split_chunks(text, 3000, languages=False)
    assert chunks[1].prefix == "```\n"
    assert split_chunks(text, 3000)[1].prefix == "```python\n"


def test_too_small_a_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="too small"):
        split_chunks("x", 10)


def test_a_code_span_over_lines_that_fits_moves_whole() -> None:
    # CommonMark pairs the backticks across the two soft breaks: one span, 30 units wide
    text = "x" * 30 + " `/workflow run\ndeploy --set\nn=1` and then some more words here.\n"
    chunks = split_chunks(text, 64)
    assert [c.body for c in chunks] == [text[:31], text[31:]]
    assert all(c.whole and not c.prefix and not c.suffix for c in chunks)


def test_a_code_span_over_lines_wider_than_a_chunk_is_closed_and_reopened() -> None:
    text = "run: `" + "c" * 50 + "\n" + "d" * 50 + "\n" + "e" * 50 + "` ok"
    chunks = split_chunks(text, 64)
    assert "".join(c.body for c in chunks) == text
    assert not all(c.whole for c in chunks)
    for before, after in itertools.pairwise(chunks):
        assert width(before.text) <= 64
        if before.suffix:  # cut inside the span: closed here, reopened there, never at a break
            assert before.suffix == after.prefix == "`"
            assert not before.body.endswith("\n") and not after.body.startswith("\n")
    for chunk in chunks:
        assert chunk.text.count("`") % 2 == 0, chunk


def test_backticks_across_a_blank_line_do_not_pair() -> None:
    text = "x" * 40 + " `b\n\nc` " + "y" * 40
    chunks = split_chunks(text, 64)
    assert [c.body for c in chunks] == [text[: text.index("c")], text[text.index("c") :]]
    assert all(not c.prefix and not c.suffix for c in chunks)


@pytest.mark.parametrize("between", ["```\nc` d\n```\n", "# c` d\n", "> c` d\n", "- c` d\n"])
def test_backticks_across_a_fence_or_a_block_start_do_not_pair(between: str) -> None:
    # paired, "`b … e`" would be one span too wide for a chunk, cut with reopened backticks
    text = "x" * 40 + " `b\n" + between + "e` " + "y" * 40
    chunks = split_chunks(text, 64)
    assert "".join(c.body for c in chunks) == text
    assert all(c.whole and not c.prefix and not c.suffix for c in chunks), chunks
    assert all(c.body.endswith("\n") for c in chunks[:-1])  # cut at line ends only
