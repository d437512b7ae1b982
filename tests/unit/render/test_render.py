from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.discord.formatting import discord_escape
from adapters.slack.formatting import slack_escape, slack_text
from core.commands import replies
from core.commands.messages import Reply
from core.commands.replies import KINDS
from core.engine.events import NodeState, NodeSummary, RunSummary
from core.errors import GateAlreadyDecided
from core.redaction import Redactor
from core.render import (
    TEMPLATES,
    code_block,
    code_span,
    format_of,
    platforms,
    render,
    split_chunks,
    width,
)
from core.splitting import code_spans
from tests.unit.commands.samples import every_reply_kind, make_gate, make_run, make_summary
from tests.unit.render.fences import fences_balanced

PLATFORMS = platforms()  # every platform with a format of its own, as installed

PLAIN = Redactor(())  # these tests are about templates; redaction has its own

NASTY = 'a *b* _c_ <!channel> <@U9ZZ> @everyone @here `x` ``y`` & "q" \\ [l](http://e) ```'


def test_every_kind_has_a_template_on_every_platform() -> None:
    built = {r.kind for r in every_reply_kind()}
    assert built == set(KINDS)
    for platform in PLATFORMS:
        for kind in KINDS:
            assert (TEMPLATES / platform / f"{kind}.j2").is_file(), (platform, kind)


@pytest.mark.parametrize("platform", [*PLATFORMS, "matrix"])
def test_every_reply_renders_and_keeps_user_text(platform: str) -> None:
    for reply in every_reply_kind("the-user-text-42"):
        chunks = render(reply, platform, PLAIN)
        assert chunks and all(c.strip() for c in chunks)
        if "the-user-text-42" in str(reply.data):
            assert "the-user-text-42" in "".join(chunks), reply.kind


def test_slack_never_lets_user_text_ping() -> None:
    for reply in every_reply_kind(NASTY):
        text = "".join(render(reply, "slack", PLAIN))
        assert "<!channel>" not in text and "<@U9ZZ>" not in text


def test_discord_escapes_markdown_and_leaves_mentions_without_zero_width_spaces() -> None:
    """Mentions in text show as written (names, no zero-width space): every Discord message is
    posted with AllowedMentions.none() (the e2e fake refuses any other), so none pings."""
    out = discord_escape(NASTY)
    assert "@everyone" in out and "@here" in out and "<@U9ZZ>" in out and "\u200b" not in out
    assert "\\*b\\*" in out and "\\_c\\_" in out and "\\[l\\]" in out
    assert discord_escape("# title\n> quote\n- item") == "\\# title\n\\> quote\n\\- item"
    for reply in every_reply_kind(NASTY):
        text = "".join(render(reply, "discord", PLAIN))
        code = [line[a:b] for line in text.split("\n") for a, b, _ in code_spans(line)]
        assert not any("\u200b" in c for c in code)  # code pastes back exactly as typed
        assert "\u200b" not in text


def test_slack_escape() -> None:
    assert slack_escape("a & <b> c") == "a &amp; &lt;b&gt; c"


def _commonmark_code_span_content(span: str) -> str:
    match = re.fullmatch(r"(`+)(.*?)\1", span, re.DOTALL)
    assert match is not None
    body = match.group(2)
    if len(body) >= 2 and body[0] == " " and body[-1] == " " and body.strip(" "):
        body = body[1:-1]
    return body


@given(st.text(alphabet=st.sampled_from("ab `\\\"x"), min_size=1))
def test_code_span_survives_backticks(text: str) -> None:
    span = code_span(text)
    fence = re.match(r"`+", span).group(0)  # type: ignore[union-attr]
    assert fence not in text
    if text.strip(" "):
        assert _commonmark_code_span_content(span) == text


def test_code_block_fence_is_longer_than_any_run() -> None:
    block = code_block("x ```` y")
    assert block.startswith("`````\n") and block.endswith("\n`````")


def _balanced(chunk: str, limit: int = 2000) -> bool:
    return fences_balanced(chunk, limit // 4)


_text = st.lists(
    st.one_of(st.sampled_from(["\n", "```", "```py\n", " ", "`", "a" * 40, "é", "😀"]), st.text(max_size=30)),
    max_size=200,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(text=_text, limit=st.sampled_from([100, 257, 2000, 3000]))
def test_split_chunks_within_limit_balanced_and_lossless(text: str, limit: int) -> None:
    chunks = split_chunks(text, limit)
    assert "".join(c.body for c in chunks) == text
    for chunk in chunks:
        assert width(chunk.text) <= limit
        assert _balanced(chunk.text, limit)


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=6000), platform=st.sampled_from(["slack", "discord"]))
def test_rendered_replies_respect_platform_limits(text: str, platform: str) -> None:
    reply = Reply(kind="error", data={"message": "```\n" + text, "hint": text})
    limit = format_of(platform).limit
    assert limit is not None
    for chunk in render(reply, platform, PLAIN):
        assert width(chunk) <= limit
        assert _balanced(chunk, limit)


def test_split_reopens_fence_with_language_and_loses_nothing() -> None:
    text = "intro\n```python\n" + "\n".join(f"x = {i}" for i in range(400)) + "\n```\nafter"
    chunks = split_chunks(text, 2000)
    assert len(chunks) > 1
    assert chunks[1].prefix == "```python\n" and chunks[0].suffix == "```"
    assert "".join(c.body for c in chunks) == text


def test_long_output_is_split_never_truncated() -> None:
    output = "\n".join(f"line {i}" for i in range(2000))
    reply = every_reply_kind(output)[18]  # run_completed with `output`
    assert reply.kind == "run_completed"
    joined = "".join(render(reply, "discord", PLAIN))
    assert "line 0\n" in joined and "line 1999" in joined
    assert render(reply, "console", PLAIN) == ["".join(render(reply, "console", PLAIN))]


def test_people_are_shown_by_name_without_a_ping() -> None:
    prompt = next(r for r in every_reply_kind("x") if r.kind == "fresh_run_prompt")

    def by(requester: str, platform: str, names: dict[str, str] | None = None) -> str:
        reply = dataclasses.replace(prompt, data={**prompt.data, "requester": requester})
        return "".join(render(reply, platform, PLAIN, names=names))

    # Slack: the name the adapter found, never a `<@U…>` mention (which would notify them)
    assert "started by Ana Lima)" in by("slack:U0ANA", "slack", {"slack:U0ANA": "Ana Lima"})
    assert "started by U0ANA)" in by("slack:U0ANA", "slack")  # no name known: the bare id, no ping
    # a name is untrusted text: it neither pings nor formats
    hostile = by("slack:U0ANA", "slack", {"slack:U0ANA": "<!channel> *boss*"})
    assert "started by &lt;!channel&gt; \u2217boss\u2217)" in hostile and "<!" not in hostile
    # Discord: a mention shows the name and pings nobody (the adapter allows no mention)
    assert "started by <@80351110224678912>" in by("discord:80351110224678912", "discord")
    assert "started by ana)" in by("console:ana", "console")  # the console: the plain name


def test_a_reminder_pings_the_approvers_it_waits_on_and_nothing_else_does() -> None:
    """Where a ping is the point (a reminder or escalation to the approvers it waits on, the
    "handled after a restart" notice to who typed the command), Slack mentions them for real
    and the reply lists them in `pings` (Discord allows exactly those); nowhere else."""
    names = {"slack:U0ANA": "Ana", "slack:U0BOB": "Bob"}
    for reply in every_reply_kind("x"):
        people = {"requester": "slack:U0ANA", "by": "slack:U0ANA"}
        reply = dataclasses.replace(reply, data={**reply.data, **people})
        text = "".join(render(reply, "slack", PLAIN, names=names))
        pinged = set(re.findall(r"<@(U[A-Z0-9]+)>", text))
        assert pinged == {p.removeprefix("slack:") for p in reply.pings}, (reply.kind, text)
    run = make_run(requester="slack:U0ANA")
    gate = make_gate(run)
    for make in (replies.gate_reminder, replies.gate_escalated):
        reply = make(run, gate, ["slack:U0BOB"], None)
        text = "".join(render(reply, "slack", PLAIN, names=names))
        assert reply.pings == ("slack:U0BOB",) and "<@U0BOB>" in text and "<@U0ANA>" not in text


@pytest.mark.parametrize(
    ("platform", "person"),
    [("console", "slack:U0ANA"), ("slack", "U0ANA"), ("discord", "slack:U0ANA")],
)
def test_an_error_naming_who_decided_renders_that_person_per_platform(platform: str, person: str) -> None:
    exc = GateAlreadyDecided(run_id="3f9a", node_id="review <x>", decision="approved", by="slack:U0ANA")
    reply = replies.error(exc)
    assert reply.data["message"] == exc.message  # the plain sentence stays for logs and --json
    [text] = render(reply, platform, PLAIN)
    assert text.splitlines()[0].endswith(f"already approved by {person}")
    assert ("&lt;x&gt;" in text) is (platform == "slack")  # the prose around the user is still escaped


def test_an_error_splits_around_every_mention_of_the_user() -> None:
    parts = replies.message_parts("discord:7 asked; discord:7 decided", ["discord:7", None])
    assert parts == [{"user": "discord:7"}, {"text": " asked; "}, {"user": "discord:7"}, {"text": " decided"}]
    [text] = render(Reply(kind="error", data={"message": "x", "hint": "h", "parts": parts}), "discord", PLAIN)
    assert text == "⚠️ <@7> asked; <@7> decided\nh"


STYLED = "*bold* _it_ ~gone~ ``` open > quote <@U0BOB> <!channel> 1. list"


def test_slack_text_keeps_user_text_from_formatting_the_message() -> None:
    shown = slack_text(STYLED)
    assert shown == ("\u2217bold\u2217 \u02cdit\u02cd \u223cgone\u223c \u02cb\u02cb\u02cb open &gt; quote "
                     "&lt;@U0BOB&gt; &lt;!channel&gt; 1. list")
    assert slack_text("> at the start\nthen > inside") == "\u00ad&gt; at the start\nthen &gt; inside"
    assert slack_text("deploy_prod a*b 2~3") == "deploy_prod a*b 2~3"  # inside a word: no style, unchanged
    assert slack_text("try `/workflow status 3f9a` now") == "try `/workflow status 3f9a` now"  # code stays


@given(st.text(alphabet=st.sampled_from("ab *_~`>\n&<"), max_size=40))
def test_slack_text_leaves_no_style_marker_outside_code(text: str) -> None:
    outside = re.sub(r"`[^`\n]+`", "", slack_text(text))
    assert "`" not in outside and "<" not in outside and ">" not in outside
    for match in re.finditer(r"[*_~]", outside):
        before = outside[match.start() - 1: match.start()]
        after = outside[match.end(): match.end() + 1]
        assert before.isalnum() and after.isalnum(), (text, outside)


@pytest.mark.parametrize("platform", ["slack", "discord"])
def test_quoted_user_text_never_formats_the_bots_message(platform: str) -> None:
    started = next(r for r in every_reply_kind(STYLED) if r.kind == "run_started")
    prompt = next(r for r in every_reply_kind(STYLED) if r.kind == "fresh_run_prompt")

    message = next(line for line in render(started, platform, PLAIN)[0].splitlines() if "Message:" in line)
    preview = next(line for line in render(prompt, platform, PLAIN)[0].splitlines() if "message:" in line)

    for line in (message, preview):
        # Slack: a mention would ping; Discord: shown as a name, never a ping (AllowedMentions.none())
        mentions = ("<@U0BOB>", "<!channel>") if platform == "slack" else ()
        for raw in ("*bold*", "_it_", "~gone~", "```", *mentions):
            assert raw not in line, (platform, line)
    if platform == "discord":
        assert "\\*bold\\*" in message and "\\`\\`\\`" in message  # escaped: shown, not applied


def test_discord_escapes_a_numbered_list() -> None:
    assert discord_escape("1. first\n 2. second") == "1\\. first\n 2\\. second"


def test_compiled_reply_templates_come_back_from_the_bytecode_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new process (here: a new environment) loads the compiled templates instead of
    compiling them again, and renders exactly the same; a cache that cannot be written or
    read (a full disk) costs a compile, never a reply."""
    import tempfile

    from jinja2 import Environment

    from core.render import environment, render_text

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # jinja2's cache lives under it
    compiled: list[str] = []
    original = Environment._compile

    def counting(self: Environment, source: str, filename: str) -> object:
        compiled.append(filename)
        return original(self, source, filename)

    monkeypatch.setattr(Environment, "_compile", counting)
    replies = list(every_reply_kind("cached"))
    environment.cache_clear()
    try:
        first = [render_text(r, "slack", PLAIN) for r in replies]
        assert compiled and any(tmp_path.glob("_jinja2-cache-*/__jinja2_*.cache"))
        compiled.clear()
        environment.cache_clear()
        assert [render_text(r, "slack", PLAIN) for r in replies] == first
        assert compiled == []  # every template came from the cache

        for entry in tmp_path.glob("_jinja2-cache-*/*"):
            entry.write_bytes(b"not bytecode")
        environment.cache_clear()
        assert [render_text(r, "slack", PLAIN) for r in replies] == first
    finally:
        environment.cache_clear()


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_gates_policy_state_says_when_only_people_may_decide_it(platform: str) -> None:
    (counted,) = [r for r in every_reply_kind() if r.kind == "vote_counted"]
    assert "people only" in "".join(render(counted, platform, PLAIN))
    state = {k: v for k, v in counted.data["state"].items() if k != "humans_only"}
    quiet = dataclasses.replace(counted, data={**counted.data, "state": state})
    assert "people only" not in "".join(render(quiet, platform, PLAIN))


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_map_node_is_one_progress_line_with_its_item_counts(platform: str) -> None:
    run = make_run()
    row = NodeSummary("deploy", "bash", NodeState.RUNNING, mapped="37/50 · 2 failed · 4 running")
    summary = RunSummary(run.id, run.workflow, "running", (row,))
    text = "".join(render(replies.progress(run, summary), platform, PLAIN))
    [line] = [line for line in text.splitlines() if "deploy" in line]
    assert line.endswith("37/50 · 2 failed · 4 running")


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_line_ending_in_a_block_tag_keeps_its_line_break(platform: str) -> None:
    """`trim_blocks` eats the line break after `{% endif %}`: the progress header (whose
    schedule clause ends in one) and each `notify:` rule of a subscription list stay lines of
    their own, with or without the clause."""
    run = make_run()
    for started_by in (None, "schedule:nightly"):
        progress = replies.progress(run.evolve(started_by=started_by), make_summary("running"))
        header = render(progress, platform, PLAIN)[0].splitlines()[0]
        assert "release-notes" in header or "r-0123456789abcdef" in header[:200]
        assert not any(node in header for node in ("collect", "draft", "publish")), header
    rules = [{"workflow": "wf-one", "events": ["failed"], "when": "{{ x }}"},
             {"workflow": "wf-two", "events": ["failed"], "when": ""},
             {"workflow": "wf-three", "events": ["failed"], "when": ""}]
    text = "".join(render(replies.subscriptions("slack", "C0OPS", [], rules), platform, PLAIN))
    lines = text.splitlines()
    for name in ("wf-one", "wf-two", "wf-three"):
        assert sum(name in line for line in lines) == 1
        assert not any(name in line and other in line for line in lines
                       for other in ("wf-one", "wf-two", "wf-three") if other != name)
