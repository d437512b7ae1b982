"""Warmed sandboxes (`core/engine/warm.py`) with real bubblewrap: a step that takes one gets
the same sandbox as a cold one (the escape attempts of tests/unit/engine/test_sandbox.py run
through it), exactly its environment, `/dev/null` or its stdin, its exit status; a step of
another layout starts cold; a timeout or a cancel still ends every process the step
started; `close()` leaves no warmed sandbox behind."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import socket
import sys
import uuid
from pathlib import Path

import pytest

from core.engine import warm
from core.engine.nodes import NodeContext, RenderedNode, bash, script
from core.engine.sandbox import Sandbox, configure
from core.errors import NodeFailed
from tests.environments import step_environment

pytestmark = pytest.mark.bwrap


def stubs(marker: str) -> list[int]:
    """Processes of this machine whose command line holds `baton-stub` and `marker` (a warmed
    sandbox's bwrap names its run directory)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                line = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"baton-stub" in line and marker.encode() in line:
                found.append(int(pid))
    return found


def holding(token: str) -> list[int]:
    """Processes whose command line holds `token`."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if token.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(int(pid))
            except OSError:
                continue
    return found


async def gone(find: object, *args: str, deadline: float = 5.0) -> bool:
    until = asyncio.get_running_loop().time() + deadline
    while find(*args):  # type: ignore[operator]
        if asyncio.get_running_loop().time() > until:
            return False
        await asyncio.sleep(0.05)
    return True


@pytest.fixture
def project(tmp_path: Path) -> dict[str, Path]:
    """As tests/unit/engine/test_sandbox.py lays it out: workflows (a stray `.env` in them), a
    data directory with two runs and the database, a secrets file."""
    tmp_path.chmod(0o755)
    project = tmp_path / "project"
    workflows = project / "workflows"
    data = project / ".baton"
    run, other = data / "runs" / "mine", data / "runs" / "other"
    for d in (workflows, run / "artifacts", other):
        d.mkdir(parents=True)
    for d in (project, workflows, data, data / "runs", run, run / "artifacts"):
        d.chmod(0o777)
    (workflows / "flow.yaml").write_text("name: flow\n")
    (workflows / ".env").write_text("TOKEN=in-the-workflow-dir\n")
    (project / ".env").write_text("TOKEN=in-the-project\n")
    (project / "secrets.env").write_text("NPM=secret-value\n")
    (data / "baton.db").write_text("SQLite format 3 pretend\n")
    (other / "out.txt").write_text("another run's file\n")
    return {"project": project, "workflows": workflows, "data": data, "run": run}


INTERPRETER = (Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent)  # script steps


def sandbox_of(p: dict[str, Path]) -> Sandbox:
    sandbox = configure(
        "bwrap",
        hidden_dirs=[p["data"]],
        hidden_files=[p["project"] / ".env", p["workflows"] / ".env", p["project"] / "secrets.env"],
        readable=[p["project"], Path("/tmp"), *INTERPRETER],
    )
    assert sandbox.can_warm
    return sandbox


def context(p: dict[str, Path], pool: warm.WarmSandboxes, **fields: object) -> NodeContext:
    environment = dataclasses.replace(step_environment(), sandbox=pool.sandbox)
    base = NodeContext(
        run_id="run-1", node_id="step", workdir=p["run"], artifacts_dir=p["run"] / "artifacts",
        idempotency_key=None, timeout=30.0, environment=environment, workflow_dir=p["workflows"], warm=pool,
    )
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


async def run_bash(command: str, ctx: NodeContext, **variables: str) -> str:
    return (await bash.run(RenderedNode(kind="bash", command=command, variables=variables), ctx)).output


ESCAPE = (
    "cat flow.yaml 2>&1; cat ../../baton.db 2>&1; cat ../other/out.txt 2>&1; ls ../ 2>&1;"
    " cat {w}/flow.yaml; cat {w}/.env {p}/.env {p}/secrets.env 2>&1; echo written > here.txt;"
    " echo x > {w}/new.txt 2>&1 || echo read-only; ls /tmp; echo id=$(id -u);"
    " echo pids=$(ls /proc | grep -cE '^[0-9]+$');"
    " env -i setsid -f sh -c 'exec sleep 300 {token}'; sleep 0.2; echo detached"
)


async def test_a_warmed_sandbox_is_taken_and_holds_the_same_line(project: dict[str, Path]) -> None:
    p = project
    pool = warm.WarmSandboxes(sandbox_of(p))
    host_only = Path("/tmp") / f"baton-host-only-{uuid.uuid4().hex}"
    host_only.write_text("host /tmp\n")
    token = f"0.{uuid.uuid4().int % 10**8:08d}"
    try:
        ctx = context(p, pool)
        assert await run_bash("true", ctx) == ""  # cold: nothing warmed yet; one is warmed now
        assert pool.taken == 0 and pool.cold == 1
        seen = await run_bash(ESCAPE.format(w=p["workflows"], p=p["project"], token=token), ctx)
        assert pool.taken == 1, "the second step did not take the warmed sandbox"
        assert await gone(holding, token), "a process the step detached outlived it"
    finally:
        host_only.unlink()
        await pool.close()
    assert "name: flow" in seen  # its workflow directory, read-only
    assert "pretend" not in seen and "another run's file" not in seen and "other" not in seen.split()
    assert "in-the-workflow-dir" not in seen and "in-the-project" not in seen and "secret-value" not in seen
    assert "read-only" in seen and not (p["workflows"] / "new.txt").exists()
    assert (p["run"] / "here.txt").read_text() == "written\n"  # its run directory, read-write
    assert host_only.name not in seen  # a private /tmp
    assert f"id={os.getuid() if os.geteuid() else 65534}" in seen  # as root: nobody
    pids = int(seen.split("pids=")[1].split()[0])
    assert 0 < pids < 10, seen  # its own processes only (bwrap's init, bash and what it ran)
    assert "detached" in seen


async def test_a_warmed_step_gets_exactly_its_environment_stdin_and_exit(project: dict[str, Path]) -> None:
    p = project
    pool = warm.WarmSandboxes(sandbox_of(p))
    probe = '{{ env | LC_ALL=C sort; echo "fd0=$(readlink /proc/self/fd/0)"; echo "cwd=$PWD"; }} > {}; exit 3'
    try:
        ctx = context(p, pool, env={"ODD": "a b\n c='d' $(x) \\"}, node_id="first")
        with pytest.raises(NodeFailed, match="exited with code 3"):
            await run_bash(probe.format("cold.txt"), ctx, BATON_ARG_0="v=1")
        assert pool.taken == 0
        with pytest.raises(NodeFailed, match="exited with code 3"):
            await run_bash(probe.format("warm.txt"), ctx, BATON_ARG_0="v=1")
        assert pool.taken == 1
        cold, warmed = (p["run"] / "cold.txt").read_text(), (p["run"] / "warm.txt").read_text()
        assert warmed == cold  # the same variables (no stub's), /dev/null as stdin, the same cwd
        assert "fd0=/dev/null" in warmed and f"cwd={p['run']}" in warmed and "ODD=a b" in warmed
        assert "BATON_ARG_0=v=1" in warmed and "baton-stub" not in warmed
        # a script step: its stdin is the pipe Baton feeds (the inputs), in a warmed sandbox
        node = RenderedNode(kind="script", script_source="import sys; print(sys.stdin.read()[::-1])",
                            stdin=b'{"x": 1}')
        result = await script.run(node, ctx)
        assert result.output.strip() == '}1 :"x"{' and pool.taken == 2
    finally:
        await pool.close()


async def test_a_step_of_another_layout_starts_cold(project: dict[str, Path]) -> None:
    p = project
    pool = warm.WarmSandboxes(sandbox_of(p))
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        connect = f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected || echo refused"
        try:
            online = context(p, pool)
            assert (await run_bash(connect, online)).strip() == "connected"  # cold; warms one online
            offline = dataclasses.replace(online, network=False)
            assert (await run_bash(connect, offline)).strip() == "refused"
            assert pool.taken == 0 and pool.cold == 2  # no warmed sandbox of that layout
            assert (await run_bash(connect, offline)).strip() == "refused"  # one offline was warmed
            assert pool.taken == 1
            assert (await run_bash(connect, online)).strip() == "connected"
            assert pool.taken == 2
        finally:
            await pool.close()


@pytest.mark.parametrize("how", ["timeout", "cancel"])
async def test_a_warmed_step_ends_with_everything_it_started(project: dict[str, Path], how: str) -> None:
    p = project
    pool = warm.WarmSandboxes(sandbox_of(p))
    token = f"0.{uuid.uuid4().int % 10**8:08d}"
    try:
        ctx = context(p, pool, timeout=1.5 if how == "timeout" else 30.0)
        await run_bash("true", ctx)
        step = asyncio.ensure_future(run_bash(f"sleep 300 {token} & setsid -f sleep 300 {token}; wait", ctx))
        assert await gone(lambda: not holding(token)), "the step did not start"
        if how == "cancel":
            step.cancel()
            with pytest.raises(asyncio.CancelledError):
                await step
        else:
            with pytest.raises(NodeFailed, match="timed out"):
                await step
        assert pool.taken == 1
        assert await gone(holding, token), "a process of the step outlived it"
    finally:
        await pool.close()


async def test_close_leaves_no_warmed_sandbox(project: dict[str, Path]) -> None:
    p = project
    pool = warm.WarmSandboxes(sandbox_of(p))
    ctx = context(p, pool)
    await run_bash("true", ctx)
    await run_bash("true", ctx)  # taken: two more are warmed
    assert await gone(lambda: not stubs(str(p["run"]))), "no sandbox was warmed"
    await pool.close()
    assert stubs(str(p["run"])) == []
    where = warm.layout(p["run"], p["workflows"], True, None, ())
    assert await pool.take(where, ["true"], {}, stdin=False) is None
    assert stubs(str(p["run"])) == []  # a closed pool warms nothing more


async def test_a_long_script_starts_cold_and_warms_nothing(project: dict[str, Path]) -> None:
    """Its source is a file of its own (shown at /tmp/…): no other step has that layout."""
    p = project
    pool = warm.WarmSandboxes(sandbox_of(p))
    try:
        source = "print(6 * 7)\n" + "#" * script.INLINE_LIMIT
        node = RenderedNode(kind="script", script_source=source, stdin=b"")
        assert (await script.run(node, context(p, pool))).output.strip() == "42"
        assert pool.cold == 1 and pool.taken == 0 and pool.warmed() == []
        assert stubs(str(p["run"])) == []
    finally:
        await pool.close()


PRIVILEGES = (
    "grep -E '^(Uid|Gid|Groups|Cap[A-Za-z]+|NoNewPrivs):' /proc/self/status;"
    " cat /etc/shadow >/dev/null 2>&1 && echo shadow=read || echo shadow=denied;"
    " cat /proc/{pid}/environ >/dev/null 2>&1 && echo environ=read || echo environ=denied;"
    " setpriv --reuid=0 --regid=0 --clear-groups id -u 2>/dev/null || echo setuid=denied;"
    " unshare -U -r cat /etc/shadow >/dev/null 2>&1 && echo userns=read || echo userns=denied"
)


async def test_a_step_warmed_or_cold_holds_no_privilege_and_regains_none(project: dict[str, Path]) -> None:
    """As root, the warmed sandbox's stub drops to the step user with `capsh` (when there is
    one) and a cold step with `setpriv`: either way the step runs as that user alone, every
    capability set empty (bounding set included), no new privileges, and cannot read
    /etc/shadow or Baton's environment, set its uid back, or read /etc/shadow as the root of
    a user namespace of its own. Unprivileged Baton: its own uid, the same empty sets."""
    p = project
    sandbox = sandbox_of(p)
    pool = warm.WarmSandboxes(sandbox)
    probe = PRIVILEGES.format(pid=os.getpid())
    try:
        ctx = context(p, pool)
        cold = await run_bash(probe, ctx)
        warmed = await run_bash(probe, ctx)
        assert pool.cold == 1 and pool.taken == 1
    finally:
        await pool.close()
    assert warmed == cold, (warmed, cold)
    fields = dict(line.split(":", 1) for line in cold.splitlines() if ":" in line)
    fields = {k: " ".join(v.split()) for k, v in fields.items()}
    for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert fields[name] == "0000000000000000", (name, cold)
    assert fields["NoNewPrivs"] == "1"
    uid = 65534 if os.geteuid() == 0 else os.getuid()
    assert fields["Uid"] == " ".join([str(uid)] * 4)
    if os.geteuid() == 0:  # as nobody: nogroup, and no supplementary group at all
        assert sandbox.user is not None and fields["Gid"] == " ".join([str(sandbox.user.gid)] * 4)
        assert fields["Groups"] == ""
    for denied in ("shadow=denied", "environ=denied", "setuid=denied", "userns=denied"):
        assert denied in cold.splitlines(), (denied, cold)
    if os.geteuid() == 0 and shutil.which("capsh") is not None:
        assert sandbox.capsh is not None, "capsh is installed but the stub does not drop with it"
