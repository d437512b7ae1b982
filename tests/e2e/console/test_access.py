"""`BATON_ACCESS` through the real `baton` command: a mistake stops it at start (exit 2, one
line naming the key and the fix); a partial one refuses what it does not grant; an unset one
lets everyone in, and `baton run` says so in its log when a chat platform is on."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.console.cli import CALL_TIMEOUT, BatonCli, run_ids
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


def test_runs_a_user_may_not_see_answer_as_unknown_ids_from_another_conversation(baton: BatonCli) -> None:
    """Trying prefixes must not list other people's runs: from another conversation (an agent's,
    another channel) a run one may not view answers like an id nobody has, and a prefix lists
    only runs one may see. In the run's own conversation its thread shows it to everyone, so
    a refusal there may name it."""
    baton.env_extra["BATON_ACCESS"] = (
        '{"admins": ["console:root"], "run": {"gated": ["console:ana"], "notes": ["console:bob"]},'
        ' "approve": {"*": ["console:root"]}}'
    )
    hidden = [run_ids(baton.say(f"run gated v{i} --force", user="ana", conversation="ops")).pop()
              for i in range(12)]
    own = run_ids(baton.say("run notes mine", user="bob", conversation="dm-bob")).pop()
    unknown = next(f"{c}{c}{c}{c}" for c in "0123456789abcdef" if not any(
        r.startswith(c * 4) for r in [*hidden, own]))

    def answer(text: str) -> str:
        (reply,) = baton.say(text, user="bob", conversation="dm-bob", wait=False)
        return str(reply["text"])

    assert answer(f"status {hidden[0]}") == answer(f"status {unknown}").replace(unknown, hidden[0])
    for verb in ("abandon", "plan", "args", "audit", "open"):
        unseen = f"No run id starts with {hidden[0]}."
        assert unseen in answer(f"{verb} {hidden[0]}"), verb
    for prefix in {r[:1] for r in hidden}:  # ambiguous prefixes name only runs bob may see
        shown = answer(f"status {prefix}")
        assert not any(r in shown for r in hidden), shown
    assert f"{own}" in answer(f"status {own[:4]}")
    # in the run's own conversation, the refusal says what it is about
    (there,) = baton.say(f"abandon {hidden[0]}", user="bob", conversation="ops", wait=False)
    assert "may not abandon" in there["text"]


def test_an_approver_a_gate_names_may_read_the_run_it_decides(baton: BatonCli) -> None:
    """carol is named only in the gate's `approvers:` (no grant in BATON_ACCESS): she may vote,
    so she may also see what she decides, from wherever she asks."""
    (baton.workflows / "named.yaml").write_text(
        'name: named\nnodes:\n  - id: review\n'
        '    approval: {question: "Ship it?", approvers: ["console:carol"]}\n'
        "  - id: ship\n    depends_on: [review]\n    bash: echo shipped\n    replay: pure\n")
    baton.env_extra["BATON_ACCESS"] = '{"run": {"named": ["console:ana"]}}'
    run_id = run_ids(baton.say("run named", user="ana", conversation="ops")).pop()

    (status,) = baton.say(f"status {run_id}", user="carol", conversation="dm-carol", wait=False)
    (stranger,) = baton.say(f"status {run_id}", user="dave", conversation="dm-dave", wait=False)
    decided = baton.say(f"approve {run_id}", user="carol", conversation="dm-carol")

    assert not status["is_error"] and "review waiting" in status["text"], status["text"]
    assert stranger["is_error"]
    assert f"No run id starts with {run_id}." in stranger["text"]
    assert decided[0]["kind"] == "gate_decided" and baton.run_record(run_id).status == "completed"


def test_the_fresh_run_prompt_asks_only_about_runs_the_user_could_resume(baton: BatonCli) -> None:
    """bob's paused run is not one ana's new run would continue: she could neither resume nor
    abandon it, so she is not offered to; bob is."""
    baton.env_extra["BATON_ACCESS"] = (
        '{"admins": ["console:root"], "run": {"gated": ["console:ana", "console:bob"]},'
        ' "approve": {"*": ["console:root"]}}'
    )
    (bobs,) = run_ids(baton.say('run gated "bob"', user="bob"))

    ana = baton.say('run gated "ana"', user="ana", wait=False)
    again = baton.say('run gated "bob again"', user="bob", wait=False)

    assert [r["kind"] for r in ana][:1] == ["run_started"], ana
    assert again[0]["kind"] == "fresh_run_prompt" and bobs in again[0]["text"]
