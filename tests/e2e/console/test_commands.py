"""`baton list`, `migrate` and `worker`."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy.engine import make_url

from core.store.database import open_engine
from core.store.migration import HEAD_REVISION, upgrade
from tests.e2e.console.cli import BatonCli, final_status, run_ids


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


def test_migrate_creates_the_schema_and_is_idempotent(baton: BatonCli) -> None:
    first = baton.run("migrate")
    second = baton.run("migrate")

    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    assert baton.runs() == []  # the schema exists and is queryable
    assert first.stdout.startswith(f"Created the schema of database {baton.database_url}")
    assert "was already at the newest schema" in second.stdout and "nothing to do" in second.stdout


def test_migrate_says_what_it_upgraded(baton: BatonCli) -> None:
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
