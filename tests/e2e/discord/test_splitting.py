"""Long replies on Discord (the fake refuses content over 2,000 UTF-16 units, as Discord does):
no code block left empty, no command cut, and every command whole where the user can copy it."""

from __future__ import annotations

import re

from core.commands.parser import parse as parse_command
from core.splitting import code_spans
from tests.e2e.discord.harness import DiscordBot

LONG_MESSAGE = " ".join(f"word{i:04d}" for i in range(330))  # about 3,000 characters


def _blocks(content: str) -> list[str]:
    return re.findall(r"^(`{3,})[^\n]*\n(.*?)\n?^\1$", content, re.DOTALL | re.MULTILINE)


async def test_a_9000_character_line_shows_no_empty_code_block(bot: DiscordBot) -> None:
    _, thread, run = await bot.start("run longline")
    assert run.status == "completed"

    sent = await bot.fake.wait_for(lambda calls: [
        c for c in calls if c.path == f"channels/{thread}/messages" and "completed in" in c.content])
    for call in sent:
        blocks = _blocks(call.content)
        assert blocks and all(body.strip("z\n") == "" and "z" in body for _, body in blocks), call.content
    attached = "".join(f.decode() for c in sent for f in c.files.values())
    assert "z" * 9000 in attached  # the whole line, in the file next to the message


async def test_a_long_prompt_keeps_every_command_whole(bot: DiscordBot) -> None:
    _, _, failed = await bot.start('run flaky "A fail"')
    assert failed.status == "failed"

    (prompt,) = await bot.answers(bot.command(f'run flaky "{LONG_MESSAGE}"'))

    for line in prompt.content.splitlines():  # what is shown: no command half in code
        for a, b, _ in code_spans(line):
            span = line[a:b].strip("`")
            assert not span.startswith("/workflow run") or span.endswith('"'), span
    (attached,) = prompt.files.values()  # a command wider than a message: the file has it whole
    lines = attached.decode().splitlines()
    commands = [line[a:b].strip("`") for line in lines for a, b, _ in code_spans(line)]
    forced = [c for c in commands if c.startswith("/workflow run flaky --force")]
    assert forced and parse_command(forced[0].removeprefix("/workflow ")).message == LONG_MESSAGE  # type: ignore[attr-defined]
