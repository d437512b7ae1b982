"""DESIGN.md's five acceptance cases through `baton say` (subprocess), on SQLite and PostgreSQL."""

from __future__ import annotations

from core.commands.model import RunCommand
from core.commands.parser import parse
from tests.e2e.console.cli import BatonCli, button, final_status, prompts, run_ids

FIXED_FLAKY = """\
name: flaky
description: Echo the message, fixed so that it no longer fails
nodes:
  - id: check
    bash: echo checked
    replay: pure
  - id: echo
    depends_on: [check]
    bash: echo got {{ inputs.message }}
    replay: pure
"""


def failed_run(baton: BatonCli, message: str = "A fail") -> str:
    replies = baton.say(f'run flaky "{message}"')
    assert final_status(replies) == "failed", replies
    (run_id,) = run_ids(replies)
    return run_id


def test_1_a_fresh_run_with_a_failed_run_prompts_and_executes_nothing(baton_any_db: BatonCli) -> None:
    baton = baton_any_db
    failed = failed_run(baton)

    replies = baton.say('run flaky "B"')

    (prompt,) = prompts(replies)
    assert button(prompt, f"resume {failed}")
    assert button(prompt, f"run flaky --replace {failed} B")  # abandon it, then run "B"
    force = button(prompt, "run flaky --force")["command"]
    assert parse(force) == RunCommand(workflow="flaky", message="B", force=True)  # "B" survives
    assert force in prompt["text"]  # copyable, not only a button
    assert [r.id for r in baton.runs()] == [failed]  # nothing executed
    assert baton.run_record(failed).status == "failed"


def test_2_force_starts_a_fresh_run_and_leaves_the_failed_one(baton_any_db: BatonCli) -> None:
    baton = baton_any_db
    failed = failed_run(baton)
    before = baton.run_record(failed)

    replies = baton.say('run flaky --force "B"')

    assert prompts(replies) == []
    (fresh,) = run_ids(replies)
    assert fresh != failed
    assert final_status(replies) == "completed"
    assert baton.args_of(baton.run_record(fresh))["message"] == "B"
    after = baton.run_record(failed)
    assert (after.status, after.version) == (before.status, before.version)


def test_3_abandon_cancels_the_failed_run_and_the_next_run_does_not_prompt(baton_any_db: BatonCli) -> None:
    baton = baton_any_db
    failed = failed_run(baton)

    baton.say(f"abandon {failed}")
    assert baton.run_record(failed).status == "cancelled"

    replies = baton.say('run flaky "B"')
    assert prompts(replies) == []
    assert final_status(replies) == "completed"
    assert len(run_ids(replies) - {failed}) == 1


def test_4_a_reply_approves_the_paused_gate_and_the_run_continues(baton_any_db: BatonCli) -> None:
    baton = baton_any_db
    started = baton.say('run gated "v1"')
    assert final_status(started) == "paused"
    (paused,) = run_ids(started)

    replies = baton.say("lgtm")

    assert prompts(replies) == []
    assert run_ids(replies) == {paused}
    assert final_status(replies) == "completed"
    assert [r.id for r in baton.runs()] == [paused]  # no fresh run


def test_5_resume_continues_that_run_without_prompt_or_fresh_run(baton_any_db: BatonCli) -> None:
    baton = baton_any_db
    failed = failed_run(baton)
    (baton.workflows / "flaky.yaml").write_text(FIXED_FLAKY)  # the fix takes effect on resume

    replies = baton.say(f"resume {failed}")

    assert prompts(replies) == []
    assert run_ids(replies) == {failed}
    assert final_status(replies) == "completed"
    assert [r.id for r in baton.runs()] == [failed]
    assert baton.args_of(baton.run_record(failed))["message"] == "A fail"  # its own input
