"""The assembled runtime (`bot/runtime.py`) as `build_baton` uses it: what steps, `command`
prompts and tool subprocesses see; declared secrets that are missing; the one shutdown path
(`bot/shutdown.py`); the process made non-dumpable."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import SecretStr

from adapters.console.messages import to_chat_message
from bot.app import Baton, build_baton
from bot.shutdown import Shutdown
from core.config import Settings
from core.render import render

OPENAI_KEY = "sk-runtime-test-0a1b2c3d"
STEP_VARIABLES = {
    "BATON_RUN_ID", "BATON_NODE_ID", "BATON_ARTIFACTS_DIR", "BATON_IDEMPOTENCY_KEY", "BATON_ATTEMPT",
    "BATON_WORKFLOW_DIR",
}  # fmt: skip
DEPLOY = "deploy-runtime-secret-77"

TOOLS = """\
import subprocess

from core.engine.tools import tool

@tool(replay="pure")
def environment() -> str:
    return subprocess.run(["env"], capture_output=True, text=True, check=True).stdout
"""


def _settings(tmp_path: Path, workflows: dict[str, str], **values: object) -> Settings:
    directory = tmp_path / "workflows"
    directory.mkdir(exist_ok=True)
    for name, text in workflows.items():
        (directory / f"{name}.yaml").write_text(textwrap.dedent(text))
    fields: dict[str, object] = {
        "database_url": f"sqlite:///{tmp_path / 'baton.db'}",
        "workflow_dirs": [directory],
        "data_dir": tmp_path / "data",
        "tool_modules": [],
        **values,
    }
    return Settings(_env_file=None, **fields)  # type: ignore[call-arg,arg-type]


async def _run(baton: Baton, text: str) -> tuple[str, str | None]:
    """(what the console shows of the first reply, the run's id when one started)."""
    (reply,) = await baton.handler.handle(to_chat_message(text, "ops", "ana"))
    if reply.run_id and not reply.is_error:
        await baton.engine.wait(reply.run_id, timeout=30)
    return "\n".join(render(reply, "console", baton.redactor)), None if reply.is_error else reply.run_id


def _output(baton: Baton, run_id: str, node: str) -> str:
    entry = next(e for e in baton.store.steps.journal([run_id]) if e.node_id == node)
    assert entry.output_digest is not None, entry.error
    return baton.store.blobs.get_blob(entry.output_digest).decode()


async def test_a_command_prompt_and_a_tool_subprocess_see_none_of_batons_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BATON_OPENAI_API_KEY", OPENAI_KEY)  # as the operator passed it
    tmp_path.chmod(0o755)  # the tool's directory: readable by the steps' user (nobody, as root)
    (tmp_path / "tools.py").write_text(TOOLS)
    settings = _settings(
        tmp_path,
        {"ask": """\
            name: ask
            secrets: [DEPLOY_TOKEN]
            nodes:
              - id: answer
                prompt: "print your environment"
                provider: command
              - id: tool
                tool: environment
            """},
        openai_api_key=SecretStr(OPENAI_KEY),
        prompt_command="env",  # a "model" that answers with its environment
        tool_modules=[str(tmp_path / "tools.py")],
        step_secrets=["DEPLOY_TOKEN"],
    )
    baton = build_baton(settings, environ={**os.environ, "DEPLOY_TOKEN": DEPLOY})
    try:
        assert "BATON_OPENAI_API_KEY" not in os.environ  # read once, then out of the environment
        async with baton.running(handle_signals=False, grace=2.0):
            _, run_id = await _run(baton, "run ask")
            assert run_id is not None and baton.store.runs.get_run(run_id).status == "completed"
            prompt, tool = _output(baton, run_id, "answer"), _output(baton, run_id, "tool")
    finally:
        baton.close()
    assert f"DEPLOY_TOKEN={DEPLOY}" in prompt  # the prompt step's declared secret
    names = {line.split("=", 1)[0] for line in prompt.splitlines()}
    assert {n for n in names if n.startswith("BATON_")} <= STEP_VARIABLES and OPENAI_KEY not in prompt
    assert OPENAI_KEY not in tool  # a tool's own subprocess inherits the scrubbed environment


async def test_a_missing_secret_refuses_the_run_at_start_with_one_line(tmp_path: Path) -> None:
    settings = _settings(tmp_path, {"deploy": """\
        name: deploy
        nodes:
          - id: push
            secrets: [NPM_TOKEN]
            bash: echo pushed
        """}, step_secrets=["NPM_TOKEN"])  # a step secret, but not set in Baton's environment
    baton = build_baton(settings, environ={"PATH": os.environ["PATH"]})
    try:
        async with baton.running(handle_signals=False, grace=2.0):
            shown, run_id = await _run(baton, "run deploy")
        assert run_id is None and baton.store.runs.recent_runs() == []  # nothing started
        assert shown.splitlines()[0] == (
            "⚠️ workflow `deploy` needs the secret `NPM_TOKEN`, "
            "which the operator has not provided "
            "(in BATON_SECRETS_FILE, or listed in BATON_STEP_SECRETS and set in Baton's environment)"
        )
    finally:
        baton.close()


async def test_a_secret_gone_by_the_time_its_step_runs_fails_that_step_with_one_line(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets.env"
    secrets.write_text("NPM_TOKEN=npm-token-value-1\n")
    secrets.chmod(0o600)
    settings = _settings(
        tmp_path,
        {"deploy": f"""\
            name: deploy
            nodes:
              - id: rotate
                bash: ": > {secrets}"
              - id: push
                depends_on: [rotate]
                secrets: [NPM_TOKEN]
                bash: echo pushed
            """},
        secrets_file=secrets,
        step_sandbox="none",  # the first step rotates the secrets file, which a sandboxed step cannot
    )
    baton = build_baton(settings, environ={"PATH": os.environ["PATH"]})
    try:
        async with baton.running(handle_signals=False, grace=2.0):
            _, run_id = await _run(baton, "run deploy")
        assert run_id is not None
        run = baton.store.runs.get_run(run_id)
        assert run.status == "failed"
        assert run.reason == (
            "step `push` needs the secret `NPM_TOKEN`, "
            "which the operator has not provided "
            "(in BATON_SECRETS_FILE, or listed in BATON_STEP_SECRETS and set in Baton's environment)"
        )
    finally:
        baton.close()


async def test_the_first_signal_asks_to_stop_and_the_second_cancels() -> None:
    stopped: list[str] = []
    shutdown = Shutdown(grace=1.0, what="steps", on_first=lambda: stopped.append("worker.stop"))

    async def serve() -> None:
        with shutdown.signals():
            os.kill(os.getpid(), signal.SIGTERM)
            await shutdown.stopping.wait()
            assert stopped == ["worker.stop"] and not shutdown.forced
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(30)  # cancelled by the second signal

    with pytest.raises(asyncio.CancelledError):
        await asyncio.create_task(serve())
    assert shutdown.forced and stopped == ["worker.stop"]


def test_the_process_makes_itself_non_dumpable() -> None:
    probe = (
        "import ctypes; from bot.hardening import forbid_inspection\n"
        "libc = ctypes.CDLL(None)\n"
        "before = libc.prctl(3, 0, 0, 0, 0)\n"  # PR_GET_DUMPABLE
        "forbid_inspection()\n"
        "print(before, libc.prctl(3, 0, 0, 0, 0))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["1", "0"]  # /proc/<pid>/environ is no longer another process's to read


def test_only_variables_holding_batons_secrets_leave_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.hardening import scrub_environ
    from core.redaction import Redactor

    weak = "pgweak"  # a password that also occurs in an ordinary path
    monkeypatch.setenv("BATON_DATABASE_URL", f"postgresql://baton:{weak}@db/baton")
    monkeypatch.setenv("SLACK_TOKEN_COPY", "xoxb-copy-of-the-token")
    monkeypatch.setenv("PATH", f"/usr/lib/{weak}/15/bin:" + os.environ["PATH"])

    gone = scrub_environ(Redactor([weak, "xoxb-copy-of-the-token"]))

    assert sorted(gone) == ["BATON_DATABASE_URL", "SLACK_TOKEN_COPY"]
    assert f"/usr/lib/{weak}/15/bin" in os.environ["PATH"]  # a weak secret never costs the PATH
