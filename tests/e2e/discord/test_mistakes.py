"""Mistyped commands and awkward text, as Discord delivers them: the asking user alone gets one
line of cause and one of next step; quotes, backticks and mentions survive into option 3."""

from __future__ import annotations

import pytest

from core.commands.parser import parse as parse_command
from core.delivery.button_refs import command_of, parse
from core.splitting import code_spans
from tests.e2e.discord.harness import DiscordBot, custom_ids

TRICKY = 'he said "ship it" \\ then `rm -rf /` and @everyone'


def _span_content(span: str) -> str:
    """What a CommonMark code span shows (its backticks off, one padding space each side)."""
    inner = span.strip("`")
    return inner[1:-1] if len(inner) > 1 and inner[0] == inner[-1] == " " and inner.strip() else inner


def _shell_single_quoted(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("run nope", "no workflow named"),
        ("run flaky --args {bad", "is not valid JSON"),
        ("run flaky --args @nohandle", "is not an args handle"),
        ("resume zzzz", "zzzz"),
        ("frobnicate", "unknown command"),
        ("run flaky --args '" + "[" * 300 + "]" * 300 + "'", "levels"),
    ],
)
async def test_a_mistake_is_told_privately_in_two_lines(bot: DiscordBot, text: str, cause: str) -> None:
    (told,) = await bot.answers(bot.command(text))

    assert told.json["flags"] & 64  # ephemeral: only the one who typed it sees it
    assert cause in told.content
    assert len([line for line in told.content.splitlines() if line.strip()]) == 2, told.content
    assert bot.baton.store.runs.recent_runs(platform="discord") == []


async def test_quotes_backticks_and_mentions_survive_into_option_3(bot: DiscordBot) -> None:
    _, _, failed = await bot.start('run flaky "A fail"')
    assert failed.status == "failed"

    (prompt,) = await bot.answers(bot.command(f"run flaky {_shell_single_quoted(TRICKY)}"))

    assert prompt.json["allowed_mentions"] == {"parse": []}  # never pings, code or not
    shown = [_span_content(line[a:b]) for line in prompt.content.splitlines() for a, b, _ in code_spans(line)]
    typed = [c for c in shown if c.startswith("/workflow run flaky") and "--force" in c]
    assert typed and "\u200b" not in typed[0]  # option 3 as shown pastes back exactly
    assert parse_command(typed[0].removeprefix("/workflow ")).message == TRICKY  # type: ignore[attr-defined]
    (force,) = [cid for cid in custom_ids(prompt.json["components"]) if cid.startswith("baton:force:")]
    ref = parse(force)
    assert ref is not None
    command = command_of(ref, bot.baton.store.blobs.get_blob)
    assert parse_command(command).message == TRICKY  # type: ignore[attr-defined]

    mark = len(bot.fake.calls)
    bot.click(force)
    fresh, _ = await bot.thread_of_next_run(mark)
    run = await bot.rested(fresh)
    assert bot.baton.engine.args_of(run)["message"] == TRICKY
