"""The message a run's thread gets when the run comes to rest, as Slack receives it: what ran,
what came from the cache and why, time and tokens; or the failing step, its error and what next."""

from __future__ import annotations

import re

from core.commands.parser import parse
from core.commands.quoting import quote_word
from tests.e2e.slack import steps
from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.steps import COMPLETED, FAILED, PROMPT, start


async def test_completion_then_a_resume_from_it_served_from_the_cache(e2e: SlackE2E) -> None:
    first = await start(e2e, 'run notes "v1"', rests_with=COMPLETED)
    text = first.rest.text
    assert re.search(r"completed in \d", text)
    assert "Ran: *collect* (no earlier result), *draft* (no earlier result)" in text
    used = int(re.search(r"Tokens: (\d+) used, 0 saved", text).group(1))  # type: ignore[union-attr]
    assert used > 0

    again = await start(e2e, f'run notes --resume-from {first.run_id} "v1"', rests_with=COMPLETED)
    assert "Ran: nothing" in again.rest.text
    assert re.search(r"From cache: \*collect\* \([^)]+\), \*draft\* \([^)]+\)", again.rest.text)
    assert f"Tokens: 0 used, {used} saved by the cache." in again.rest.text


async def test_a_failure_names_the_step_its_error_and_what_to_do_next(e2e: SlackE2E) -> None:
    marker = e2e.tmp / "never-created"
    failed = await start(e2e, f'run flaky "x" --set marker={marker}', rests_with=FAILED)

    assert "failed at *check*" in failed.rest.text
    assert "step `check` exited with code 1" in failed.rest.text  # the tail of its error, in a code block
    for command in ("resume", "plan", "abandon"):
        assert f"`/workflow {command} {failed.run_id}`" in failed.rest.text
        assert failed.rest.button(command)["value"] == f"{command} {failed.run_id}"


async def test_a_quoted_message_cannot_format_the_bots_message_and_its_command_pastes_back(
    e2e: SlackE2E,
) -> None:
    styled = "*bold* _it_ ~gone~ ``` > <!channel>"
    marker = e2e.tmp / "never-created"
    failed = await start(e2e, f"run flaky {quote_word(styled)} --set marker={marker}", rests_with=FAILED)
    started = (await e2e.mock.wait_for(lambda calls: [
        c for c in calls
        if c.method == "chat.postMessage" and failed.run_id in c.text and "Message:" in c.text]))[0]
    mark = await steps.command(e2e, f"run flaky {quote_word('B *b*')}")
    prompt = await e2e.mock.wait_call("chat.postMessage", PROMPT, after=mark)

    quoted = [line for call in (started, prompt) for line in call.text.splitlines() if "essage: “" in line]
    assert len(quoted) == 4  # the fallback text and the section block of each message
    for line in quoted:
        for raw in ("*bold*", "_it_", "~gone~", "```", "<!channel>"):
            assert raw not in line, line
    force = prompt.button("force")["value"]
    assert parse(force) == parse(f"run flaky --force {quote_word('B *b*')}")  # the button runs it exactly
    assert f"`/workflow {force}`" in prompt.text  # and the text shows it whole, as code
