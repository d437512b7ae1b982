"""What a new user reads from `baton say`: commands typed without the prefix, the summary after
a resume, `plan`'s words and title, refusals that name who acted, the audit and `help`."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.console.cli import BatonCli, final_status, run_ids

TWO = """\
name: two
nodes:
  - id: first
    bash: echo first
    replay: pure
  - id: second
    depends_on: [first]
    bash: test -f {{ inputs.marker }} && echo second
    replay: pure
"""


def failed_two(baton: BatonCli, marker: Path) -> str:
    """A run of `two` whose `second` step failed (its marker file does not exist yet)."""
    (baton.workflows / "two.yaml").write_text(TWO)
    replies = baton.say(f"run two --set marker={marker}")
    assert final_status(replies) == "failed", replies
    (run_id,) = run_ids(replies)
    return run_id


def text_of(replies: list[dict[str, object]], kind: str) -> str:
    (reply,) = [r for r in replies if r["kind"] == kind]
    return str(reply["text"])


def test_after_a_resume_ran_lists_only_what_this_attempt_ran(baton: BatonCli) -> None:
    marker = baton.workflows / "marker"  # where a step can look (the sandbox shows its workflow dir)
    run_id = failed_two(baton, marker)
    marker.write_text("fixed")

    done = text_of(baton.say(f"resume {run_id}"), "run_completed")

    ran = next(line for line in done.splitlines() if line.startswith("Ran:"))
    assert "second" in ran and "first" not in ran, done


def test_plan_explains_a_failed_step_and_names_people_by_name(baton: BatonCli, tmp_path: Path) -> None:
    run_id = failed_two(baton, tmp_path / "marker")
    baton.say(f"invalidate {run_id} first")

    plan = text_of(baton.say(f"plan {run_id}"), "plan")

    lines = {line.split()[1]: line for line in plan.splitlines()[1:]}
    assert lines["first"].endswith("runs — invalidated by ana"), plan  # not console:ana
    assert lines["second"].endswith("runs — earlier attempt failed"), plan  # not "if upstream … changes"
    assert plan.startswith("Plan for resuming two run")


def test_plan_of_a_completed_run_is_not_titled_as_a_resume(baton: BatonCli) -> None:
    (run_id,) = run_ids(baton.say("run notes hello"))

    plan = text_of(baton.say(f"plan {run_id}"), "plan")

    assert "resuming" not in plan
    assert plan.startswith(f"Plan of notes run {run_id}, completed: what it holds. It cannot be resumed")
    assert f"/workflow run notes --resume-from {run_id}" in plan


def test_audit_shows_the_command_that_started_the_run(baton: BatonCli, tmp_path: Path) -> None:
    run_id = failed_two(baton, tmp_path / "marker")

    audit = text_of(baton.say(f"audit {run_id}"), "audit")

    command = next(line for line in audit.splitlines() if " command " in line)
    assert f"run two --set marker={tmp_path / 'marker'}" in command and "ana" in command


def test_commands_typed_with_a_leading_force_are_commands(baton: BatonCli) -> None:
    baton.say('run flaky "A fail"')  # an unfinished run: without --force the next run would ask

    leading = baton.say('--force run flaky "B"')
    valued = baton.say('run flaky "C" --force=true')

    assert [final_status(leading), final_status(valued)] == ["completed", "completed"]


def test_abandoning_a_cancelled_run_says_who_cancelled_it(baton: BatonCli) -> None:
    baton.env_extra["BATON_ACCESS"] = '{"admins": ["console:bob"], "run": {"*": ["*"]}}'
    (run_id,) = run_ids(baton.say('run flaky "A fail"'))
    baton.say(f"abandon {run_id}")

    (refusal,) = baton.say(f"abandon {run_id}", user="bob")

    assert refusal["is_error"]
    assert f"run {run_id} is already cancelled (cancelled by ana); there is nothing to abandon" in str(
        refusal["text"])


def test_help_abandon_names_every_status_it_accepts(baton: BatonCli) -> None:
    (reply,) = baton.say("help abandon")

    assert "failed, paused, needs_attention or running" in str(reply["text"])
