"""`baton say` beyond the five cases: escaping, preview, authorization, dedupe, errors."""

from __future__ import annotations

import json

import sqlalchemy as sa

from core.commands.parser import parse
from core.store.records import RunStatus
from core.store.repository import SqlStore
from tests.e2e.console.cli import BatonCli, button, final_status, prompts, run_ids
from tests.factories import create_run

TRICKY = 'he said "ship it" \\ then `rm -rf /` and \\"more\\"'


def shell_single_quoted(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def test_option_3_escapes_quotes_backslashes_and_backticks(baton: BatonCli) -> None:
    baton.say('run flaky "A fail"')

    (prompt,) = prompts(baton.say(f"run flaky {shell_single_quoted(TRICKY)}"))
    force = button(prompt, "run flaky --force ")["command"]
    assert force in prompt["text"]  # shown verbatim, code formatting intact
    assert parse(force).message == TRICKY  # type: ignore[attr-defined]

    replies = baton.say(force)  # pasted back verbatim
    (fresh,) = run_ids(replies)
    assert final_status(replies) == "completed"
    assert baton.args_of(baton.run_record(fresh))["message"] == TRICKY


def test_the_old_message_preview_is_cut_at_160_characters(baton: BatonCli) -> None:
    old = "fail " + "x" * 180 + " TAIL-NOT-SHOWN"
    baton.say(f'run flaky "{old}"')

    (prompt,) = prompts(baton.say('run flaky "B"'))

    assert old[:150] in prompt["text"]
    assert "TAIL-NOT-SHOWN" not in prompt["text"]
    assert "…" in prompt["text"]


def test_an_unauthorized_approver_is_refused_and_the_gate_keeps_waiting(baton: BatonCli) -> None:
    baton.env_extra["BATON_ACCESS"] = json.dumps({"run": {"*": ["*"]}, "approve": {"*": ["console:ana"]}})
    (paused,) = run_ids(baton.say('run gated "v1"', user="ana"))

    refused = baton.say("lgtm", user="bob")

    assert refused and all(r["is_error"] or r["kind"] != "run_finished" for r in refused)
    (refusal,) = [r for r in refused if r["is_error"]]
    assert refusal["text"].startswith("⚠️ Sorry, bob is not an approver of `gated`.")  # bob by name
    assert baton.run_record(paused).status == "paused"
    assert final_status(baton.say("lgtm", user="ana")) == "completed"


def test_a_duplicated_event_is_handled_once(baton: BatonCli) -> None:
    first = baton.say('run flaky "once"', event_id="evt-42")
    second = baton.say('run flaky "once"', event_id="evt-42")

    assert final_status(first) == "completed"
    assert second == []
    assert len(baton.runs()) == 1


def test_without_wait_only_immediate_replies_but_the_run_still_comes_to_rest(baton: BatonCli) -> None:
    replies = baton.say('run gated "v2"', wait=False)

    (run_id,) = run_ids(replies)
    assert all(r["replace_key"] is None or r["run_status"] != "paused" for r in replies)
    assert baton.run_record(run_id).status == "paused"  # driven to rest, not orphaned
    assert baton.run_record(run_id).lease_owner is None


def test_an_unknown_workflow_is_one_error_with_a_suggestion(baton: BatonCli) -> None:
    (reply,) = baton.say("run flakey")

    assert reply["is_error"] is True
    assert "flaky" in reply["text"]
    assert baton.runs() == []


def test_a_missing_required_input_is_asked_for_before_anything_runs(baton: BatonCli) -> None:
    (reply,) = baton.say("run needs-version")

    assert reply["kind"] == "input_form" and reply["buttons"] == []  # the console has no forms:
    assert "Type: /workflow run needs-version --set version=…" in reply["text"]  # it says what to type
    assert "version (string)" in reply["text"]
    assert baton.runs() == []


def test_a_required_input_given_with_set_runs(baton: BatonCli) -> None:
    replies = baton.say("run needs-version --set version=1.2.3")

    assert final_status(replies) == "completed"


def test_text_output_prints_the_rendered_replies(baton: BatonCli) -> None:
    done = baton.run("say", "--conversation", "ops", "--user", "ana", "--wait", "run gated v3")

    assert done.returncode == 0, done.stderr
    assert "gated" in done.stdout
    assert "[1]" in done.stdout  # the gate's buttons as numbered choices


def test_usage_errors_of_say_itself_exit_2(baton: BatonCli) -> None:
    assert baton.run("say").returncode == 2
    assert baton.run("say", "--bogus", "status").returncode == 2


def test_a_wrong_setting_is_one_line_naming_the_variable_and_exit_2(baton: BatonCli) -> None:
    baton.env_extra["BATON_MAX_PARALLEL"] = "0"

    done = baton.run("say", "status")

    assert done.returncode == 2
    first, hint = done.stderr.strip().splitlines()
    assert first == "error: BATON_MAX_PARALLEL: Input should be greater than or equal to 1 (got '0')"
    assert hint


def test_a_database_a_newer_baton_migrated_is_one_line_and_exit_2_for_every_command(baton: BatonCli) -> None:
    # an older Baton started again after a newer one migrated the database (a rollback)
    assert baton.run("migrate").returncode == 0
    store = SqlStore(baton.database_url)
    try:
        with store._engine.begin() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = '0099_newer'"))
    finally:
        store.close()

    for command in (("say", "status"), ("migrate",)):
        done = baton.run(*command)

        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        lines = [line for line in done.stderr.splitlines() if "level=" not in line]
        assert lines[0].startswith(
            "error: the database of BATON_DATABASE_URL is at schema revision `0099_newer`")
        assert len(lines) == 2 and "newer Baton" in lines[1]


def _runs_in_db(baton: BatonCli, count: int, *, status: RunStatus = RunStatus.FAILED) -> list[str]:
    """Runs of `notes` written straight to the database (another Baton's, as far as `say` knows)."""
    baton.run("migrate")
    store = SqlStore(baton.database_url)
    try:
        digest = store.blobs.put_blob(b"{}")
        return [create_run(store, workflow="notes", platform="console", conversation="ops", thread=None,
                           requester="console:ana", args_digest=digest, status=status,
                           lease_owner="elsewhere:1:x", lease_seconds=3600).id
                for _ in range(count)]
    finally:
        store.close()


def test_unknown_and_ambiguous_run_ids_are_handled_with_json_and_exit_0(baton: BatonCli) -> None:
    ids = _runs_in_db(baton, 17)  # 17 ids over 16 hex digits: two share their first character
    shared = next(i[0] for i in ids if sum(j[0] == i[0] for j in ids) > 1)
    # a prefix no run has (the ids are random: a fixed one, "97", matched a run now and then)
    absent = next(p for p in (f"{n:02x}" for n in range(256)) if not any(i.startswith(p) for i in ids))

    texts = ("status zzzz", f"resume {absent}", "args nope", "run notes --args-from x", f"status {shared}")
    for text in texts:
        (reply,) = baton.say(text)  # exit 0, a JSON array: handled
        assert reply["is_error"] and reply["kind"] == "error", (text, reply)


def test_a_refused_resume_does_not_wait_for_someone_elses_run(baton: BatonCli) -> None:
    (running,) = _runs_in_db(baton, 1, status=RunStatus.RUNNING)  # held by another process for an hour

    (refusal,) = baton.say(f"resume {running}")  # within the call's timeout, far below an hour

    assert refusal["is_error"] and "is already running" in refusal["text"]
    assert baton.run_record(running).status is RunStatus.RUNNING


def test_a_data_or_database_directory_that_is_a_file_is_one_line_and_exit_2(baton: BatonCli) -> None:
    in_the_way = baton.home / "in-the-way"
    in_the_way.write_text("a file, not a directory\n")

    baton.env_extra["BATON_DATA_DIR"] = str(in_the_way)
    data = baton.run("say", "run notes v1")
    baton.env_extra.pop("BATON_DATA_DIR")
    baton.env_extra["BATON_DATABASE_URL"] = f"sqlite:///{in_the_way}/baton.db"
    database = [baton.run("say", "status"), baton.run("migrate")]

    for done, setting in ((data, "BATON_DATA_DIR"), *((d, "BATON_DATABASE_URL") for d in database)):
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        lines = [line for line in done.stderr.splitlines() if "level=" not in line]
        assert lines[0] == (
            f"error: {setting}: cannot create the directory {in_the_way} (a file is in the way)")
        assert len(lines) == 2 and lines[1].startswith(f"Point {setting} at ")
    assert in_the_way.read_text() == "a file, not a directory\n"


def test_a_workflow_directory_that_is_a_file_or_missing_is_named_not_a_traceback(baton: BatonCli) -> None:
    not_a_dir = baton.home / "workflows.yaml"
    not_a_dir.write_text("name: x\n")
    baton.env_extra["BATON_WORKFLOW_DIRS"] = f'["{not_a_dir}", "{baton.home / "nowhere"}"]'

    said = baton.run("say", "list")
    listed = baton.run("list")

    assert said.returncode == 0, said.stderr
    assert "Traceback" not in said.stderr
    assert f"workflow directory {not_a_dir} is not a directory; skipping it" in said.stderr
    assert listed.returncode == 0, listed.stderr
    nowhere = baton.home / "nowhere"
    expected = f"No workflows found in {not_a_dir} (not a directory), {nowhere} (it does not exist)."
    assert expected in listed.stdout
