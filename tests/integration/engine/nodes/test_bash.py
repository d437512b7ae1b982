"""`bash` steps in real subprocesses: output, environment, failures, timeouts, cancellation."""

from __future__ import annotations

import asyncio
import os
import shlex
import time
from pathlib import Path

import pytest

from core.engine.nodes import NodeResult, RenderedNode, execute_node
from core.engine.providers import ProviderRegistry
from core.engine.tools import ToolRegistry
from core.errors import NodeFailed
from core.redaction import Redactor
from tests.environments import step_environment
from tests.integration.engine.nodes.processes import alive, make_fifo, read_fifo, wait_gone
from tests.unit.engine.nodes.conftest import MakeContext

TOOLS = ToolRegistry()


async def bash(command: str, ctx: object, providers: ProviderRegistry) -> NodeResult:
    return await execute_node(
        RenderedNode(kind="bash", command=command), ctx, providers=providers, tools=TOOLS
    )  # type: ignore[arg-type]


async def test_stdout_is_the_output_and_stderr_is_kept(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    result = await bash("echo out; echo err >&2; printf 'last'", make_ctx(), fake_providers)
    assert result.output == "out\nlast"
    assert result.stderr_tail == "err\n"
    assert (result.tokens_in, result.tokens_out) == (0, 0)


async def test_environment_and_working_directory(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    ctx = make_ctx(
        run_id="r-42",
        node_id="collect",
        idempotency_key="r-42:collect",
        attempt=3,
        env={"API_TOKEN": "t0k3n"},
    )
    command = (
        'echo "$BATON_RUN_ID|$BATON_NODE_ID|$BATON_ARTIFACTS_DIR|$BATON_IDEMPOTENCY_KEY|'
        '$BATON_ATTEMPT|$API_TOKEN|$PATH"; pwd'
    )
    result = await bash(command, ctx, fake_providers)
    line, cwd = result.output.splitlines()
    assert line.split("|") == [
        "r-42",
        "collect",
        str(ctx.artifacts_dir),
        "r-42:collect",
        "3",
        "t0k3n",
        os.environ["PATH"],
    ]
    assert Path(cwd).resolve() == ctx.workdir.resolve()


#: what bash itself sets in every shell, whatever its environment
_BASH_OWN = {"PWD", "SHLVL", "_", "OLDPWD"}


async def test_a_step_sees_the_allowlist_its_env_its_secrets_and_nothing_else(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    operator = {
        "PATH": os.environ["PATH"], "HOME": "/home/op", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "TZ": "UTC", "TMPDIR": "/tmp", "USER": "op",
        "BATON_SLACK_BOT_TOKEN": "xoxb-not-for-steps", "BATON_DATABASE_URL": "postgresql://u:pw@db/x",
        "AWS_SECRET_ACCESS_KEY": "not-declared", "GITHUB_TOKEN": "ghp_declared", "PYTHONPATH": "/x",
    }  # fmt: skip
    ctx = make_ctx(
        node_id="show", environment=step_environment(environ=operator, step_secrets=["GITHUB_TOKEN"]),
        env={"MODE": "fast"}, secrets=("GITHUB_TOKEN",),
    )  # fmt: skip
    result = await bash("env", ctx, fake_providers)
    seen = dict(line.split("=", 1) for line in result.output.splitlines())
    step_variables = {"BATON_RUN_ID", "BATON_NODE_ID", "BATON_ARTIFACTS_DIR", "BATON_IDEMPOTENCY_KEY",
                      "BATON_ATTEMPT"}  # fmt: skip
    allowed = {"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER"}
    assert set(seen) - _BASH_OWN == allowed | step_variables | {"MODE", "GITHUB_TOKEN"}
    assert (seen["MODE"], seen["GITHUB_TOKEN"], seen["HOME"]) == ("fast", "ghp_declared", "/home/op")
    assert "xoxb-not-for-steps" not in result.output and "pw@db" not in result.output


async def test_a_variable_of_batons_environment_that_is_not_a_step_secret_is_never_handed_over(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    # the catalog refuses such a workflow at load; a step asking anyway (a worker, a job
    # queued before the rule) gets nothing of Baton's own environment
    operator = {"PATH": os.environ["PATH"], "PGPASSWORD": "batons-db-password", "GITHUB_TOKEN": "ghp_x1"}
    environment = step_environment(environ=operator, step_secrets=["GITHUB_TOKEN"])
    assert environment.provided() == {"GITHUB_TOKEN"}
    ctx = make_ctx(node_id="steal", environment=environment, secrets=("PGPASSWORD",))
    with pytest.raises(NodeFailed, match="needs the secret `PGPASSWORD`, which the operator has not"):
        await bash("echo $PGPASSWORD", ctx, fake_providers)


async def test_a_declared_secret_that_is_not_provided_fails_the_step_with_one_line(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    ctx = make_ctx(node_id="push", environment=step_environment(environ={}), secrets=("NPM_TOKEN",))
    with pytest.raises(NodeFailed) as info:
        await bash("echo never", ctx, fake_providers)
    assert info.value.message == (
        "step `push` needs the secret `NPM_TOKEN`, "
        "which the operator has not provided "
        "(in BATON_SECRETS_FILE, or listed in BATON_STEP_SECRETS and set in Baton's environment)"
    )
    assert "\n" not in info.value.message


async def test_no_idempotency_key_is_an_empty_variable(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    result = await bash(
        'echo "[${BATON_IDEMPOTENCY_KEY-unset}]"', make_ctx(idempotency_key=None), fake_providers
    )
    assert result.output == "[]\n"


async def test_non_zero_exit_names_code_and_stderr_tail_with_secrets_hidden(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    ctx = make_ctx(node_id="deploy", redactor=Redactor(["hunter2-secret"]))
    command = "echo progress; echo 'warning: x' >&2; echo 'auth failed for hunter2-secret' >&2; exit 7"
    with pytest.raises(NodeFailed) as caught:
        await bash(command, ctx, fake_providers)
    error = caught.value
    assert error.node_id == "deploy"
    assert (
        error.message
        == "step `deploy` exited with code 7; stderr ends with:\nwarning: x\nauth failed for •••"
    )
    assert error.hint == "Fix the step, then resume the run."


async def test_stderr_tail_is_the_last_2kb(make_ctx: MakeContext, fake_providers: ProviderRegistry) -> None:
    result = await bash(
        "for i in $(seq 1 5000); do echo line-$i >&2; done; echo done", make_ctx(), fake_providers
    )
    assert len(result.stderr_tail) <= 2048
    assert result.stderr_tail.endswith("line-5000\n")
    assert "line-1\n" not in result.stderr_tail


@pytest.mark.parametrize(
    "value",
    [
        'it\'s "quoted"',
        "`touch pwned-backtick`",
        "$(touch pwned-subst) and $HOME and ${PATH}",
        "two\nlines\n",
        "; rm -rf / #",
        "*",
        "",
    ],
)
async def test_shell_quoted_values_arrive_literally(
    value: str, make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    ctx = make_ctx()
    result = await bash(f"printf '%s' {shlex.quote(value)}", ctx, fake_providers)
    assert result.output == value
    assert list(ctx.workdir.iterdir()) == []


async def test_ten_megabytes_on_both_pipes_do_not_deadlock(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    size = 10 * 1024 * 1024
    command = (
        "for i in $(seq 1 160); do head -c 65536 /dev/zero | tr '\\0' e >&2; "
        "head -c 65536 /dev/zero | tr '\\0' o; done"
    )
    result = await bash(command, make_ctx(timeout=60, max_output=size), fake_providers)
    assert len(result.output) == size
    assert set(result.output) == {"o"}
    assert len(result.stderr_tail) == 2048


async def test_an_output_past_the_cap_is_cut_and_kept_whole_in_a_file(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    ctx = make_ctx(timeout=60, max_output=1000)
    result = await bash("seq 1 100000", ctx, fake_providers)
    whole = "".join(f"{n}\n" for n in range(1, 100001))
    assert result.truncated
    head, note = result.output[:1000], result.output[1000:]
    assert head == whole[:1000]
    assert f"1,000 of {len(whole):,} bytes kept" in note and str(ctx.output_file) in note
    assert ctx.output_file.read_text() == whole


async def test_an_output_past_the_file_cap_is_read_to_its_end_but_not_kept(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    ctx = make_ctx(timeout=60, max_output=1000, max_output_file=5000)
    result = await bash("yes | head -c 3000000; echo done >&2", ctx, fake_providers)
    assert result.truncated  # the step ran to its end: the pipe was drained, never blocked
    assert result.stderr_tail == "done\n"
    assert result.output[:1000] == "y\n" * 500
    assert "[output truncated: 1,000 of 3,000,000 bytes kept; the first 5,000 are in " in result.output
    assert ctx.output_file.read_bytes() == b"y\n" * 2500


async def test_background_children_do_not_keep_the_step_waiting(
    make_ctx: MakeContext, fake_providers: ProviderRegistry, tmp_path: Path
) -> None:
    fifo = make_fifo(tmp_path)
    started = time.monotonic()
    step = asyncio.ensure_future(
        bash(f"sleep 300 & echo $! > {fifo}; echo started", make_ctx(), fake_providers)
    )
    child = int(await read_fifo(fifo))
    result = await step
    assert result.output == "started\n"
    assert time.monotonic() - started < 60  # the child sleeps 300 s: the step did not wait for it
    assert wait_gone(child), "the background child outlived its step"


async def test_timeout_kills_the_whole_process_group(
    make_ctx: MakeContext, fake_providers: ProviderRegistry, tmp_path: Path
) -> None:
    fifo = make_fifo(tmp_path)
    ctx = make_ctx(node_id="slow", timeout=1.5)
    step = asyncio.ensure_future(bash(f"sleep 300 & echo $! > {fifo}; wait", ctx, fake_providers))
    child = int(await read_fifo(fifo))
    assert alive(child)
    started = time.monotonic()
    with pytest.raises(NodeFailed) as caught:
        await step
    assert caught.value.message == "step `slow` timed out after 1.5 s"
    assert "timeout:" in caught.value.hint
    assert time.monotonic() - started < 60  # killed, not waited out (its child sleeps 300 s)
    assert wait_gone(child), "the step's child `sleep` survived the timeout"


async def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored(
    make_ctx: MakeContext, fake_providers: ProviderRegistry, tmp_path: Path
) -> None:
    fifo = make_fifo(tmp_path)
    ctx = make_ctx(timeout=1.0)
    command = f"trap '' TERM; sleep 300 & echo $! > {fifo}; wait; wait"
    step = asyncio.ensure_future(bash(command, ctx, fake_providers))
    child = int(await read_fifo(fifo))
    with pytest.raises(NodeFailed, match="timed out"):
        await step
    assert wait_gone(child), "SIGKILL did not reach the child that ignores SIGTERM"


async def test_cancel_kills_the_process_group_and_reraises(
    make_ctx: MakeContext, fake_providers: ProviderRegistry, tmp_path: Path
) -> None:
    fifo = make_fifo(tmp_path)
    step = asyncio.ensure_future(bash(f"sleep 300 & echo $$ $! > {fifo}; wait", make_ctx(), fake_providers))
    shell, child = (int(pid) for pid in (await read_fifo(fifo)).split())
    step.cancel()
    with pytest.raises(asyncio.CancelledError):
        await step
    assert wait_gone(shell), "the step's shell survived cancellation"
    assert wait_gone(child), "the step's child `sleep` survived cancellation"


async def test_a_missing_working_directory_fails_the_step(
    make_ctx: MakeContext, fake_providers: ProviderRegistry, tmp_path: Path
) -> None:
    with pytest.raises(NodeFailed, match="could not start `bash`"):
        await bash("true", make_ctx(workdir=tmp_path / "missing"), fake_providers)


SECRET_41 = "tok-" + "0123456789abcdefghijklmnopqrstuvwxyzABC"[:37]  # 41 characters


async def test_no_part_of_a_secret_is_left_where_stdout_is_capped_or_stderr_is_cut(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    # stdout: the cap (1,000 bytes) falls inside the secret; stderr: the kept tail (16 KiB)
    # starts inside one, and is short enough once redacted to be shown from its start
    environment = step_environment(secrets=[SECRET_41])
    ctx = make_ctx(node_id="cut", environment=environment, max_output=1000)
    result = await bash(
        f"head -c 990 /dev/zero | tr '\\0' x; printf %s {SECRET_41}; head -c 50 /dev/zero | tr '\\0' y", ctx,
        fake_providers,
    )
    assert result.output.startswith("x" * 990 + "\n[output truncated: 990 of 1,081 bytes kept")
    ctx = make_ctx(node_id="tail", environment=environment)
    with pytest.raises(NodeFailed) as info:
        await bash(f"for i in $(seq 600); do printf %s {SECRET_41} >&2; done; exit 1", ctx, fake_providers)
    shown = info.value.message
    assert "•••" in shown
    assert not any(SECRET_41[i : i + 6] in shown for i in range(len(SECRET_41) - 5)), shown[:300]
