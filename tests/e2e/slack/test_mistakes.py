"""Mistyped commands and awkward text, as Slack delivers them: the asking user alone gets one
line of cause and one of next step; quotes and backticks survive into the suggested command."""

from __future__ import annotations

import pytest

from core.commands.parser import parse
from core.config import Access
from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import ANA, BOB
from tests.e2e.slack.steps import FAILED, PROMPT, command, failed_run, posts, wait_in_thread

TRICKY = 'he said "ship it" \\ then `rm -rf /` and <!channel>'


def _shell_single_quoted(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("run nope", "no workflow named `nope`"),
        ("run flaky --args {bad", "is not valid JSON"),
        ("run flaky --args @nohandle", "is not an args handle"),
        ("resume zzzz", "zzzz"),
        ("frobnicate", "unknown command `frobnicate`"),
        ("run flaky --args '" + "[" * 3000 + "]" * 3000 + "'", "levels"),
    ],
)
async def test_a_mistake_is_told_privately_in_two_lines(e2e: SlackE2E, text: str, cause: str) -> None:
    mark = await command(e2e, text)

    told = await e2e.mock.wait_call("chat.postEphemeral", after=mark)

    assert told.body["user"] == ANA and cause in told.text
    section = told.body["blocks"][0]["text"]["text"] if told.body.get("blocks") else told.body["text"]
    assert len([line for line in section.splitlines() if line.strip()]) == 2, section
    await e2e.settle()
    assert posts(e2e, "Started") == [] and e2e.baton.store.runs.recent_runs(platform="slack") == []


async def test_quotes_backticks_and_pings_survive_into_option_3(e2e: SlackE2E) -> None:
    await failed_run(e2e)
    mark = await command(e2e, f"run flaky {_shell_single_quoted(TRICKY)}")
    prompt = await e2e.mock.wait_call("chat.postMessage", PROMPT, after=mark)

    force = prompt.button("force")["value"]
    assert parse(force).message == TRICKY  # type: ignore[attr-defined]
    assert "<!channel>" not in prompt.text and "&lt;!channel&gt;" in prompt.text  # never pings

    mark = len(e2e.mock.calls)
    answer = await e2e.slack.click(prompt, "force")
    assert answer.status == 200
    started = await e2e.mock.wait_call("chat.postMessage", "Started", after=mark)
    assert started.ts is not None
    await wait_in_thread(e2e, started.ts, FAILED, after=mark)  # flaky fails here: it ran, with that input
    fresh = e2e.baton.store.runs.recent_runs(platform="slack")[0]
    assert e2e.baton.engine.args_of(fresh)["message"] == TRICKY


@pytest.mark.parametrize("access", [Access(run={"*": [f"slack:{ANA}"]})])
async def test_a_refusal_names_both_people_by_name_and_the_audit_keeps_their_ids(e2e: SlackE2E) -> None:
    run = await failed_run(e2e)
    mark = await command(e2e, f"abandon {run.run_id}", user=BOB)

    told = await e2e.mock.wait_call("chat.postEphemeral", after=mark)

    assert told.body["user"] == BOB
    assert f"name-of-{BOB} may not abandon run {run.run_id}: it belongs to name-of-{ANA}." in told.text
    assert "slack:" not in told.text
    [refused] = [e for e in e2e.baton.store.events.audit_log(run.run_id) if e.action == "refused"]
    assert refused.actor == f"slack:{BOB}"
    reason = f"slack:{BOB} may not abandon run {run.run_id}: it belongs to slack:{ANA}."
    assert refused.details["reason"] == reason
    assert e2e.baton.store.runs.get_run(run.run_id).status == "failed"  # nothing was abandoned
