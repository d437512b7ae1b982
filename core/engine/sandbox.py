"""The sandbox every step process runs in: bubblewrap (`bwrap`), set up once at start.

A step (bash, script, the `command` prompt provider, a tool) is code a workflow author wrote
or text a model produced; Baton holds chat tokens, the run store, the page-signing key and
every workflow's secrets. So a step runs as

    bwrap --ro-bind / /                 the system, read-only
          --dev /dev --proc /proc       a minimal /dev; a /proc of its own PID namespace
          --tmpfs /tmp                  a private /tmp
          --tmpfs /dev/shm              and /dev/shm (POSIX shared memory and semaphores:
                                        Python's multiprocessing, browsers), both 1777; each
                                        writable tmpfs holds at most `tmp_size` bytes
                                        (BATON_STEP_TMP_BYTES), a hidden one `HIDDEN_SIZE`: a
                                        tmpfs is memory no process is charged for, so a step
                                        filling one could leave the OOM killer only Baton
          --tmpfs <Baton's home>        hidden (an empty, throw-away directory), and the step's
                                        `$HOME`: writable by the step user (1777, like /tmp), so
                                        `git config --global`, npm's or pip's caches work
          --tmpfs /run                  hidden: the machine's sockets (the database's, Docker's,
                                        D-Bus, the user's runtime directory) answer a peer by
                                        its uid, which is Baton's when Baton is not root;
                                        `network: false` does not close a socket file
          --ro-bind <resolv.conf>       shown again, when /etc/resolv.conf points into /run
          --ro-bind <workflow dir>      its workflow's files, read-only (when a hidden directory
                                        holds them; else `/` shows them read-only already)
          --tmpfs <data dir>            hidden: the database, other runs, keys
          --bind <run dir>              its own run directory, read-write (its cwd)
          --ro-bind /dev/null <file>    `.env`, the secrets file, the database file: empty
          --unshare-pid                 sees no other process; when its first process ends,
                                        the kernel kills every process it started
          --unshare-net                 with `network: false` only (loopback alone)
          --die-with-parent
          --new-session                 unless the caller starts bwrap in a session of its own
                                        (`own_session`, as every step's process is)
          [setpriv --reuid <user> …]    when Baton runs as root: as `BATON_STEP_USER`, no groups,
                                        every capability set empty, no new privileges
                                        (a warmed sandbox's stub: `capsh`, the same drop,
                                        cheaper, when installed and it works here)

`configure` probes the real thing once (a trivial command with the same options) and says
whether steps are sandboxed; `Sandbox.command` wraps one step's argv. `NO_SANDBOX` runs
argv as it is (`BATON_STEP_SANDBOX=none`, or no working bwrap with `auto`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import resource
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core.errors import ConfigurationError

log = logging.getLogger("baton.sandbox")

Mode = Literal["auto", "bwrap", "none"]
PROBE_TIMEOUT = 10.0  # seconds the probe may take on a busy machine
HIDDEN_SIZE = 1 << 20  # bytes of a hidden directory's tmpfs (only Baton's own bind points in it)
_DROPPED = ("--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--clear-groups")
#: what `setpriv` or `capsh` keeps to drop to the step user: set ids, clear the bounding set
#: (without CAP_SETPCAP setpriv's `--bounding-set=-all` left it full, silently)
_DROP_NEEDS = ("--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP")
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap) "
    "and allow user namespaces, or set BATON_STEP_SANDBOX=none to run steps unsandboxed deliberately"
)


@dataclass(frozen=True, slots=True)
class StepUser:
    """The unprivileged account steps run as when Baton runs as root."""

    name: str
    uid: int
    gid: int


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How step processes are started. `bwrap` None: as they are, with Baton's user."""

    bwrap: str | None = None
    #: directories replaced by an empty tmpfs (Baton's data directory, its home, the database's)
    hidden_dirs: tuple[Path, ...] = ()
    #: the one of them that is the step's `$HOME` (Baton's home): writable by the step user
    home: Path | None = None
    #: bytes each of the step's writable tmpfs (/tmp, /dev/shm, $HOME) may hold; None: no
    #: bound (a bwrap older than 0.5, without `--size`)
    tmp_size: int | None = None
    #: processes (threads included) a step may have (`RLIMIT_NPROC`, BATON_STEP_MAX_PROCESSES):
    #: a fork bomb stops there instead of taking every pid of the machine, Baton's included.
    #: As root, Baton's own limit (`limit_processes`: root is never held to it, its steps are
    #: once they drop to the step user); otherwise `prlimit` (util-linux) inside the sandbox
    max_processes: int | None = None
    prlimit: str | None = None
    #: files replaced by an empty one (`.env`, the secrets file, the database file)
    hidden_files: tuple[Path, ...] = ()
    #: read-only though under a hidden directory: the Python interpreter, its libraries and
    #: Baton's own code (what `script:` steps and the tool runner import)
    readable: tuple[Path, ...] = ()
    #: files shown again read-only though under a hidden directory (`/etc/resolv.conf`'s
    #: target, when it lies in /run): a file, never its directory and the sockets beside it
    shown_files: tuple[Path, ...] = ()
    #: set when Baton runs as root: steps run as this user (`setpriv`)
    user: StepUser | None = None
    setpriv: str | None = None
    #: with `user`: what a warmed sandbox's stub (`shell`) drops to it with, when found and it
    #: works: `capsh` (libcap), the same drop as `setpriv` for ≈ 0.5 ms less CPU a step (no
    #: locale, no passwd or group lookups, no libcap-ng reading /proc); None: `setpriv`
    capsh: str | None = None
    #: why steps are not sandboxed (empty when they are)
    reason: str = ""
    #: what a warmed sandbox's stub runs on (`core/engine/warm.py`): `dash`, found on PATH at
    #: start; None: steps start cold only
    shell: str | None = None

    @property
    def can_warm(self) -> bool:
        """Steps may take a sandbox set up before they need it (`core/engine/warm.py`)."""
        return self.bwrap is not None and self.shell is not None

    @property
    def enabled(self) -> bool:
        return self.bwrap is not None

    def command(
        self,
        argv: Sequence[str],
        *,
        workdir: Path,
        workflow_dir: Path | None = None,
        network: bool = True,
        files: Mapping[Path, Path] | None = None,
        readable: Sequence[Path] = (),
        own_session: bool = False,
    ) -> list[str]:
        """`argv` run in the sandbox, in `workdir` (read-write); `files` maps host files to
        where the step sees them (read-only); `readable` directories are shown read-only
        (a tool's module), though what Baton hides in them stays hidden.

        `own_session`: the caller starts bwrap in a new session (`start_new_session=True`),
        which leaves it no controlling terminal and holds no terminal's descriptor, so the
        step cannot push input into one (what bwrap's `--new-session` is for) and a second
        `setsid` inside is not needed: it made the kernel create a scheduler autogroup per
        step, which cost 1–5 ms a step on a busy machine."""
        if self.bwrap is None:
            return list(argv)
        args = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        args += [*self._tmpfs("/tmp"), *self._tmpfs("/dev/shm")]
        args += self._layers(workdir, workflow_dir, files or {}, readable)
        args += ["--unshare-pid", "--unshare-ipc", "--die-with-parent"]
        if not own_session:
            args.append("--new-session")
        if not network:
            args.append("--unshare-net")
        args += ["--chdir", str(workdir)]
        user = self.user
        if user is not None and self.capsh is not None and argv and argv[0] == self.shell:  # a warmed stub
            args += ["--cap-drop", "ALL", *_DROP_NEEDS, "--", self.capsh, "--drop=all", "--inh=", "--groups="]
            args += [f"--gid={user.gid}", f"--uid={user.uid}", "--caps=", f"--shell={argv[0]}", "--"]
            return args + list(argv[1:])
        if user is not None and self.setpriv is not None:
            args += ["--cap-drop", "ALL", *_DROP_NEEDS, "--"]
            args += [self.setpriv, f"--reuid={user.uid}", f"--regid={user.gid}", *_DROPPED]
        elif self.prlimit is not None and self.max_processes is not None:  # (a warmed stub's too)
            args += ["--", self.prlimit, f"--nproc={self.max_processes}:{self.max_processes}", "--"]
        else:
            args.append("--")
        return args + list(argv)

    def _tmpfs(self, path: Path | str, *, hidden: bool = False) -> list[str]:
        """A new tmpfs at `path`: the step's to write (1777, `tmp_size`), or `hidden` (0755,
        `HIDDEN_SIZE`)."""
        size = None if self.tmp_size is None else HIDDEN_SIZE if hidden else self.tmp_size
        bound = [] if size is None else ["--size", str(size)]
        return ["--perms", "0755" if hidden else "1777", *bound, "--tmpfs", str(path)]

    def _layers(
        self, workdir: Path, workflow_dir: Path | None, files: Mapping[Path, Path], readable: Sequence[Path]
    ) -> list[str]:
        """The mounts, in an order where each one that must show wins over each one that must
        hide: homes and data directories first, then the workflow directory, the run directory,
        and last the hidden files (which may lie in the workflow directory)."""
        args: list[str] = []
        hidden_dirs = [d for d in self.hidden_dirs if d.is_dir()]
        empty = [_TMP, *hidden_dirs]  # directories that start empty in the sandbox
        made: set[Path] = set()

        def bind(option: str, source: Path, target: Path) -> None:
            for parent in reversed(target.parents):  # traversable by the step's user
                if parent not in made and any(_within(parent, e) and parent != e for e in empty):
                    args.extend(["--perms", "0755", "--dir", str(parent)])
                    made.add(parent)
            args.extend([option, str(source), str(target)])
            made.add(target)

        for hidden in hidden_dirs:
            args += self._tmpfs(hidden, hidden=hidden != self.home)
        shown = [*self.readable, *readable, *([workflow_dir] if workflow_dir is not None else [])]
        shown = [p for p in shown if p.is_dir() and any(_within(p, e) for e in empty)]
        shown = [p for p in shown if not _within(_TMP, p) and p not in hidden_dirs]  # /tmp stays private
        shown = [p for p in shown if not any(_within(p, q) and p != q for q in shown)]
        for path in dict.fromkeys(shown):  # the interpreter or the workflow in a hidden home
            bind("--ro-bind", path, path)
        for hidden in hidden_dirs:  # and what must stay hidden inside them, hidden again
            if any(_within(hidden, p) and hidden != p for p in shown):
                args += self._tmpfs(hidden, hidden=hidden != self.home)
        for path in self.shown_files:  # a system file in a hidden directory (resolv.conf in /run)
            gone = any(_within(path, e) for e in hidden_dirs) and not any(_within(path, d) for d in shown)
            if gone and path.is_file():
                bind("--ro-bind", path, path)
        # a workflow directory outside every hidden one is read-only already (`--ro-bind / /`):
        # binding it again cost a step a mount and bwrap's re-read of the mount table (≈ 5 %)
        bind("--bind", workdir, workdir)
        bound = [*shown, workdir, *([workflow_dir] if workflow_dir is not None else [])]
        for hidden_file in self.hidden_files:
            in_empty = any(_within(hidden_file, e) for e in empty)
            gone = in_empty and not any(_within(hidden_file, b) for b in bound)
            if hidden_file.is_file() and not gone:  # (a file in an empty directory is not there)
                args += ["--ro-bind", "/dev/null", str(hidden_file)]
        for source, target in files.items():
            bind("--ro-bind", source, target)
        return args

    def prepare(self, workdir: Path) -> None:
        """Let the step user write its run directory (Baton as root, steps as nobody). A name a
        step replaced (`artifacts` made a symlink to `/etc`) is left as it is: only a real
        directory is given away, never what a link points to."""
        if self.bwrap is None or self.user is None:
            return
        for path in (workdir, workdir / "artifacts"):
            try:
                info = path.lstat()
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode) and info.st_uid != self.user.uid:
                os.chown(path, self.user.uid, self.user.gid, follow_symlinks=False)

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """The step's variables as seen inside: its temporary directory is the private /tmp."""
        if self.bwrap is not None and "TMPDIR" in env:
            env["TMPDIR"] = "/tmp"
        return env

    def describe(self) -> str:
        if self.bwrap is None:
            return f"steps run without a sandbox ({self.reason})"
        who = f", as {self.user.name}" if self.user is not None else ""
        return f"steps run in a bubblewrap sandbox{who}"


NO_SANDBOX = Sandbox(reason="BATON_STEP_SANDBOX=none")


_TMP = Path("/tmp")


def _within(path: Path, folder: Path) -> bool:
    """`path` is `folder` or lies in it, lexically (as `Path.is_relative_to`, which parses
    both paths again on every call: 87 calls cost a step ≈ 1 ms, more than bwrap's mounts)."""
    inner, outer = str(path), str(folder)
    return inner == outer or inner.startswith(outer if outer.endswith("/") else outer + "/")


def step_user(name: str) -> StepUser:
    """`BATON_STEP_USER`: a user name, or `uid[:gid]`."""
    import pwd

    text = name.strip()
    try:
        if text.replace(":", "").isdigit():
            uid_text, _, gid_text = text.partition(":")
            uid = int(uid_text)
            gid = int(gid_text) if gid_text else pwd.getpwuid(uid).pw_gid
            return StepUser(text, uid, gid)
        entry = pwd.getpwnam(text)
    except (KeyError, ValueError):
        raise ConfigurationError(
            f"BATON_STEP_USER: no user `{name}` on this machine",
            hint="Name an unprivileged user that exists (default: nobody), or a numeric uid[:gid].",
        ) from None
    if entry.pw_uid == 0:
        raise ConfigurationError(
            f"BATON_STEP_USER: `{name}` is root", hint="Name an unprivileged user (default: nobody)."
        )
    return StepUser(text, entry.pw_uid, entry.pw_gid)


def configure(
    mode: Mode,
    *,
    hidden_dirs: Iterable[Path] = (),
    hidden_files: Iterable[Path] = (),
    readable: Iterable[Path] = (),
    shown_files: Iterable[Path] = (),
    home: Path | None = None,
    tmp_size: int | None = 1 << 30,
    max_processes: int | None = None,
    user: str = "nobody",
    path: str | None = None,
    as_root: bool | None = None,
) -> Sandbox:
    """The sandbox steps run in, checked once by running a trivial command in it.

    `mode` none: `NO_SANDBOX`. bwrap: a working sandbox or `ConfigurationError`. auto: a
    working sandbox, else one that is not (`reason` says why). `path` is where `bwrap` and
    `setpriv` are looked for (the PATH of Baton's environment)."""
    if mode == "none":
        return NO_SANDBOX
    root = os.geteuid() == 0 if as_root is None else as_root
    found = shutil.which("bwrap", path=path)
    setpriv = shutil.which("setpriv", path=path) if root else None
    files = tuple(dict.fromkeys(p.resolve() for p in hidden_files if str(p)))
    shown = tuple(dict.fromkeys(p.resolve() for p in readable if str(p)))
    closed = _closed_ancestors(shown) if root else []  # e.g. /root (0700) holding the interpreter
    dirs = tuple(dict.fromkeys([*(p.resolve() for p in hidden_dirs if str(p)), *closed]))
    failure = None
    sandbox = Sandbox()
    if found is None:
        failure = "bwrap was not found on PATH"
    elif root and setpriv is None:
        failure = "Baton runs as root and setpriv (util-linux) was not found on PATH"
    else:
        sandbox = Sandbox(
            bwrap=found,
            hidden_dirs=dirs,
            home=home.resolve() if home is not None and home.resolve() in dirs else None,
            hidden_files=files,
            readable=shown,
            shown_files=tuple(dict.fromkeys(p.resolve() for p in shown_files if str(p))),
            user=step_user(user) if root else None,
            setpriv=setpriv,
            shell=shutil.which("dash", path=path),
            tmp_size=tmp_size,
            max_processes=max_processes,
            prlimit=None if root or max_processes is None else shutil.which("prlimit", path=path),
        )
        capsh = shutil.which("capsh", path=path) if root else None
        sandbox, failure = _working(sandbox, capsh)
        if failure is not None and "--size" in failure:  # a bwrap older than 0.5
            log.warning("this bubblewrap cannot bound a tmpfs's size (`--size`, bubblewrap 0.5 or newer): "
                        "a step's /tmp, /dev/shm and $HOME may each fill half the machine's memory",
                        extra={"action": "step_tmp_unbounded"})
            sandbox, failure = _working(dataclasses.replace(sandbox, tmp_size=None), capsh)
    if failure is None:
        return sandbox
    if mode == "bwrap":
        raise ConfigurationError(f"BATON_STEP_SANDBOX=bwrap, but {failure}; {INSTALL_HINT}", hint="")
    return Sandbox(reason=failure)


def _closed_ancestors(paths: Iterable[Path]) -> list[Path]:
    """Directories above `paths` that others may not traverse (`/root`, mode 0700): the step
    user could not reach the interpreter or Baton's code through them. Hidden like a home
    (an empty directory), with those paths shown again inside."""
    closed: list[Path] = []
    for path in paths:
        for parent in reversed(path.parents):
            try:
                mode = parent.stat().st_mode
            except OSError:
                break
            if not mode & 0o001 and parent != Path("/"):
                closed.append(parent)
                break
    return closed


#: run by the stub's shell through `capsh` at start (`$1` uid, `$2` gid): exit 0 only when it
#: runs as the step user alone, every capability set empty, no new privileges
_DROPPED_CHECK = """u=$1 g=$2; t=$(printf '\\t')
while read -r k v; do
  case "$k" in
    Cap*:) [ "$v" = 0000000000000000 ] || exit 1;;
    NoNewPrivs:) [ "$v" = 1 ] || exit 1;;
    Uid:) [ "$v" = "$u$t$u$t$u$t$u" ] || exit 1;;
    Gid:) [ "$v" = "$g$t$g$t$g$t$g" ] || exit 1;;
    Groups:) [ -z "$v" ] || exit 1;;
  esac
done < /proc/self/status"""


def limit_processes(sandbox: Sandbox) -> None:
    """As root, Baton's own `RLIMIT_NPROC` (soft and hard) becomes the steps' limit: the kernel
    never holds root to it, and every step inherits it and is held to it once it has dropped
    to the step user (a step cannot raise it again). Other users: `Sandbox.command` wraps each
    step in `prlimit`."""
    if sandbox.user is None or sandbox.max_processes is None:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    limit = min([sandbox.max_processes, *(v for v in (soft, hard) if v != resource.RLIM_INFINITY)])
    resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))


def _working(sandbox: Sandbox, capsh: str | None) -> tuple[Sandbox, str | None]:
    """`sandbox` (dropping through `capsh` when that works) and why it does not work, if not."""
    dropping = _with_capsh(sandbox, capsh) if capsh is not None else None
    if dropping is not None:
        return dropping, None  # its one probe ran a step through bwrap: the sandbox works
    return sandbox, _probe(sandbox)


def _with_capsh(sandbox: Sandbox, capsh: str) -> Sandbox | None:
    """`sandbox` with its stub dropping to the step user through `capsh`, if that works here
    and drops everything `setpriv` does; None when it does not (the stub uses `setpriv`, and
    the caller probes the sandbox without it). The one probe of a start where it works: it
    ran a command through bwrap as a step runs, so the sandbox works too."""
    if sandbox.user is None or sandbox.shell is None:
        return None
    user, shell = sandbox.user, sandbox.shell
    candidate = dataclasses.replace(sandbox, capsh=capsh)
    failure = _probe(candidate, [shell, "-c", _DROPPED_CHECK, "baton-probe", str(user.uid), str(user.gid)])
    if failure is not None:
        log.debug("capsh does not drop to the step user here (%s): warmed sandboxes use setpriv", failure)
        return None
    return candidate


def _probe(sandbox: Sandbox, argv: Sequence[str] = ("true",)) -> str | None:
    """Why the sandbox does not work (None: it does), by running `argv` (`true`) in it as a
    step would."""
    with tempfile.TemporaryDirectory(prefix="baton-probe-") as here:
        argv = sandbox.command(argv, workdir=Path(here), network=False, own_session=True)
        try:
            done = subprocess.run(
                argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT, check=False,
                env={}, start_new_session=True,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap cannot run ({exc})"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bwrap does not work here ({said[-1] if said else f'exit {done.returncode}'})"
    return None
