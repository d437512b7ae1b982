"""`baton list`, `migrate` and `worker`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from sqlalchemy.engine import make_url

from core.store.database import open_engine
from core.store.migration import HEAD_REVISION, upgrade
from tests.e2e.console.cli import REPO, BatonCli, final_status, run_ids


def test_list_shows_every_workflow_with_its_file_and_a_broken_file_with_its_error(baton: BatonCli) -> None:
    (baton.workflows / "broken.yaml").write_text("name: broken\nnodes: [\n  - id: a\n")

    done = baton.run("list", "--json")

    assert done.returncode == 0, done.stderr
    rows = {row["path"].rsplit("/", 1)[-1]: row for row in json.loads(done.stdout)}
    assert rows["flaky.yaml"]["name"] == "flaky" and rows["flaky.yaml"]["error"] is None
    assert rows["gated.yaml"]["name"] == "gated"
    assert rows["broken.yaml"]["error"] and "broken.yaml" in rows["broken.yaml"]["error"]

    text = baton.run("list").stdout
    assert "flaky" in text and "ERROR" in text


def test_list_in_chat_still_lists_the_others_when_one_file_is_broken(baton: BatonCli) -> None:
    (baton.workflows / "broken.yaml").write_text("name: broken\nnodes: [\n")

    (reply,) = baton.say("list")

    assert "flaky" in reply["text"] and "gated" in reply["text"]
    assert "broken" in reply["text"]


def test_list_takes_workflow_directories_from_the_flag(baton: BatonCli) -> None:
    other = baton.home / "other"
    other.mkdir()
    (other / "solo.yaml").write_text("name: solo\nnodes:\n  - id: a\n    bash: echo a\n")

    done = baton.run("list", "--json", "--workflows", str(other))

    assert [row["name"] for row in json.loads(done.stdout)] == ["solo"]


def test_list_takes_the_database_url_as_every_command_does(baton: BatonCli) -> None:
    done = baton.run("list", "--json", "--database-url", f"sqlite:///{baton.home / 'other.db'}")
    assert done.returncode == 0, done.stderr
    assert "flaky" in [row["name"] for row in json.loads(done.stdout)]


def test_status_of_a_failed_run_shows_the_steps_whole_error(baton: BatonCli) -> None:
    said = baton.say('run flaky "please fail"')
    [run_id] = run_ids(said)
    assert final_status(said) == "failed"
    (status,) = baton.say(f"status {run_id}")
    assert "stderr ends with:\n" in status["text"] and "asked to fail" in status["text"], status["text"]
    assert not status["text"].rstrip().endswith("stderr ends with:")


def test_migrate_creates_the_schema_and_is_idempotent(new_baton: BatonCli) -> None:
    baton = new_baton
    first = baton.run("migrate")
    second = baton.run("migrate")

    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    assert baton.runs() == []  # the schema exists and is queryable
    assert first.stdout.startswith(f"Created the schema of database {baton.database_url}")
    assert "was already at the newest schema" in second.stdout and "nothing to do" in second.stdout


def test_migrate_says_what_it_upgraded(new_baton: BatonCli) -> None:
    baton = new_baton
    engine = open_engine(make_url(baton.database_url))
    try:
        upgrade(engine, "0005")  # a database an older Baton left behind
    finally:
        engine.dispose()

    done = baton.run("migrate")

    assert done.returncode == 0, done.stderr
    said = done.stdout.strip()
    assert said == f"Upgraded database {baton.database_url} from revision 0005 to {HEAD_REVISION}."


def test_worker_without_the_procrastinate_executor_exits_2_naming_the_setting(baton: BatonCli) -> None:
    done = baton.run("worker")

    assert done.returncode == 2
    assert "BATON_EXECUTOR is `local`" in done.stderr
    assert "Set BATON_EXECUTOR=procrastinate" in done.stderr


SHIPPED = Path(__file__).resolve().parents[3] / "workflows"  # the example workflows and their tools.py


def test_started_from_another_directory_the_tools_next_to_the_workflows_are_found(baton: BatonCli) -> None:
    baton.env_extra["BATON_WORKFLOW_DIRS"] = str(SHIPPED)  # started outside the project

    rows = {row["name"]: row for row in json.loads(baton.run("list", "--json").stdout)}
    (paused,) = run_ids(baton.say("run deploy --set service=web"))
    approved = baton.say(f"approve {paused}")

    assert rows["deploy"]["error"] is None and rows["release-notes"]["error"] is None
    assert final_status(approved) == "completed", approved  # `deploy_service` ran after the approval


def test_list_reports_a_missing_tool_module_and_an_unregistered_tool(baton: BatonCli) -> None:
    (baton.workflows / "ship.yaml").write_text("name: ship\nnodes:\n  - id: go\n    tool: ship_it\n")
    rows = {row["name"]: row for row in json.loads(baton.run("list", "--json").stdout)}
    assert "`go` calls `ship_it`" in rows["ship"]["error"] and rows["flaky"]["error"] is None

    baton.env_extra["BATON_TOOL_MODULES"] = "ops/tools.py"
    done = baton.run("list")

    assert done.returncode == 0
    [line] = [line for line in done.stdout.splitlines() if line.startswith("ship ")]
    assert "ERROR tool module ops/tools.py was not found (looked in " in line


def test_a_run_calling_an_unregistered_tool_is_refused_before_anything_runs(baton: BatonCli) -> None:
    (baton.workflows / "ship.yaml").write_text(
        "name: ship\nnodes:\n  - id: ask\n    approval: Ship?\n  - id: go\n    depends_on: [ask]\n"
        "    tool: ship_it\n")

    (refusal,) = baton.say("run ship")

    assert refusal["is_error"] and "`go` calls `ship_it`" in refusal["text"]
    assert baton.runs() == []  # no gate was opened for a step that could never run


def test_the_shipped_quorum_example_without_baton_access_says_nobody_can_approve_it(baton: BatonCli) -> None:
    for shipped in ("deploy-quorum.yaml", "tools.py"):  # as `make run` has them: no BATON_ACCESS
        shutil.copy(REPO / "workflows" / shipped, baton.workflows)
    assert "BATON_ACCESS" not in baton.env()

    done = baton.run("list")
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stdout.splitlines() if "can never be approved" in line]
    said = ("The gate review of deploy-quorum can never be approved: it needs 2 distinct approvers of "
            "group:sre, group:leads, which have no members, and 0 may vote: define them in BATON_ACCESS")
    assert said in line
    rows = {row["name"]: row for row in json.loads(baton.run("list", "--json").stdout)}
    assert rows["deploy-quorum"]["warnings"] == [line.strip()] and rows["gated"]["warnings"] == []
    (listed,) = baton.say("list")  # in chat too
    assert "Its gate review can never be approved: it needs 2 distinct approvers of group:sre" \
        in listed["text"]

    started = baton.say("run deploy-quorum --set service=web")  # the gate message says so as well
    gate = next(r for r in started if r["kind"] == "gate_waiting")
    assert "⚠️ Nobody can ever approve this gate: it needs 2 distinct approvers of group:sre, group:leads, " \
           "which have no members, and 0 may vote: define them in BATON_ACCESS" in gate["text"]


def test_list_shows_a_workflow_naming_a_variable_of_batons_environment_as_broken(
    baton: BatonCli, tmp_path: Path
) -> None:
    (baton.workflows / "steal.yaml").write_text(
        "name: steal\nnodes:\n  - id: a\n    secrets: [PGPASSWORD]\n    bash: echo $PGPASSWORD\n"
    )
    (baton.workflows / "listed.yaml").write_text(
        "name: listed\nsecrets: [DEPLOY_TOKEN, NPM_TOKEN]\nnodes:\n  - id: a\n    bash: 'true'\n"
    )
    secrets = tmp_path / "step-secrets.env"
    secrets.write_text("NPM_TOKEN=npm-value-1\n")
    baton.env_extra.update(PGPASSWORD="batons-own-db-password", DEPLOY_TOKEN="dep-value-1",
                           BATON_STEP_SECRETS="DEPLOY_TOKEN", BATON_SECRETS_FILE=str(secrets))

    rows = {row["name"]: row for row in json.loads(baton.run("list", "--json").stdout)}

    assert rows["listed"]["error"] is None  # one from BATON_STEP_SECRETS, one from the file
    assert rows["steal"]["error"].endswith(
        "steal.yaml:4: secret `PGPASSWORD` is not a step secret the operator provides; a workflow "
        "may name only those (never a variable of Baton's own environment)"
    )
    assert "BATON_STEP_SECRETS" in rows["steal"]["hint"]
    (reply,) = baton.say("run steal")  # and it never runs
    assert "PGPASSWORD" in reply["text"] and "batons-own-db-password" not in reply["text"]
    assert baton.runs() == []


DEPLOY = """\
name: deploy-typed
inputs:
  version: {type: string, required: true}
  replica_count: {type: integer, default: 3}
nodes:
  - id: show
    bash: printf 'v%s x%s' {{ inputs.version }} {{ inputs.replica_count }}
"""


def test_a_misspelled_input_is_refused_with_a_did_you_mean_not_kept_as_a_free_field(baton: BatonCli) -> None:
    """`--set replicas=5` would have run with the default 3 replicas: it asks for the real name."""
    (baton.workflows / "deploy-typed.yaml").write_text(DEPLOY)

    for typed, meant in (("version=1.4 --set replicas=5", "replica_count"), ("versoin=1.4", "version")):
        (refused,) = baton.say(f"run deploy-typed --set {typed}")
        assert refused["kind"] == "error", refused
        assert f"did you mean `{meant}`?" in str(refused["text"])
    (scheduled,) = baton.say("schedule add deploy-typed every 1h --set version=2 --set replicas=5")
    assert "did you mean `replica_count`?" in str(scheduled["text"]), scheduled
    assert baton.runs() == [] and "No schedules" in str(baton.say("schedule list")[0]["text"])

    done = baton.say("run deploy-typed --set version=1.4 --set replica_count=5 --set notes=hi")
    assert final_status(done) == "completed" and "v1.4 x5" in str(done[-1]["text"])


def test_a_database_url_baton_cannot_open_stops_it_with_one_line_not_a_traceback(baton: BatonCli) -> None:
    for url in ("notaurl", "sqlite://relative.db"):  # both were tracebacks from deep in the start
        baton.database_url = url
        done = baton.run("say", "runs")
        assert done.returncode == 2, (url, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        assert "error: BATON_DATABASE_URL: " in done.stderr and "sqlite:///" in done.stderr


def test_a_run_whose_workflow_file_is_gone_says_so_and_how_to_go_on(baton: BatonCli) -> None:
    """Resume, plan or approve a run after its file was removed or renamed: not "no workflow
    named …" (as if it were typed wrong) but what happened, and abandon still works."""
    (baton.workflows / "gone.yaml").write_text(
        "name: gone\nnodes:\n  - {id: a, approval: ok?}\n  - {id: b, depends_on: [a], bash: echo b}\n"
    )
    (run_id,) = run_ids(baton.say("run gone"))
    (baton.workflows / "gone.yaml").rename(baton.workflows / "gone.yaml.bak")

    for command in (f"plan {run_id}", f"approve {run_id}", "lgtm"):
        (said,) = baton.say(command)
        assert said["kind"] == "error", (command, said)
        text = str(said["text"])
        assert f"run {run_id} is a run of `gone`, which no workflow file defines any more" in text, text
        assert f"/workflow abandon {run_id}" in text
    assert baton.run_record(run_id).status == "paused"
    baton.say(f"abandon {run_id}")
    assert baton.run_record(run_id).status == "cancelled"


def test_a_run_whose_workflow_now_needs_an_input_says_resume_keeps_its_arguments(baton: BatonCli) -> None:
    """`resume` was told "pass it with --set", which it does not take; now the way on is a new
    run that re-uses its results, and that way works."""
    first = "  - {id: a, bash: echo a, replay: pure}\n"
    failing = "  - {id: b, depends_on: [a], bash: exit 3}\n"
    (baton.workflows / "grows.yaml").write_text(f"name: grows\nnodes:\n{first}{failing}")
    failed = baton.say("run grows")
    assert final_status(failed) == "failed"
    (run_id,) = run_ids(failed)
    (baton.workflows / "grows.yaml").write_text(
        "name: grows\ninputs:\n  version: {type: string, required: true}\nnodes:\n"
        f"{first}  - id: b\n    depends_on: [a]\n    bash: echo {{{{ inputs.version }}}}\n"
    )

    (said,) = baton.say(f"resume {run_id}")
    text = str(said["text"])
    said_why = f"run {run_id}'s arguments no longer fit `grows`: input `version` is required (string)"
    assert said_why in text, text
    assert "pass it with" not in text and f"/workflow run grows --resume-from {run_id} --set …" in text
    done = baton.say(f"run grows --resume-from {run_id} --set version=1.2")
    assert final_status(done) == "completed" and "1.2" in str(done[-1]["text"])
