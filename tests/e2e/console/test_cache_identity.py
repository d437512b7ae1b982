"""What a step's result depends on outside its YAML node busts its cache key, and says why.

Each case through the real `baton say` as a subprocess on SQLite, as a user would: a run,
then an edit to a tool's source, the prompt provider's settings, the workflow's `env:` or
`defaults`, or an operator's secret value, then `plan` (the reason, before anything runs) and
`run … --resume-from` (what re-ran and why, what came from the cache).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import sqlalchemy as sa

from core.engine.cache_key import cache_key
from core.store.records import NodeStatus, split_stored
from core.store.repository import SqlStore
from tests.e2e.console.cli import BatonCli

TOOLS = '''\
from core.engine.tools import tool


@tool(replay="pure")
def produce(x: str) -> str:
    """Prefix the value."""
    return "old-" + x
'''

TW = """\
name: tw
nodes:
  - id: p
    tool: produce
    with: {x: a}
    replay: pure
  - id: c
    depends_on: [p]
    bash: echo got {{ nodes.p.output }}
    replay: pure
"""


def _completed(replies: list[dict[str, Any]]) -> dict[str, Any]:
    [reply] = [r for r in replies if r["kind"] == "run_completed"]
    return reply


def _run(baton: BatonCli, text: str) -> str:
    return str(_completed(baton.say(text))["run_id"])


def _plan(baton: BatonCli, run_id: str) -> str:
    [reply] = baton.say(f"plan {run_id}")
    return str(reply["text"])


def _steps(baton: BatonCli, run_id: str) -> dict[str, str]:
    """node -> "cached" or the reason it ran, from the run's journal."""
    store = SqlStore(baton.database_url)
    try:
        entries = [e for e in store.steps.journal([run_id]) if e.status is NodeStatus.COMPLETED]
    finally:
        store.close()
    return {e.node_id: "cached" if e.cached_from else str(e.notes.reason) for e in entries}


def _final(baton: BatonCli, run_id: str) -> str:
    """The output of the run's last completed step."""
    store = SqlStore(baton.database_url)
    try:
        entries = [e for e in store.steps.journal([run_id]) if e.status is NodeStatus.COMPLETED]
        last = max(entries, key=lambda e: e.id)
        assert last.output_digest is not None
        return store.blobs.get_blob(last.output_digest).decode().strip()
    finally:
        store.close()


# -- tools ---------------------------------------------------------------------------------------


def test_an_edited_tool_re_runs_and_its_dependents_follow_by_early_cutoff(baton: BatonCli) -> None:
    (baton.workflows / "tools.py").write_text(TOOLS)
    (baton.workflows / "tw.yaml").write_text(TW)
    first = _run(baton, "run tw")
    assert _final(baton, first) == "got old-a"

    # reformatting and comments: the same code, every result re-used (documented choice)
    (baton.workflows / "tools.py").write_text(
        TOOLS.replace('    return "old-" + x', "    # keep the prefix\n    return ('old-'  +  x)") + "\n\n"
    )
    same = _run(baton, f"run tw --resume-from {first}")
    assert _steps(baton, same) == {"p": "cached", "c": "cached"}

    # another body with the same result: the tool re-runs, its dependent is served by early cutoff
    (baton.workflows / "tools.py").write_text(TOOLS.replace('"old-" + x', 'f"old-{x}"'))
    plan = _plan(baton, first)
    assert "p runs — tool `produce` changed" in plan
    assert "c runs — runs if upstream `p` output changes" in plan
    refactored = _run(baton, f"run tw --resume-from {first}")
    assert _steps(baton, refactored) == {"p": "tool `produce` changed", "c": "cached"}

    # the fix: the tool and its dependent re-run, and the new output is what the run shows
    (baton.workflows / "tools.py").write_text(TOOLS.replace('"old-"', '"new-"'))
    fixed = _run(baton, f"run tw --resume-from {refactored}")
    assert _steps(baton, fixed) == {"p": "tool `produce` changed", "c": "upstream `p` output changed"}
    assert _final(baton, fixed) == "got new-a"


def test_a_declared_tool_version_decides_instead_of_the_source(baton: BatonCli) -> None:
    versioned = TOOLS.replace('@tool(replay="pure")', '@tool(replay="pure", version="1")')
    (baton.workflows / "tools.py").write_text(versioned)
    (baton.workflows / "tw.yaml").write_text(TW)
    first = _run(baton, "run tw")

    (baton.workflows / "tools.py").write_text(versioned.replace('"old-"', '"new-"'))
    kept = _run(baton, f"run tw --resume-from {first}")
    assert _steps(baton, kept) == {"p": "cached", "c": "cached"}  # the author said: same version

    (baton.workflows / "tools.py").write_text(versioned.replace('"old-"', '"new-"').replace('"1"', '"2"'))
    bumped = _run(baton, f"run tw --resume-from {kept}")
    assert _steps(baton, bumped)["p"] == "tool `produce` changed: version 1 → 2"
    assert _final(baton, bumped) == "got new-a"


# -- prompt providers ----------------------------------------------------------------------------

ASK = """\
name: ask
nodes:
  - id: q
    prompt: "say hello"
  - id: shout
    depends_on: [q]
    bash: echo heard {{ nodes.q.output }}
    replay: pure
"""


class _Models(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint whose answer names the model asked."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answer = {"choices": [{"message": {"content": f"{body['model']} says hello"}}]}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the test reads no server log
        pass


@pytest.fixture
def openai_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_a_command_provider_model_or_default_change_re_runs_the_prompt(
    baton: BatonCli, openai_url: str
) -> None:
    (baton.workflows / "ask.yaml").write_text(ASK)
    baton.env_extra.update(BATON_PROMPT_PROVIDER="command", BATON_PROMPT_COMMAND="sed s/^/alpha:/")
    first = _run(baton, "run ask")
    assert _final(baton, first) == "heard alpha:say hello"

    baton.env_extra["BATON_PROMPT_COMMAND"] = "sed s/^/beta:/"
    assert "q runs — command changed" in _plan(baton, first)
    second = _run(baton, f"run ask --resume-from {first}")
    assert _steps(baton, second) == {"q": "command changed", "shout": "upstream `q` output changed"}

    baton.env_extra.update(
        BATON_PROMPT_PROVIDER="openai", BATON_OPENAI_BASE_URL=openai_url, BATON_OPENAI_MODEL="gpt-4o-mini"
    )
    assert "q runs — provider changed: command → openai" in _plan(baton, second)
    third = _run(baton, f"run ask --resume-from {second}")
    assert _steps(baton, third)["q"] == "provider changed: command → openai"
    assert _final(baton, third) == "heard gpt-4o-mini says hello"

    # rotating the API key changes nobody's answer: every result is re-used
    baton.env_extra["BATON_OPENAI_API_KEY"] = "sk-rotated-0123456789"
    assert _steps(baton, _run(baton, f"run ask --resume-from {third}")) == {"q": "cached", "shout": "cached"}

    baton.env_extra["BATON_OPENAI_MODEL"] = "gpt-4.1"
    assert "q runs — model changed: gpt-4o-mini → gpt-4.1" in _plan(baton, third)
    fourth = _run(baton, f"run ask --resume-from {third}")
    assert _steps(baton, fourth)["q"] == "model changed: gpt-4o-mini → gpt-4.1"
    assert _final(baton, fourth) == "heard gpt-4.1 says hello"

    baton.env_extra["BATON_PROMPT_PROVIDER"] = "fake"
    fifth = _run(baton, f"run ask --resume-from {fourth}")
    assert _steps(baton, fifth)["q"] == "provider changed: openai → fake"


DEFAULTS = """\
name: two
defaults: {provider: fake}
nodes:
  - id: inherits
    prompt: "one"
  - id: names_it
    prompt: "two"
    provider: fake
"""


def test_a_changed_default_re_runs_what_inherits_it_and_a_node_provider_its_node(baton: BatonCli) -> None:
    baton.env_extra.update(BATON_PROMPT_PROVIDER="fake", BATON_PROMPT_COMMAND="sed s/^/cmd:/")
    (baton.workflows / "two.yaml").write_text(DEFAULTS)
    first = _run(baton, "run two")

    (baton.workflows / "two.yaml").write_text(DEFAULTS.replace("{provider: fake}", "{provider: command}"))
    plan = _plan(baton, first)
    assert "inherits runs — provider changed: fake → command" in plan
    assert "names_it done — completed in this run" in plan
    second = _run(baton, f"run two --resume-from {first}")
    assert _steps(baton, second) == {"inherits": "provider changed: fake → command", "names_it": "cached"}

    (baton.workflows / "two.yaml").write_text(
        DEFAULTS.replace("{provider: fake}", "{provider: command}").replace(
            "    provider: fake\n", "    provider: command\n"
        )
    )
    third = _run(baton, f"run two --resume-from {second}")
    assert _steps(baton, third) == {"inherits": "cached", "names_it": "provider changed: fake → command"}


# -- env and secrets -----------------------------------------------------------------------------

DEPLOY = """\
name: deploy
env: {REGION: eu-west-1}
secrets: [DEPLOY_TOKEN]
nodes:
  - id: target
    bash: echo "to $REGION"
    replay: pure
  - id: draft
    prompt: "deploy notes"
"""


def test_an_env_value_re_runs_its_steps_and_a_rotated_secret_does_not(baton: BatonCli) -> None:
    (baton.workflows / "deploy.yaml").write_text(DEPLOY)
    baton.env_extra.update(DEPLOY_TOKEN="token-one", BATON_STEP_SECRETS="DEPLOY_TOKEN,SLACK_HOOK")
    first = _run(baton, "run deploy")

    baton.env_extra["DEPLOY_TOKEN"] = "token-two"  # the operator rotates the secret
    rotated = _run(baton, f"run deploy --resume-from {first}")
    assert _steps(baton, rotated) == {"target": "cached", "draft": "cached"}

    (baton.workflows / "deploy.yaml").write_text(DEPLOY.replace("eu-west-1", "us-east-2"))
    plan = _plan(baton, rotated)
    assert "target runs — env `REGION` changed" in plan
    assert "draft done" in plan  # answered by the fake provider, which sees no environment
    moved = _run(baton, f"run deploy --resume-from {rotated}")
    assert _steps(baton, moved) == {"target": "env `REGION` changed", "draft": "cached"}

    (baton.workflows / "deploy.yaml").write_text(
        DEPLOY.replace("eu-west-1", "us-east-2").replace("[DEPLOY_TOKEN]", "[DEPLOY_TOKEN, SLACK_HOOK]")
    )
    baton.env_extra["SLACK_HOOK"] = "https://hooks.example/1"  # a declared secret must be provided
    declared = _run(baton, f"run deploy --resume-from {moved}")
    assert _steps(baton, declared) == {"target": "secret `SLACK_HOOK` declared", "draft": "cached"}


# -- results recorded before identity components existed -----------------------------------------


def _as_recorded_before(baton: BatonCli, run_id: str) -> None:
    """Rewrite the run's journal as an engine without identity components wrote it: the
    components without `tool`/`provider`/`env`/`secrets` (nor the mark of entries recorded
    since), keyed by what is left."""
    engine = sa.create_engine(baton.database_url)
    try:
        with engine.begin() as conn:
            rows = conn.execute(
                sa.text("SELECT id, components FROM journal WHERE run_id = :r"), {"r": run_id}
            ).all()
            for entry_id, raw in rows:
                components = json.loads(raw) if isinstance(raw, str) else raw
                for name in ("tool", "provider", "env", "secrets", "_identity"):
                    components.pop(name, None)
                key = cache_key(split_stored(components)[0])  # the key components, without the notes
                conn.execute(
                    sa.text("UPDATE journal SET components = :c, cache_key = :k WHERE id = :i"),
                    {"c": json.dumps(components), "k": key, "i": entry_id},
                )
    finally:
        engine.dispose()


def test_results_recorded_before_identity_miss_in_a_new_run_with_a_reason(baton: BatonCli) -> None:
    (baton.workflows / "tools.py").write_text(TOOLS)
    (baton.workflows / "tw.yaml").write_text(TW)
    (baton.workflows / "ask.yaml").write_text(ASK)
    tool_run, prompt_run = _run(baton, "run tw"), _run(baton, "run ask")
    _as_recorded_before(baton, tool_run)
    _as_recorded_before(baton, prompt_run)

    # the run itself would go on where it stopped; a new run re-using it cannot know its code
    assert "p done — completed in this run" in _plan(baton, tool_run)
    again = _run(baton, f"run tw --resume-from {tool_run}")
    # the tool re-runs (its code was never recorded); the same output leaves `c` cached
    assert _steps(baton, again) == {"p": "tool `produce` not recorded with the earlier result", "c": "cached"}

    asked = _run(baton, f"run ask --resume-from {prompt_run}")
    assert _steps(baton, asked) == {"q": "provider not recorded with the earlier result", "shout": "cached"}


COUNTED = """\
from core.engine.tools import tool


@tool
def deploy(log: str) -> str:
    with open(log, "a") as calls:
        calls.write("deployed\\n")
    return "deployed"
"""

DEPLOY_THEN_CHECK = """\
name: ship
nodes:
  - id: deploy
    tool: deploy
    with: {{log: "{calls}"}}
  - id: check
    depends_on: [deploy]
    bash: cat {ready}
    replay: pure
"""


def test_resuming_a_run_recorded_before_identity_never_runs_its_completed_steps_again(
    baton: BatonCli,
) -> None:
    """`deploy` is unsafe and completed before the upgrade; resuming the failed run after it
    continues at `check` instead of deploying a second time."""
    # the step's sandbox shows it its workflow directory (read-only) and its run directory
    # (its working directory), nothing else of the project
    ready = baton.workflows / "ready.txt"
    (baton.workflows / "tools.py").write_text(COUNTED)
    (baton.workflows / "ship.yaml").write_text(DEPLOY_THEN_CHECK.format(calls="calls.txt", ready=ready))
    replies = baton.say("run ship")
    [failed] = [r for r in replies if r["kind"] == "run_failed"]
    run_id = failed["run_id"]
    calls = baton.home / ".baton" / "runs" / run_id / "calls.txt"
    _as_recorded_before(baton, run_id)

    assert "deploy done — completed in this run" in _plan(baton, run_id)
    ready.write_text("ready\n")
    baton.say(f"resume {run_id}")

    assert baton.run_record(run_id).status.value == "completed"
    assert calls.read_text() == "deployed\n"  # once, before the upgrade
    # a new run re-using it is another matter: its identity was never recorded, so it runs
    again = _run(baton, f"run ship --resume-from {run_id}")
    assert _steps(baton, again) == {
        "deploy": "tool `deploy` not recorded with the earlier result",
        "check": "cached",
    }



NAMED_SCRIPT = """\
name: scripted
nodes:
  - id: build
    bash: '"$BATON_WORKFLOW_DIR/scripts/build.sh" {{ inputs.message }}'
    replay: pure
  - id: other
    bash: echo untouched
    replay: pure
"""


def test_a_script_a_bash_step_names_in_its_workflow_directory_counts_as_its_definition(
    baton: BatonCli,
) -> None:
    """Editing `scripts/build.sh`, which the step runs as `$BATON_WORKFLOW_DIR/scripts/build.sh`
    without listing it in `files:`, re-runs that step instead of re-using the old script's
    result; the other step's result is re-used."""
    scripts = baton.workflows / "scripts"
    scripts.mkdir()
    script = scripts / "build.sh"
    script.write_text("#!/bin/sh\necho \"built $1 with v1\"\n")
    script.chmod(0o755)
    (baton.workflows / "scripted.yaml").write_text(NAMED_SCRIPT)
    first = _run(baton, "run scripted x")
    assert _output(baton, first, "build") == b"built x with v1\n"

    script.write_text("#!/bin/sh\necho \"built $1 with v2\"\n")
    assert "build runs — definition changed" in _plan(baton, first)
    again = _run(baton, f"run scripted x --resume-from {first}")
    assert _steps(baton, again) == {"build": "definition changed", "other": "cached"}
    assert _output(baton, again, "build") == b"built x with v2\n"


def _output(baton: BatonCli, run_id: str, node: str) -> bytes:
    store = SqlStore(baton.database_url)
    try:
        (entry,) = [e for e in store.steps.journal([run_id]) if e.node_id == node]
        assert entry.output_digest is not None
        return store.blobs.get_blob(entry.output_digest)
    finally:
        store.close()
