"""The message a run's thread gets when the run comes to rest, as Slack receives it: what ran,
what came from the cache and why, time and tokens; or the failing step, its error and what next."""

from __future__ import annotations

import re

from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.steps import COMPLETED, FAILED, start


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
