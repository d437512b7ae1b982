"""`BATON_ACCESS` through the real `baton` command: a mistake stops it at start (exit 2, one
line naming the key and the fix); a partial one refuses what it does not grant; an unset one
lets everyone in, and `baton run` says so in its log when a chat platform is on."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.console.cli import CALL_TIMEOUT, BatonCli
from tests.e2e.process import BatonProcess, free_port
from tests.e2e.slack.mock_slack import MockSlack
from tests.unit.bot.test_settings import ACCESS_MISTAKES


@pytest.mark.parametrize(("value", "line"), ACCESS_MISTAKES)
def test_baton_run_stops_at_start_on_each_access_mistake(baton: BatonCli, value: str, line: str) -> None:
    baton.env_extra["BATON_ACCESS"] = value
    done = subprocess.run(
        [sys.executable, "-m", "bot.main", "run"], cwd=baton.home, env=baton.env(), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=CALL_TIMEOUT, check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [done.stderr.strip()], "one line"
    assert done.stderr.startswith(f"error: {line}")
    assert done.stdout == ""  # nothing served, nothing ran


def _refused(replies: list[dict[str, object]]) -> bool:
    """One error reply refusing the user (nothing was done)."""
    if [r["kind"] for r in replies] != ["error"]:
        return False
    return any(words in str(replies[0]["text"]) for words in ("may not run", "not an approver"))


def test_a_partial_access_refuses_what_it_does_not_grant(baton: BatonCli) -> None:
    baton.env_extra["BATON_ACCESS"] = (
        '{"admins": ["console:root"], "groups": {"ops": ["console:ana"]}, "run": {"gated": ["group:ops"]}}'
    )
    [started, *_] = baton.say("run gated v1", user="ana")
    run_id = started["run_id"]
    assert baton.run_record(run_id).status == "paused"

    assert _refused(baton.say("run notes x", user="ana"))  # run grants `gated` only
    assert _refused(baton.say("run gated v2", user="bob"))  # bob is in no group
    for user in ("bob", "ana"):  # no `approve` section: nobody but admins decides a gate
        assert _refused(baton.say(f"approve {run_id}", user=user))
        assert _refused(baton.say("lgtm", user=user))
    assert baton.run_record(run_id).status == "paused"

    decided = baton.say(f"approve {run_id}", user="root")
    assert decided[0]["kind"] == "gate_decided"
    assert baton.run_record(run_id).status == "completed"


@pytest.mark.parametrize("access", [None, '{"run": {"*": ["slack:U0ANA"]}}'])
async def test_baton_run_warns_at_start_when_everyone_may_approve(
    baton: BatonCli, access: str | None
) -> None:
    slack = MockSlack()  # the Web API `auth.test` is asked of at start (no network needed)
    await slack.start()
    baton.env_extra.update(
        BATON_SLACK_BOT_TOKEN="xoxb-not-a-real-token", BATON_SLACK_SIGNING_SECRET="not-a-real-secret",
        BATON_WEB_PORT=str(free_port()), BATON_SLACK_API_URL=slack.base_url, BATON_SUPERVISE="false",
        BATON_LOG_LEVEL="INFO", **({"BATON_ACCESS": access} if access else {}),
    )
    try:
        process = await BatonProcess.start(baton.env(), cwd=baton.home)
        try:
            await process.wait_log("slack listening on port")
        finally:
            await process.stop()
    finally:
        await slack.stop()
    log = process.output
    warned = [line for line in log.splitlines() if "action=access_open" in line]
    if access is None:
        assert len(warned) == 1 and "level=WARNING" in warned[0]
        assert "everyone on slack may run every workflow and approve every gate" in warned[0]
    else:
        assert warned == []
