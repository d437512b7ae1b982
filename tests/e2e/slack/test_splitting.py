"""Long replies on Slack (the mock refuses a section over 3,000 characters, more than 50 blocks,
a button value over 2,000, as Slack does): no empty code block, every command whole somewhere
the user can copy it."""

from __future__ import annotations

import re

from core.commands.parser import parse as parse_command
from core.splitting import code_spans
from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.mock_slack import Call
from tests.e2e.slack.steps import COMPLETED, FAILED, PROMPT, command, start

LONG_MESSAGE = " ".join(f"word{i:04d}" for i in range(330))  # about 3,000 characters


def _sections(call: Call) -> list[str]:
    return [b["text"]["text"] for b in call.body.get("blocks") or [] if b.get("type") == "section"]


async def test_a_9000_character_line_shows_no_empty_code_block(e2e: SlackE2E) -> None:
    run = await start(e2e, "run longline", rests_with=COMPLETED)

    for section in _sections(run.rest):
        for body in re.findall(r"^```\n(.*?)\n?^```$", section, re.DOTALL | re.MULTILINE):
            assert body.strip(), section
    assert "".join(_sections(run.rest)).count("z") == 9000  # all of it, nothing cut or lost


async def test_a_long_prompt_keeps_every_command_whole(e2e: SlackE2E) -> None:
    await start(e2e, 'run flaky "A fail"', rests_with=FAILED)

    mark = await command(e2e, f'run flaky "{LONG_MESSAGE}"')
    prompt = await e2e.mock.wait_call("chat.postMessage", PROMPT, after=mark)

    await e2e.mock.wait_call("files.completeUploadExternal", after=mark)
    (uploaded,) = [data.decode() for data in e2e.mock.uploads.values() if data]
    commands = [line[a:b].strip("`") for line in uploaded.splitlines() for a, b, _ in code_spans(line)]
    forced = [c for c in commands if c.startswith("/workflow run flaky --force")]
    assert forced and parse_command(forced[0].removeprefix("/workflow ")).message == LONG_MESSAGE  # type: ignore[attr-defined]
    assert "attached" in prompt.text  # the message says where the whole text is
    assert prompt.button("force")["value"].startswith("ref:")  # the button runs it whole too
