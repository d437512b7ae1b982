"""What `baton say --wait` tells when a run comes to rest: a completion says what ran, what came
from the cache and why, the time and the tokens used and saved; a failure names the failing
step, the tail of its error and the commands to go on with."""

from __future__ import annotations

import re
from typing import Any

from tests.e2e.console.cli import BatonCli, run_ids


def _rest(replies: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [reply] = [r for r in replies if r["kind"] == kind]
    return reply


def test_completion_then_a_resume_from_it_served_from_the_cache(baton: BatonCli) -> None:
    first = _rest(baton.say('run notes "v1"'), "run_completed")
    text = first["text"]
    assert re.search(r"completed in \d", text)
    assert "Ran: collect (no earlier result), draft (no earlier result)" in text
    used = int(re.search(r"Tokens: (\d+) used, 0 saved", text).group(1))  # type: ignore[union-attr]
    assert used > 0

    again = _rest(baton.say(f'run notes --resume-from {first["run_id"]} "v1"'), "run_completed")
    assert "Ran: nothing" in again["text"]
    assert re.search(r"From cache: collect \([^)]+\), draft \([^)]+\)", again["text"])
    assert f"Tokens: 0 used, {used} saved by the cache." in again["text"]


def test_a_failure_names_the_step_its_error_and_what_to_do_next(baton: BatonCli) -> None:
    replies = baton.say('run flaky "please fail"')
    (run_id,) = run_ids(replies)
    failed = _rest(replies, "run_failed")

    assert "failed at check" in failed["text"]
    assert "asked to fail" in failed["text"]  # the tail of the step's stderr
    commands = [f"resume {run_id}", f"plan {run_id}", f"abandon {run_id}"]
    assert all(f"/workflow {command}" in failed["text"] for command in commands)
    assert [b["command"] for b in failed["buttons"]] == commands
