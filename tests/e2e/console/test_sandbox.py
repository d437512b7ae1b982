"""Steps run in the sandbox (`core/engine/sandbox.py`), through the real `baton say` and
`baton run`: real bubblewrap, real escape attempts, as a careless or hostile author would.

Baton holds chat tokens (environment and `.env`), an OpenAI key only in `.env`, a secrets
file, and its SQLite database in the data directory, as the README sets it up. A bash step,
a script step and a tool step try to read all of it, by relative and absolute paths, through
`/proc/*/environ` (base64-encoded, so redaction cannot hide what it got), list other runs,
write outside their run directory and leave a detached process behind. Nothing they print,
nothing Baton replies and no file they wrote holds a secret, the database or Baton's process;
nothing they started outlives them; as root they run as `nobody`. `network: false` blocks a
connection to a port the test listens on; no step reaches a socket of the machine's runtime
directory (a PostgreSQL server's), with or without network. Without a working sandbox, `baton run` on a chat
platform refuses to start (exit 2), and the console says once that steps run unsandboxed.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import shutil
import socket
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.store.repository import SqlStore
from tests.e2e import leak
from tests.e2e.console.cli import BatonCli
from tests.e2e.console.terminal import Terminal
from tests.unix_service import answering

pytestmark = pytest.mark.bwrap

SQLITE_MAGIC = b"SQLite format 3"
DOTENV_ONLY = "sk-leakcheck-dotenv-3f1e"  # Baton's OpenAI key, kept only in `.env`
SECRETS = (*leak.ALL, DOTENV_ONLY)


@pytest.fixture
def cli(tmp_path: Path) -> BatonCli:
    """`baton` in a project directory laid out as the README says: `.env`, `workflows/`,
    `.baton/baton.db` and `.baton/runs/`, a secrets file beside them; chat tokens set."""
    home = tmp_path / "project"
    home.mkdir()
    cli = BatonCli.create(home, f"sqlite:///{home / '.baton' / 'baton.db'}")
    cli.cold = True  # steps read /proc/*/environ and cmdline: Baton's as started, never a fork's
    (home / ".env").write_text(f"BATON_OPENAI_API_KEY={DOTENV_ONLY}\n")
    secrets_file = leak.write_secrets_file(home / "step-secrets.env")
    cli.env_extra.update(
        BATON_SLACK_BOT_TOKEN=leak.SLACK_BOT,
        BATON_SLACK_APP_TOKEN=leak.SLACK_APP,
        BATON_SLACK_SIGNING_SECRET=leak.SLACK_SIGNING,
        BATON_DISCORD_TOKEN=leak.DISCORD,
        BATON_SECRETS_FILE=str(secrets_file),
        BATON_WEB_PORT="off",
    )
    return cli


def say(cli: BatonCli, text: str) -> list[dict[str, object]]:
    done = cli.run("say", "--json", "--wait", "--user", "ana", "--", text)
    assert done.returncode == 0, done.stderr
    for shown in (done.stdout, done.stderr):
        assert leak.leaks(shown) == [] and DOTENV_ONLY not in shown, shown
    return list(json.loads(done.stdout))


def outputs(cli: BatonCli, run_id: str) -> dict[str, str]:
    """node -> the output it recorded (what later steps would consume, unredacted)."""
    store = SqlStore(cli.database_url)
    try:
        return {
            e.node_id: store.blobs.get_blob(e.output_digest).decode()
            for e in store.steps.journal([run_id])
            if e.output_digest is not None
        }
    finally:
        store.close()


def decoded(text: str) -> bytes:
    """`text` with every base64 run in it decoded (what a step smuggled out)."""
    found = [text.encode()]
    for chunk in re.findall(r"[A-Za-z0-9+/=]{8,}", text):
        try:
            found.append(base64.b64decode(chunk + "=" * (-len(chunk) % 4)))
        except (binascii.Error, ValueError):
            continue
    return b"\n".join(found)


def assert_nothing_of_batons(data: bytes) -> None:
    for secret in SECRETS:
        assert secret.encode() not in data, f"{secret} escaped"
    assert SQLITE_MAGIC not in data, "the database escaped"
    assert b"bot.main" not in data, "the step saw Baton's process"


def run_files(cli: BatonCli, run_id: str) -> bytes:
    """Everything the step wrote in its run directory."""
    root = cli.home / ".baton" / "runs" / run_id
    return b"\n".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


ESCAPE = """\
name: escape
nodes:
  - id: attempt
    replay: pure
    bash: |
      b() {{ base64 -w0; echo; }}
      echo "id: $(id -u)"
      for f in ../../baton.db {db} ../../../.env {home}/.env {secrets} {db}-wal; do
        echo "cat $f: $(cat "$f" 2>&1 | b)"
        echo "strings $f: $(strings "$f" 2>&1 | b)"
      done
      echo "ls data: $(ls -la {home}/.baton {home}/.baton/runs ../.. .. 2>&1 | b)"
      echo "ls home: $(ls -la {home} ~ 2>&1 | b)"
      echo "environ: $(cat /proc/*/environ 2>&1 | b)"
      echo "cmdlines: $(cat /proc/*/cmdline 2>&1 | tr '\\0' ' ' | b)"
      echo "pids: $(ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' ')"
      for target in {home}/pwned ../../pwned ../other-run-pwned {workflows}/pwned /tmp/{token}; do
        echo x > "$target" 2>/dev/null && echo "wrote $target"
      done
      env -i setsid -f sh -c 'echo started > "$1"; exec sleep 300 {token_seconds}' sh "$PWD/leftover.pid"
      sleep 0.2
      cat /proc/*/environ 2>/dev/null | b > environ.b64
      cat ../../baton.db {secrets} ../../../.env 2>/dev/null > stolen.bin
      echo done
  - id: scripted
    replay: pure
    script: |
      import base64, pathlib
      for path in ["../../baton.db", "{db}", "{secrets}", "{home}/.env"]:
          try:
              data = pathlib.Path(path).read_bytes()
          except OSError as exc:
              data = str(exc).encode()
          print(path, base64.b64encode(data).decode())
  - id: tooled
    tool: steal
    with: {{paths: ["{db}", "../../baton.db", "{secrets}", "{home}/.env"]}}
"""

STEAL = """\
import base64
import os

from core.engine.tools import tool


@tool(replay="pure")
def steal(paths: list) -> dict:
    found = {"uid": os.getuid(), "environ": []}
    for path in paths:
        try:
            with open(path, "rb") as f:
                found[path] = base64.b64encode(f.read()).decode()
        except OSError as exc:
            found[path] = str(exc)
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    found["environ"].append(base64.b64encode(f.read()).decode())
            except OSError:
                pass
    return found
"""


def _gone(token: str, deadline: float = 5.0) -> bool:
    """No process on this machine has `token` in its command line (within `deadline`)."""
    until = time.monotonic() + deadline
    while True:
        alive = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    alive += [pid] if token.encode() in Path(f"/proc/{pid}/cmdline").read_bytes() else []
                except OSError:
                    continue
        if not alive or time.monotonic() > until:
            return not alive
        time.sleep(0.05)


def test_a_step_reaches_nothing_of_batons_and_leaves_nothing_running(cli: BatonCli) -> None:
    home = cli.home
    token = uuid.uuid4().hex
    token_seconds = f"0.{int(token[:8], 16) % 10**8:08d}"  # `sleep 300 0.x`: unique on this machine
    (cli.workflows / "tools.py").write_text(STEAL)
    (cli.workflows / "escape.yaml").write_text(
        ESCAPE.format(
            db=home / ".baton" / "baton.db", home=home, secrets=home / "step-secrets.env",
            workflows=cli.workflows, token=token, token_seconds=token_seconds,
        )
    )
    say(cli, "run flaky hello")  # another run: its directory exists beside the attempt's
    replies = say(cli, "run escape")

    (run,) = [r for r in cli.runs() if r.workflow == "escape"]
    assert run.status.value == "completed", replies
    recorded = outputs(cli, run.id)
    attempt, scripted, tooled = recorded["attempt"], recorded["scripted"], recorded["tooled"]
    shown = json.dumps(replies)
    for text in (attempt, scripted, tooled, shown):
        assert_nothing_of_batons(decoded(text))
    assert_nothing_of_batons(run_files(cli, run.id))
    for line in attempt.splitlines():
        if line.startswith("environ: "):
            assert_nothing_of_batons(base64.b64decode(line.removeprefix("environ: ")))
    written = home / ".baton" / "runs" / run.id / "environ.b64"
    assert_nothing_of_batons(base64.b64decode(written.read_text()))

    # it saw its own processes only (bwrap's init, bash and the few it ran); what it wrote
    # outside its run directory (if anything: a private /tmp, an empty stand-in) is not there
    pids = next(line for line in attempt.splitlines() if line.startswith("pids: ")).split()[1:]
    assert 0 < len(pids) < 10, pids
    for gone in (home / "pwned", home / ".baton" / "pwned", cli.workflows / "pwned", Path("/tmp") / token):
        assert not gone.exists()
    other_runs = [p.name for p in (home / ".baton" / "runs").iterdir() if p.name != run.id]
    assert other_runs and all(not (home / ".baton" / "runs" / r / "pwned").exists() for r in other_runs)
    assert all(r not in attempt for r in other_runs), "the step listed another run's directory"

    # the detached process started (its pid file) and did not outlive the step
    assert (home / ".baton" / "runs" / run.id / "leftover.pid").read_text() == "started\n"
    assert _gone(token_seconds), "a process the step detached outlived it"

    tool_answer = json.loads(tooled)
    if os.geteuid() == 0:  # Baton runs as root: its steps run as nobody
        assert "id: 65534" in attempt, attempt
        assert tool_answer["uid"] == 65534
    else:
        assert f"id: {os.getuid()}" in attempt


def test_network_false_blocks_a_connection_the_network_would_allow(cli: BatonCli) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        connect = f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected || echo refused"
        (cli.workflows / "net.yaml").write_text(textwrap.dedent(f"""\
            name: net
            nodes:
              - id: online
                bash: "{connect}"
              - id: offline
                network: false
                bash: "{connect}"
            """))
        (cli.workflows / "quiet.yaml").write_text(textwrap.dedent(f"""\
            name: quiet
            network: false
            nodes:
              - id: step
                bash: "{connect}"
              - id: allowed
                network: true
                bash: "{connect}"
            """))
        say(cli, "run net")
        say(cli, "run quiet")
    runs = {r.workflow: r.id for r in cli.runs()}
    net, quiet = outputs(cli, runs["net"]), outputs(cli, runs["quiet"])
    assert net["online"].strip() == "connected"  # the port is there ...
    assert net["offline"].strip() == "refused"  # ... and a step without network cannot reach it
    assert quiet["step"].strip() == "refused"  # the workflow's `network: false`
    assert quiet["allowed"].strip() == "connected"  # a node may say otherwise


@pytest.fixture
def machine_socket() -> Iterator[tuple[Path, str, list[str]]]:
    """A service's socket in the machine's runtime directory (`/run`, or the user's own
    `/run/user/<uid>` when the tests are not root) that anyone may connect to, telling every
    peer a token, as a database or Docker answers a peer it authenticates by uid: (its
    path, the token, the peers it answered)."""
    base = Path("/run") if os.geteuid() == 0 else Path(os.environ.get("XDG_RUNTIME_DIR") or "/nonexistent")
    if not (base.is_dir() and os.access(base, os.W_OK) and base.is_relative_to("/run")):
        pytest.skip("needs root or a runtime directory under /run (XDG_RUNTIME_DIR) to create a socket in")
    where = base / f"baton-test-{uuid.uuid4().hex[:12]}"
    where.mkdir(mode=0o755)
    path = where / "service.sock"
    try:
        with answering(path) as (token, answered):
            yield path, token, answered
    finally:
        shutil.rmtree(where, ignore_errors=True)


SOCKETS = """\
name: sockets
nodes:
  - id: listed
    bash: 'ls -a {dir} 2>&1; [ -S {path} ] && echo SOCKET-VISIBLE; echo "in /run: $(ls -A /run)"; true'
  - id: online
    script: &connect |
      import socket
      for path in {paths!r}:
          s = socket.socket(socket.AF_UNIX)
          s.settimeout(5)
          try:
              s.connect(path)
              print(path, "answered", s.recv(200).decode())
          except OSError as exc:
              print(path, "unreachable:", exc.strerror)
  - id: offline
    network: false
    script: *connect
"""
POSTGRES_SOCKET = Path("/run/postgresql/.s.PGSQL.5432")  # Debian's; its server trusts a peer's uid


def test_a_step_reaches_no_socket_of_the_machine_even_without_network(
    cli: BatonCli, machine_socket: tuple[Path, str, list[str]]
) -> None:
    """A socket file is reached through the file system, so `network: false` does not close
    it, and services answer a peer by its uid (Baton's, when Baton is not root; with its
    groups: `docker`): the machine's runtime directory is not in the sandbox."""
    path, token, answered = machine_socket
    paths = [str(path)] + ([str(POSTGRES_SOCKET)] if POSTGRES_SOCKET.is_socket() else [])
    (cli.workflows / "sockets.yaml").write_text(SOCKETS.format(dir=path.parent, path=path, paths=paths))
    replies = say(cli, "run sockets")
    (run,) = [r for r in cli.runs() if r.workflow == "sockets"]
    assert run.status.value == "completed", replies
    seen = outputs(cli, run.id)
    listed = seen["listed"]
    assert "No such file or directory" in listed and "SOCKET-VISIBLE" not in listed, listed
    assert path.parent.name not in listed.split("in /run:")[1] and "postgresql" not in listed, listed
    for node in ("online", "offline"):
        for tried in paths:
            assert f"{tried} unreachable: No such file or directory" in seen[node], seen[node]
    assert token not in json.dumps(seen) + json.dumps(replies) and answered == []
    with socket.socket(socket.AF_UNIX) as control:  # the socket really answers whoever reaches it
        control.connect(str(path))
        assert control.recv(200).decode() == token


LINKS = """\
name: links
nodes:
  - id: plant
    replay: pure
    bash: |
      mkdir -p .outputs
      ln -s {victim} .outputs/big.1.log
      rm -rf artifacts && ln -s {victim_dir} artifacts
      echo planted
  - id: big
    replay: pure
    depends_on: [plant]
    bash: 'head -c 5000 /dev/zero | tr "\\0" B'
  - id: after
    replay: pure
    depends_on: [big]
    bash: echo after
"""


def test_a_step_cannot_make_baton_write_or_give_away_a_file_through_a_link_it_left(cli: BatonCli) -> None:
    """Baton, outside the sandbox (as root here, or as the user owning Baton's own files),
    writes a long output's whole to `.outputs/<node>.<attempt>.log` and hands the run
    directory's `artifacts` to the step user before each step: a link a step left at either
    name is replaced or left alone, never followed (it overwrote a file of the step's
    choosing with the output, and gave a directory of its choosing to `nobody`)."""
    victim_dir = Path("/var/tmp") / f"baton-victim-{uuid.uuid4().hex[:12]}"
    victim_dir.mkdir(mode=0o755)
    victim = victim_dir / "config"
    victim.write_text("ORIGINAL\n")
    owner = victim_dir.stat().st_uid
    try:
        (cli.workflows / "links.yaml").write_text(LINKS.format(victim=victim, victim_dir=victim_dir))
        cli.env_extra["BATON_MAX_OUTPUT_BYTES"] = "1000"
        replies = say(cli, "run links")
        (run,) = [r for r in cli.runs() if r.workflow == "links"]
        assert run.status.value == "completed", replies
        assert victim.read_text() == "ORIGINAL\n" and victim.stat().st_size == 9
        assert victim_dir.stat().st_uid == owner and victim.stat().st_uid == owner
        whole = cli.home / ".baton" / "runs" / run.id / ".outputs" / "big.1.log"
        assert not whole.is_symlink() and whole.read_bytes() == b"B" * 5000
    finally:
        shutil.rmtree(victim_dir, ignore_errors=True)


GREEDY_TOOLS = """\
import gc
import os

from core.engine.tools import tool

# At import, look for Baton's settings (its tokens) in this process and write what was found
# where Baton could write: only a module Baton itself imported would manage both.
_found = [repr(o) for o in gc.get_objects() if type(o).__name__ == "Settings"]
try:
    with open({marker!r}, "w") as out:
        out.write(f"pid {{os.getpid()}} uid {{os.getuid()}} settings {{_found}}")
except OSError:
    pass


@tool(replay="pure")
def greet(name: str) -> str:
    return f"hello {{name}} from uid {{os.getuid()}}"
"""


def test_baton_never_imports_a_tool_module_itself(cli: BatonCli) -> None:
    """A tool module's import-time code runs where its calls do, in the step sandbox: it finds
    none of Baton's objects and cannot write outside it; the tool still registers and runs."""
    marker = Path("/var/tmp") / f"baton-imported-{uuid.uuid4().hex}"
    (cli.workflows / "tools.py").write_text(GREEDY_TOOLS.format(marker=str(marker)))
    (cli.workflows / "greeting.yaml").write_text(
        "name: greeting\nnodes:\n  - id: hi\n    replay: pure\n    tool: greet\n    with: {name: ana}\n"
    )
    try:
        listed = cli.run("list")
        replies = say(cli, "run greeting")
        assert not marker.exists(), marker.read_text()
    finally:
        marker.unlink(missing_ok=True)
    assert listed.returncode == 0 and "greeting" in listed.stdout, listed.stdout + listed.stderr
    (run,) = [r for r in cli.runs() if r.workflow == "greeting"]
    assert run.status.value == "completed", replies
    uid = 65534 if os.geteuid() == 0 else os.getuid()
    assert outputs(cli, run.id)["hi"] == f"hello ana from uid {uid}"


TERMINAL_PROBE = (
    "if (exec 3<>/dev/tty) 2>/dev/null; then echo TERMINAL-OPENED; else echo NO-TERMINAL; fi; "
    "for fd in 0 1 2; do [ -t $fd ] && echo TERMINAL-ON-$fd; done; true"
)


def test_a_step_gets_no_terminal_even_when_baton_has_one(cli: BatonCli) -> None:
    """Baton started from a terminal (its controlling terminal, on its stdin, stdout and
    stderr): a step can open none of it, so it cannot push input into it (TIOCSTI)."""
    (cli.workflows / "tty.yaml").write_text(
        f"name: tty\nnodes:\n  - id: probe\n    bash: '{TERMINAL_PROBE}'\n"
    )
    env = cli.env() | {"BATON_STEP_SANDBOX": "bwrap", "TERM": "dumb"}
    control = Terminal(["setsid", "-c", "bash", "-c", TERMINAL_PROBE], cwd=cli.home, env=env)
    try:
        control.expect("TERMINAL-OPENED")  # the harness really gives a controlling terminal
    finally:
        control.close()
    say_tty = [sys.executable, "-m", "bot.main", "say", "--json", "--wait", "--", "run tty"]
    argv = ["setsid", "--wait", "-c", *say_tty]
    baton = Terminal(argv, cwd=cli.home, env=env)
    try:
        assert baton.wait(timeout=60) == 0, baton.output
    finally:
        baton.close()
    (run,) = [r for r in cli.runs() if r.workflow == "tty"]
    assert outputs(cli, run.id)["probe"].strip() == "NO-TERMINAL", baton.output


@pytest.mark.parametrize("where", ["workflow", "node"])
def test_network_must_be_true_or_false(cli: BatonCli, where: str) -> None:
    odd = (
        "name: odd\nnetwork: sometimes\nnodes:\n  - id: a\n    bash: echo\n"
        if where == "workflow"
        else "name: odd\nnodes:\n  - id: a\n    network: 0\n    bash: echo\n"
    )
    (cli.workflows / "odd.yaml").write_text(odd)
    done = cli.run("say", "--json", "--", "run odd")
    shown = "\n".join(str(r["text"]) for r in json.loads(done.stdout))
    assert "odd.yaml" in shown and "`network`" in shown and "valid boolean" in shown, shown
    assert "Write `network:` as true or false." in shown
    assert cli.runs() == []  # refused at load: nothing ran


@pytest.fixture
def broken_bwrap(tmp_path: Path) -> Iterator[Path]:
    """A PATH whose `bwrap` cannot create a sandbox (as where user namespaces are disabled)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    for tool in ("bash", "sh", "setpriv", "echo", "cat"):
        real = shutil.which(tool)
        if real is not None:
            (bin_dir / tool).symlink_to(real)
    yield bin_dir


def test_baton_run_on_a_chat_platform_refuses_to_start_without_a_sandbox(
    cli: BatonCli, broken_bwrap: Path
) -> None:
    for mode in ("auto", "bwrap"):
        cli.env_extra.update(PATH=str(broken_bwrap), BATON_STEP_SANDBOX=mode)
        done = cli.run("run")
        assert done.returncode == 2, (mode, done.stdout, done.stderr)
        (error,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert "apt-get install bubblewrap" in error and "BATON_STEP_SANDBOX=none" in error, error
        assert "No permissions to create a new namespace" in error  # the probe really ran it
        assert leak.leaks(done.stderr) == []
        assert not (cli.home / ".baton" / "baton.db").exists()  # refused before anything opened


def test_the_console_runs_unsandboxed_with_auto_and_says_so_once(cli: BatonCli, broken_bwrap: Path) -> None:
    cli.env_extra.update(PATH=str(broken_bwrap), BATON_STEP_SANDBOX="auto")
    done = cli.run("say", "--json", "--wait", "--", "run flaky hello")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("steps run without a sandbox") == 1, done.stderr
    assert json.loads(done.stdout)[-1]["run_status"] == "completed"


def test_a_step_has_a_writable_home_of_its_own_and_batons_stays_untouched(cli: BatonCli) -> None:
    home = cli.home / "batons-home"  # Baton's $HOME, hidden from its steps
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = baton-operator\n")
    (home / "kept-in-home").write_text("Baton's own")
    cli.env_extra["HOME"] = str(home)
    (cli.workflows / "tooling.yaml").write_text(textwrap.dedent("""\
        name: tooling
        nodes:
          - id: a
            bash: |
              git config --global user.name ci-bot && git config --global user.name
              mkdir -p "$HOME/.npm" && echo cached > "$HOME/.npm/x" && cat "$HOME/.npm/x"
              ls -A "$HOME"
          - id: b
            depends_on: [a]
            bash: |
              test ! -e "$HOME/.npm" && test ! -e "$HOME/.gitconfig" && echo fresh-home
        """))

    say(cli, "run tooling")

    (run,) = [r for r in cli.runs() if r.workflow == "tooling"]
    assert run.status.value == "completed"
    recorded = outputs(cli, run.id)
    assert recorded["a"].startswith("ci-bot\ncached\n"), recorded["a"]
    assert "kept-in-home" not in recorded["a"]  # the home a step sees is empty at its start
    assert recorded["b"] == "fresh-home\n"  # each step its own
    assert (home / ".gitconfig").read_text() == "[user]\n\tname = baton-operator\n"
    assert sorted(p.name for p in home.iterdir()) == [".gitconfig", "kept-in-home"]


def test_a_step_can_use_shared_memory_and_a_pty_as_on_a_plain_machine(cli: BatonCli) -> None:
    """Python's multiprocessing (its semaphores live in /dev/shm) and a pseudo-terminal; with
    Baton as root, bwrap's /dev/shm was root's and a Pool died with EACCES."""
    (cli.workflows / "parallel.yaml").write_text(textwrap.dedent("""\
        name: parallel
        nodes:
          - id: a
            script: |
              import multiprocessing, os, pty
              with multiprocessing.Pool(2) as pool:
                  print("pool", sum(pool.map(abs, [-1, -2, 3])))
              print("pty", os.ttyname(pty.openpty()[1]).startswith("/dev/pts/"))
        """))

    say(cli, "run parallel")

    (run,) = [r for r in cli.runs() if r.workflow == "parallel"]
    assert run.status.value == "completed"
    assert outputs(cli, run.id)["a"] == "pool 6\npty True\n"


def test_a_step_cannot_fill_the_machines_memory_through_its_tmpfs(cli: BatonCli) -> None:
    """/tmp, /dev/shm and $HOME are memory no process is charged for: each is bounded."""
    cli.env_extra["BATON_STEP_TMP_BYTES"] = str(8 << 20)
    (cli.workflows / "hoard.yaml").write_text(textwrap.dedent("""\
        name: hoard
        nodes:
          - id: a
            bash: |
              for where in /tmp /dev/shm "$HOME"; do
                head -c 12582912 /dev/zero > "$where/hoard" 2>/dev/null && echo took || echo full
              done
        """))

    say(cli, "run hoard")

    (run,) = [r for r in cli.runs() if r.workflow == "hoard"]
    assert outputs(cli, run.id)["a"] == "full\nfull\nfull\n"


def test_a_fork_bomb_stops_at_the_steps_process_limit(cli: BatonCli) -> None:
    """BATON_STEP_MAX_PROCESSES: without it, a step's processes could take every pid of the
    machine, and Baton could start neither a step nor a thread until the step timed out."""
    cli.env_extra["BATON_STEP_MAX_PROCESSES"] = "200"  # (the step user's processes: other tests' too)
    (cli.workflows / "bomb.yaml").write_text(textwrap.dedent("""\
        name: bomb
        nodes:
          - id: a
            script: |
              import os, resource, signal
              soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
              started = []
              try:
                  for _ in range(1000):
                      pid = os.fork()
                      if pid == 0:
                          signal.pause()
                      started.append(pid)
              except BlockingIOError:
                  print("refused")
              print(soft, hard, len(started) < 200)
              try:
                  resource.setrlimit(resource.RLIMIT_NPROC, (100_000, 100_000))
              except ValueError:
                  print("cannot raise it")
        """))

    say(cli, "run bomb")

    (run,) = [r for r in cli.runs() if r.workflow == "bomb"]
    assert outputs(cli, run.id)["a"] == "refused\n200 200 True\ncannot raise it\n"


def test_a_step_that_meets_a_bound_of_its_sandbox_is_told_which(cli: BatonCli) -> None:
    """The three a team meets first: a write outside its directories, a full /tmp, and the
    process limit; each failure says which bound, with its setting."""
    cli.env_extra.update(BATON_STEP_TMP_BYTES=str(1 << 20), BATON_STEP_MAX_PROCESSES="200")
    steps = {
        "outside": "bash: echo x > /etc/baton-probe",
        "full": "bash: head -c 2000000 /dev/zero > /tmp/big",
        "forks": "script: |\n      import os, signal\n      while True:\n          if os.fork() == 0:\n"
                 "              signal.pause()",
    }
    told = {}
    for name, step in steps.items():
        (cli.workflows / f"{name}.yaml").write_text(f"name: {name}\nnodes:\n  - id: a\n    {step}\n")
        told[name] = str(say(cli, f"run {name}")[-1]["text"])
    assert "In its sandbox a step writes only its run directory, /tmp, /dev/shm and $HOME" in told["outside"]
    assert "each holds at most BATON_STEP_TMP_BYTES" in told["full"], told["full"]
    assert "at most BATON_STEP_MAX_PROCESSES processes" in told["forks"], told["forks"]
