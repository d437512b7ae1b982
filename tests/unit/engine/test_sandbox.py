"""`core/engine/sandbox.py`: the probe (real bubblewrap, and a broken one), the settings, and
the mounts a step gets, checked by running commands in the real sandbox."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from core.engine.sandbox import HIDDEN_SIZE, NO_SANDBOX, configure, step_user
from core.errors import ConfigurationError

needs_bwrap = pytest.mark.bwrap


def _broken_path(tmp_path: Path) -> str:
    """A PATH whose `bwrap` fails as it does where user namespaces are disabled."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    real = shutil.which("setpriv")
    if real is not None:
        (bin_dir / "setpriv").symlink_to(real)
    return str(bin_dir)


def test_none_runs_argv_as_it_is() -> None:
    assert configure("none") is NO_SANDBOX
    assert NO_SANDBOX.command(["bash", "-c", "true"], workdir=Path("/")) == ["bash", "-c", "true"]
    assert not NO_SANDBOX.enabled


def test_bwrap_without_a_working_bubblewrap_is_a_one_line_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as missing:
        configure("bwrap", path=str(tmp_path))
    assert "bwrap was not found" in missing.value.message
    said = missing.value.message
    assert "apt-get install bubblewrap" in said and "BATON_STEP_SANDBOX=none" in said
    with pytest.raises(ConfigurationError) as broken:
        configure("bwrap", path=_broken_path(tmp_path))
    assert "setting up uid map: Permission denied" in broken.value.message  # what the probe ran said
    assert "\n" not in broken.value.message and broken.value.hint == ""


def test_auto_without_a_working_bubblewrap_says_why(tmp_path: Path) -> None:
    sandbox = configure("auto", path=_broken_path(tmp_path))
    assert not sandbox.enabled
    assert "setting up uid map" in sandbox.reason
    assert sandbox.command(["true"], workdir=tmp_path) == ["true"]


def test_step_user_names_an_unprivileged_account() -> None:
    nobody = step_user("nobody")
    assert nobody.uid == 65534 and nobody.name == "nobody"
    assert step_user("1234:5678").uid == 1234 and step_user("1234:5678").gid == 5678
    with pytest.raises(ConfigurationError, match="is root"):
        step_user("root")
    with pytest.raises(ConfigurationError, match="no user"):
        step_user("no-such-user-here")


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """A project as Baton lays it out: workflows (with a stray `.env` in it), a data directory
    with two runs and the database, a secrets file; all readable by the step user."""
    tmp_path.chmod(0o755)
    project = tmp_path / "project"
    workflows = project / "workflows"
    data = project / ".baton"
    run, other = data / "runs" / "mine", data / "runs" / "other"
    for d in (workflows, run, other):
        d.mkdir(parents=True)
    for d in (project, workflows, data, data / "runs", run):
        d.chmod(0o777)
    (workflows / "flow.yaml").write_text("name: flow\n")
    (workflows / ".env").write_text("TOKEN=in-the-workflow-dir\n")
    (project / ".env").write_text("TOKEN=in-the-project\n")
    (project / "secrets.env").write_text("NPM=secret-value\n")
    (data / "baton.db").write_text("SQLite format 3 pretend\n")
    (other / "out.txt").write_text("another run's file\n")
    return {"project": project, "workflows": workflows, "data": data, "run": run}


def _run(sandbox_args: list[str]) -> str:
    done = subprocess.run(sandbox_args, capture_output=True, text=True, timeout=30, check=False)
    return done.stdout + done.stderr


@needs_bwrap
def test_a_step_sees_its_dirs_and_nothing_baton_hides(layout: dict[str, Path]) -> None:
    p = layout
    sandbox = configure(
        "bwrap",
        hidden_dirs=[p["data"]],
        hidden_files=[p["project"] / ".env", p["workflows"] / ".env", p["project"] / "secrets.env"],
        readable=[p["project"], Path("/tmp")],  # Baton's code in the project; /tmp is never shown
    )
    script = (
        "cat flow.yaml 2>&1; cat ../../baton.db 2>&1; cat ../other/out.txt 2>&1; ls ../ 2>&1;"
        f" cat {p['workflows']}/flow.yaml; cat {p['workflows']}/.env {p['project']}/.env"
        f" {p['project']}/secrets.env 2>&1; echo written > here.txt;"
        f" echo x > {p['workflows']}/new.txt 2>&1 || echo read-only; ls /tmp"
    )
    host_only = Path("/tmp") / f"baton-host-only-{uuid.uuid4().hex}"
    host_only.write_text("host /tmp\n")
    try:
        argv = sandbox.command(["bash", "-c", script], workdir=p["run"], workflow_dir=p["workflows"])
        seen = _run(argv)
    finally:
        host_only.unlink()
    assert "name: flow" in seen  # its workflow directory, read-only
    assert "pretend" not in seen and "another run's file" not in seen and "other" not in seen.split()
    assert "in-the-workflow-dir" not in seen and "in-the-project" not in seen and "secret-value" not in seen
    assert "read-only" in seen and not (p["workflows"] / "new.txt").exists()
    assert (p["run"] / "here.txt").read_text() == "written\n"  # its run directory, read-write
    assert host_only.name not in seen  # a private /tmp, even when listed as readable


@needs_bwrap
def test_network_false_leaves_only_a_loopback(tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    sandbox = configure("bwrap")
    offline = sandbox.command(["cat", "/proc/net/dev"], workdir=tmp_path, network=False)
    online = sandbox.command(["cat", "/proc/net/dev"], workdir=tmp_path)
    assert "--unshare-net" in offline and "--unshare-net" not in online
    interfaces = [line.split(":")[0].strip() for line in _run(offline).splitlines() if ":" in line]
    assert interfaces == ["lo"]


@needs_bwrap
def test_a_workflow_directory_outside_every_hidden_one_is_read_only_too(tmp_path: Path) -> None:
    """Not under /tmp, a home or the data directory, the workflow directory is not bound again:
    the system's read-only view shows it, and the step still cannot write there."""
    workflows = Path("/var/tmp") / f"baton-workflows-{uuid.uuid4().hex[:12]}"
    workflows.mkdir(mode=0o777)
    workflows.chmod(0o777)  # even one the step user could write on the host
    try:
        (workflows / "flow.yaml").write_text("name: flow\n")
        tmp_path.chmod(0o777)
        sandbox = configure("bwrap")
        script = f"cat {workflows}/flow.yaml; echo x > {workflows}/new.txt 2>&1 || echo read-only"
        argv = sandbox.command(["bash", "-c", script], workdir=tmp_path, workflow_dir=workflows)
        assert str(workflows) not in argv  # not bound: shown by `--ro-bind / /`
        seen = _run(argv)
        assert "name: flow" in seen and "read-only" in seen, seen
        assert not (workflows / "new.txt").exists()
    finally:
        shutil.rmtree(workflows, ignore_errors=True)


@needs_bwrap
def test_a_steps_writable_tmpfs_hold_at_most_their_size_and_a_hidden_one_little(tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    home = tmp_path / "home"
    data = tmp_path / "data"
    for made in (home, data):
        made.mkdir()
    sandbox = configure("bwrap", hidden_dirs=[home, data], home=home, tmp_size=8 << 20)
    assert sandbox.tmp_size == 8 << 20
    fill = "; ".join(
        f"head -c {12 << 20} /dev/zero > {where}/f 2>/dev/null && echo {where}:took || echo {where}:full"
        for where in ("/tmp", "/dev/shm", str(home))
    )
    argv = sandbox.command(["bash", "-c", f"{fill}; df -k {data} | tail -1"], workdir=tmp_path / "run")
    (tmp_path / "run").mkdir()
    (tmp_path / "run").chmod(0o777)
    seen = _run(argv)
    assert "/tmp:full" in seen and "/dev/shm:full" in seen and f"{home}:full" in seen, seen
    assert seen.strip().splitlines()[-1].split()[1] == str(HIDDEN_SIZE >> 10)  # the data dir's size, in KiB


@needs_bwrap
def test_a_bubblewrap_without_size_still_sandboxes_and_says_its_tmpfs_are_unbounded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, request: pytest.FixtureRequest
) -> None:
    """bubblewrap before 0.5 knows no `--size` (Debian 11 has 0.4.1)."""
    bin_dir = Path("/var/tmp") / f"baton-old-bwrap-{uuid.uuid4().hex[:12]}"  # not in /tmp: the
    bin_dir.mkdir()  # sandbox's own /tmp is empty, and setpriv is run from here inside it
    request.addfinalizer(lambda: shutil.rmtree(bin_dir))
    old = bin_dir / "bwrap"
    old.write_text(
        "#!/bin/sh\nfor a in \"$@\"; do\n"
        "  [ \"$a\" = --size ] && { echo 'bwrap: Unknown option --size' >&2; exit 1; }\n"
        f"done\nexec {shutil.which('bwrap')} \"$@\"\n"
    )
    old.chmod(0o755)
    for tool in ("setpriv", "capsh", "dash"):
        if (real := shutil.which(tool)) is not None:
            (bin_dir / tool).symlink_to(real)
    sandbox = configure("bwrap", path=str(bin_dir), tmp_size=8 << 20)
    assert sandbox.enabled and sandbox.tmp_size is None
    assert "--size" not in sandbox.command(["true"], workdir=tmp_path)
    assert any(r.__dict__.get("action") == "step_tmp_unbounded" for r in caplog.records)


@needs_bwrap
def test_a_baton_that_is_not_root_limits_each_steps_processes_with_prlimit(tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    sandbox = configure("bwrap", max_processes=300, as_root=False)
    assert sandbox.user is None and sandbox.prlimit is not None
    argv = sandbox.command(["bash", "-c", "ulimit -u; ulimit -Hu"], workdir=tmp_path)
    assert argv[argv.index("--") + 1 :] == [sandbox.prlimit, "--nproc=300:300", "--", "bash", "-c",
                                           "ulimit -u; ulimit -Hu"]
    assert _run(argv).split() == ["300", "300"]


def test_as_root_the_steps_process_limit_is_batons_own(tmp_path: Path) -> None:
    """The kernel never holds root to RLIMIT_NPROC; a step is, once it has dropped to the
    step user, and it inherits Baton's limit (soft and hard: it cannot raise it)."""
    code = (
        "import resource\n"
        "from core.engine.sandbox import Sandbox, StepUser, limit_processes\n"
        "limit_processes(Sandbox(bwrap='bwrap', user=StepUser('nobody', 65534, 65534), max_processes=123))\n"
        "print(resource.getrlimit(resource.RLIMIT_NPROC))\n"
        "limit_processes(Sandbox(bwrap='bwrap', max_processes=7))  # not root: changes nothing\n"
        "print(resource.getrlimit(resource.RLIMIT_NPROC))\n"
    )
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          check=True, cwd=root)
    assert done.stdout.split("\n")[:2] == ["(123, 123)", "(123, 123)"]
