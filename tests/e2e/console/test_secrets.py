"""No secret reaches people through the console: `baton say` as a subprocess, assembled for
real from its environment (tokens of every platform, an OpenAI key, a database URL with a
password, a step secret from the environment and one from BATON_SECRETS_FILE).

A step that prints its environment sees its declared secrets and none of Baton's; a step
whose stderr holds every secret fails with all of them hidden. Nothing in any reply, in the
log, in the audit trail or in what `status`, `args` and `audit` show holds a secret.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from core.store.repository import SqlStore
from tests.e2e import leak
from tests.e2e.console.cli import BatonCli


@pytest.fixture
def cli(tmp_path: Path, postgres_url: str) -> BatonCli:
    url = leak.with_password(postgres_url)
    cli = BatonCli.create(tmp_path / "home", url)
    leak.write_workflows(cli.workflows, url)
    secrets_file = leak.write_secrets_file(tmp_path / "step-secrets.env")
    cli.env_extra.update(
        BATON_SLACK_BOT_TOKEN=leak.SLACK_BOT,
        BATON_SLACK_APP_TOKEN=leak.SLACK_APP,
        BATON_SLACK_SIGNING_SECRET=leak.SLACK_SIGNING,
        BATON_DISCORD_TOKEN=leak.DISCORD,
        BATON_OPENAI_API_KEY=leak.OPENAI,
        BATON_SECRETS_FILE=str(secrets_file),
        BATON_LOG_LEVEL="INFO",  # everything the process logs is checked too
        DEPLOY_TOKEN=leak.DEPLOY,
        BATON_STEP_SECRETS="DEPLOY_TOKEN",  # the operator makes this variable a step secret
    )
    return cli


def say(cli: BatonCli, text: str) -> tuple[list[dict[str, object]], str]:
    """`baton say --json --wait <text>`: (replies, what it logged); no secret in either."""
    done: subprocess.CompletedProcess[str] = cli.run("say", "--json", "--wait", "--user", "ana", "--", text)
    assert done.returncode == 0, done.stderr
    assert leak.leaks(done.stdout) == [], done.stdout
    assert leak.leaks(done.stderr) == [], done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout), done.stderr


def stored_output(cli: BatonCli, run_id: str) -> str:
    """The output the run's one step left in the store, as it printed it (secrets included)."""
    store = SqlStore(cli.database_url)
    try:
        (entry,) = store.steps.journal([run_id])
        assert entry.output_digest is not None
        return store.blobs.get_blob(entry.output_digest).decode()
    finally:
        store.close()


def test_a_step_sees_its_declared_secrets_and_none_of_batons(cli: BatonCli) -> None:
    replies, _ = say(cli, f"run envdump 'typed by mistake: {leak.OPENAI}'")

    run = cli.runs()[0]
    assert run.status == "completed"
    shown = "\n".join(str(r["text"]) for r in replies)
    # the step saw both declared secrets (it printed their fingerprints) ...
    assert f"saw {leak.fingerprint(leak.DEPLOY)} {leak.fingerprint(leak.FILE_SECRET)}" in shown
    # ... and the reply showing its output hides their values
    assert "DEPLOY_TOKEN=•••" in shown and "FILE_TOKEN=•••" in shown and "MODE=audit" in shown
    stored = stored_output(cli, run.id)
    # what the step really printed (kept as is for later steps): its secrets, none of Baton's
    assert f"DEPLOY_TOKEN={leak.DEPLOY}" in stored and f"FILE_TOKEN={leak.FILE_SECRET}" in stored
    assert [s for s in leak.SETTINGS_SECRETS if s in stored] == []
    names = {line.split("=", 1)[0] for line in stored.splitlines() if "=" in line}
    assert not {n for n in names if n.startswith("BATON_") and n not in STEP_VARIABLES}
    assert "PYTHONPATH" not in names  # the operator's other variables stay out too

    for command in (f"status {run.id}", f"args {run.id}", f"audit {run.id}"):
        say(cli, command)


STEP_VARIABLES = {
    "BATON_RUN_ID", "BATON_NODE_ID", "BATON_ARTIFACTS_DIR", "BATON_IDEMPOTENCY_KEY",
    "BATON_ATTEMPT", "BATON_WORKFLOW_DIR",
}  # fmt: skip


def test_a_failing_step_with_every_secret_on_its_stderr_shows_none(cli: BatonCli) -> None:
    replies, _ = say(cli, "run leaky")

    run = cli.runs()[0]
    assert run.status == "failed"
    failure = replies[-1]["text"]
    assert "exited with code 3" in str(failure) and "•••" in str(failure)
    # a secret typed back at Baton is echoed in an error, which is also logged: hidden in both
    replies, log = say(cli, f"status '{' '.join(leak.ALL)}'")
    assert "No run has the id '" + " ".join(["•••"] * len(leak.ALL)) + "'" in str(replies[0]["text"])
    assert "answered with an error" in log
    for command in (f"status {run.id}", f"audit {run.id}", f"plan {run.id}", "runs"):
        say(cli, command)

    store = SqlStore(cli.database_url)
    try:
        at_rest = [
            leak.dumped(
                event.details
            ) for r in store.runs.recent_runs(limit=10) for event in store.events.audit_log(r.id)
        ]
        at_rest += [e.error or "" for e in store.steps.journal([run.id])]
        at_rest.append(store.runs.get_run(run.id).reason or "")
    finally:
        store.close()
    assert leak.leaks("\n".join(at_rest)) == []


def test_a_secret_straddling_the_output_cap_shows_no_part_of_itself(cli: BatonCli) -> None:
    cli.env_extra["BATON_MAX_OUTPUT_BYTES"] = "1000"  # the cap falls inside FILE_TOKEN's value
    replies, _ = say(cli, "run straddle")  # say() checks no piece of any secret was shown

    run = cli.runs()[0]
    assert run.status == "completed"
    kept = stored_output(cli, run.id)
    # the stored head ends where the secret began: no prefix of it for a renderer to miss
    head, note = kept.split("\n[output truncated: ", 1)
    assert head == "x" * 990 and note.startswith("990 of 4,013 bytes kept; all of it is in ")
    assert leak.leaks(kept) == []
    shown = str(replies[-1]["text"])  # the run's output, as people see it
    assert "x" * 990 + "\n" in shown and "[output truncated: 990 of 4,013 bytes kept" in shown
    for command in (f"status {run.id}", f"plan {run.id}"):
        say(cli, command)


def test_a_secret_a_step_encodes_on_its_way_out_is_hidden_too(cli: BatonCli) -> None:
    """base64 at each offset (as `curl -v -u ci:$TOKEN` prints it), URL-safe base64 and hex:
    `say()` decodes each before it looks for a secret in the replies and the log."""
    replies, _ = say(cli, "run encoded")

    run = cli.runs()[0]
    assert run.status == "completed"
    printed = stored_output(cli, run.id)
    assert leak.leaks(printed) != []  # the step did print them, encoded: there was something to hide
    assert leak.DEPLOY not in printed and leak.FILE_SECRET not in printed
    shown = str(replies[-1]["text"])
    assert shown.count("•••") >= 6 and "Authorization: Basic " in shown
    for command in (f"status {run.id}", f"plan {run.id}"):
        say(cli, command)
