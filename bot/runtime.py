"""The one place that assembles Baton's runtime from its settings.

    runtime = assemble(settings)      # redactor, step environment, catalog, providers, tools, store
    build_baton(settings)             # bot/app.py: + engine, handler (`run`, `say`, `console`)
    serve_worker(settings)            # bot/worker.py: + job queue (`worker`)

Every entry point goes through `assemble`, so every process hides the same secrets the same
way: one `Redactor` holds the settings' secrets (tokens, keys, the passwords of the database
and OpenAI URLs), every value of the operator's secrets file and every secret a loaded
workflow declares (and any declared later, as steps receive them). That instance is the one
the log handler, the renderers of every platform, the audit trail and the steps' stderr
tails use; nothing has a "no secrets" default to fall back on.

Steps never inherit the process environment (`core/engine/step_env.py`); beyond that, the
variables holding the settings' secrets leave this process's environment and the process is
made non-dumpable (`bot/hardening.py`). Every step process runs in the sandbox `step_sandbox`
sets up once (`core/engine/sandbox.py`): it sees nothing of the data directory, the
database, `.env`, the secrets file or Baton's home. `require_sandbox` is the refusal of the
entry points that serve chat (`baton run` with a platform, `baton worker`) to run without it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from bot.hardening import forbid_inspection, scrub_environ
from bot.logging import redact_logs_with
from core.config import Settings
from core.engine.providers import ProviderRegistry
from core.engine.sandbox import INSTALL_HINT, Sandbox, configure, limit_processes
from core.engine.step_env import StepEnvironment
from core.engine.tool_identity import Stamp, changed, stamp
from core.engine.tool_runner import import_paths
from core.engine.tools import ToolRegistry, is_path
from core.errors import ConfigurationError
from core.redaction import Redactor
from core.signing_key import existing_key
from core.store.port import Store
from core.store.repository import SqlStore
from core.workflows.catalog import Catalog

log = logging.getLogger("baton.runtime")

DEFAULT_TOOL_MODULE = "tools.py"  # each workflow directory's own, where there is one


@dataclass(frozen=True)
class Runtime:
    """What every Baton process runs on, before its store and its role-specific parts."""

    settings: Settings
    redactor: Redactor
    environment: StepEnvironment
    catalog: Catalog
    providers: ProviderRegistry
    tools: ToolRegistry
    store: Store  # migrated; whoever assembled the runtime closes it


def assemble(
    settings: Settings, *, environ: Mapping[str, str] | None = None, sandbox: Sandbox | None = None
) -> Runtime:
    """Build the runtime; `environ` is the operator's environment (this process's by default),
    the source of the variables steps inherit and of the declared secrets' values; `sandbox`
    the steps' (`step_sandbox(settings, environ)` unless given). The store is opened (and its
    schema migrated) last, once nothing else can fail."""
    forbid_inspection()
    environ = dict(os.environ) if environ is None else environ
    sandbox = sandbox if sandbox is not None else step_sandbox(settings, environ)
    environment, catalog = steps_and_workflows(settings, environ, sandbox)
    scrub_environ(environment.redactor)  # settings' and step secrets leave os.environ (`environ` kept them)
    redact_logs_with(environment.redactor)
    providers = ProviderRegistry.from_settings(settings)
    tools = load_tools(settings.tool_modules, settings.workflow_dirs, sandbox, data_dir=settings.data_dir)
    return Runtime(
        settings=settings,
        redactor=environment.redactor,
        environment=environment,
        catalog=catalog,
        providers=providers,
        tools=tools,
        store=open_store(settings),
    )


def steps_and_workflows(
    settings: Settings, environ: Mapping[str, str], sandbox: Sandbox
) -> tuple[StepEnvironment, Catalog]:
    """The steps' environment, whose redactor holds every secret (the settings', the run
    pages' signing key, the secrets file's, the step secrets' and those the loaded workflows
    declare), and the catalog of the workflows. Part of `assemble`, and of the test
    builder (`bot/testing.py`), which leaves this process's hardening out."""
    redactor = Redactor(settings.secrets())
    page_key = existing_key(settings)  # the run pages' signing key, where this machine has one
    redactor.add([page_key.decode("ascii")] if page_key is not None else [])
    environment = StepEnvironment.from_environ(
        environ, redactor=redactor, secrets_file=settings.secrets_file, sandbox=sandbox,
        step_secrets=settings.step_secrets,
    )
    catalog = Catalog(settings.workflow_dirs, limits=settings.load_limits(), secrets=environment.provided)
    for entry in catalog.entries():
        if entry.workflow is not None:
            environment.hide_declared(entry.workflow.declared_secrets())
    return environment, catalog


def step_sandbox(settings: Settings, environ: Mapping[str, str] | None = None) -> Sandbox:
    """The sandbox of every step of this process, checked once (`BATON_STEP_SANDBOX`): hidden,
    the data directory, Baton's home, the machine's runtime directories (`RUNTIME_DIRS`) and
    the database's socket directory, `.env`, the secrets file and the database file; shown
    read-only again, the interpreter, Baton's code and `/etc/resolv.conf`. Logs what
    it found once; warns when Baton runs as root. `ConfigurationError` with `bwrap` and no
    working bubblewrap."""
    environ = dict(os.environ) if environ is None else environ
    home = Path(environ.get("HOME") or Path.home())
    hidden_dirs = [settings.data_dir, home, *RUNTIME_DIRS, *database_sockets(settings.database_url, environ)]
    hidden_files = [Path(".env")]
    if settings.secrets_file is not None:
        hidden_files.append(settings.secrets_file)
    database = sqlite_file(settings.database_url)
    if database is not None:
        tails = ("", "-wal", "-shm", "-journal")
        hidden_files += [database.with_name(database.name + tail) for tail in tails]
    readable = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent, _CODE]
    readable += [Path(p) for p in sysconfig.get_paths().values()]
    here = Path.cwd().resolve()  # the project (its `.env`, its `.baton`): never shown whole
    readable += [Path(p) for p in sys.path if p and Path(p).is_dir() and Path(p).resolve() != here]
    sandbox = configure(
        settings.step_sandbox,
        hidden_dirs=hidden_dirs,
        hidden_files=hidden_files,
        readable=readable,
        shown_files=[RESOLV_CONF],  # its target, when a resolver keeps it in /run
        home=home,  # the step's $HOME too: an empty directory of its own, writable
        tmp_size=settings.step_tmp_bytes,
        max_processes=settings.step_max_processes,
        user=settings.step_user,
        path=environ.get("PATH"),
    )
    if os.geteuid() == 0:
        steps = f"; its steps run as {sandbox.user.name}" if sandbox.user is not None else ""
        log.warning(
            "Baton runs as root: run it as an unprivileged user%s", steps, extra={"action": "running_as_root"}
        )
    elif sandbox.enabled and (kept := kept_groups(os.getgid(), os.getgroups())):
        log.warning(
            "steps keep Baton's supplementary groups (%s): a user namespace cannot drop them, so a step "
            "has what they grant (docker: root on this machine); run Baton as a user in no other group",
            ", ".join(kept), extra={"action": "step_groups"},
        )
    if sandbox.enabled:
        limit_processes(sandbox)
        if sandbox.user is None and sandbox.prlimit is None:
            log.warning("prlimit (util-linux) was not found on PATH: a step's processes are not limited "
                        "(BATON_STEP_MAX_PROCESSES), so a fork bomb could take every pid of the machine",
                        extra={"action": "step_processes_unbounded"})
        log.info(sandbox.describe(), extra={"action": "step_sandbox", "sandbox": True})
    elif settings.step_sandbox == "none":  # deliberate, and still worth a line
        log.warning(sandbox.describe(), extra={"action": "step_sandbox", "sandbox": False})
    else:
        log.warning(
            "%s; %s", sandbox.describe(), INSTALL_HINT, extra={"action": "step_sandbox", "sandbox": False}
        )
    return sandbox


def require_sandbox(sandbox: Sandbox, settings: Settings, serving: str) -> None:
    """Refuse to serve chat (or run a worker's steps) without a working sandbox, unless
    `BATON_STEP_SANDBOX=none` says so deliberately."""
    if sandbox.enabled or settings.step_sandbox == "none":
        return
    raise ConfigurationError(
        f"{serving} runs steps for chat, and there is no working step sandbox ({sandbox.reason}): "
        f"{INSTALL_HINT}",
        hint="",
    )


_CODE = Path(__file__).resolve().parents[1]  # Baton's own code (core/, bot/, adapters/)


#: hidden from steps: the machine's runtime directories, where its services keep their
#: sockets (PostgreSQL's and MySQL's, Docker's, D-Bus, systemd's, each user's
#: `/run/user/<uid>`). A socket file is reached through the file system, so `network: false`
#: does not close it, and many answer a peer by its uid: a step of a Baton that is not root
#: runs with Baton's uid (and its groups: `docker` is root), so peer authentication would
#: take it for Baton (its database role included).
RUNTIME_DIRS = (Path("/run"), Path("/var/run"))
RESOLV_CONF = Path("/etc/resolv.conf")  # often a link into /run (systemd-resolved, resolvconf)


def kept_groups(gid: int, groups: Sequence[int]) -> list[str]:
    """The supplementary groups (names, else numbers) a step of an unprivileged Baton keeps:
    bubblewrap's user namespace may not call `setgroups`, so they stay with every process."""
    import grp

    names = []
    for group in dict.fromkeys(g for g in groups if g != gid):
        try:
            names.append(grp.getgrgid(group).gr_name)
        except KeyError:
            names.append(str(group))
    return names


def database_sockets(database_url: str, environ: Mapping[str, str]) -> list[Path]:
    """The directories of the PostgreSQL sockets Baton's database URL connects through
    (`?host=/dir`, a `/dir` host, or `PGHOST=/dir`), wherever they are: hidden from steps."""
    url = make_url(database_url)
    if url.get_backend_name() != "postgresql":
        return []
    query = url.query.get("host")
    hosts = [url.host or "", *([query] if isinstance(query, str) else query or ()), environ.get("PGHOST", "")]
    return [Path(h) for part in hosts for h in part.split(",") if h.startswith("/")]


def sqlite_file(database_url: str) -> Path | None:
    """The SQLite database file of `database_url` (None: another database, or in memory)."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database).expanduser()


def open_store(settings: Settings) -> SqlStore:
    """The run store, its schema migrated before anything else touches it; the data
    directory (and SQLite's) created."""
    ensure_sqlite_dir(settings.database_url)
    make_dir(settings.data_dir, "BATON_DATA_DIR")
    store = SqlStore(settings.database_url)
    try:
        store.migrate()
    except BaseException:
        store.close()
        raise
    return store


def ensure_sqlite_dir(database_url: str) -> None:
    """SQLite needs the directory of its file to exist (`./.baton/` by default)."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        make_dir(Path(url.database).expanduser().parent, "BATON_DATABASE_URL",
                 hint="Point BATON_DATABASE_URL at a SQLite file in a directory Baton may create and write.")


def make_dir(path: Path, setting: str, *, hint: str = "") -> None:
    """`path` and its parents created, or one line naming `setting` (a file in the way, no
    permission, a read-only file system), not `mkdir`'s traceback."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        cause = "a file is in the way" if isinstance(exc, (FileExistsError, NotADirectoryError)) else (
            exc.strerror or type(exc).__name__)
        raise ConfigurationError(
            f"{setting}: cannot create the directory {path} ({cause})",
            hint=hint or f"Point {setting} at a directory Baton may create and write, or make it writable.",
        ) from None


def load_tools(
    modules: Sequence[str], workflow_dirs: Sequence[Path], sandbox: Sandbox | None = None,
    *, data_dir: Path | None = None,
) -> ToolRegistry:
    """Register the `@tool` functions of `modules` (`tool_module_paths`). With a working
    `sandbox`, Baton never imports them: the step sandbox does (`describe_tools`), so what a
    module runs at import runs with a step's rights, not Baton's; its calls run there too.
    `data_dir`: where the description is kept for the next start (`TOOLS_CACHE`)."""
    describe = None
    if sandbox is not None and sandbox.enabled:
        cache = data_dir / TOOLS_CACHE if data_dir is not None else None
        describe = functools.partial(describe_tools, sandbox, cache=cache)
    registry = ToolRegistry(describe=describe)
    found = registry.load(tool_module_paths(modules, workflow_dirs), Path("/"))
    log.debug("tools loaded: %s", ", ".join(found) or "none", extra={"action": "tools_loaded"})
    return registry


DESCRIBE_TIMEOUT = 60.0  # seconds importing the tool modules in the sandbox may take


TOOLS_CACHE = "tool-descriptions.json"  # in the data directory: steps never see it


def describe_tools(
    sandbox: Sandbox, modules: Sequence[str], base: Path, *, cache: Path | None = None
) -> list[dict[str, Any]]:
    """The tools `modules` define, learnt by importing them in the step sandbox (without
    network, as the step user, in an empty directory), as `ToolRegistry.load` registers
    them; `ConfigurationError` as an import here would raise it. With `cache`, what the
    last start learnt is used while nothing it depends on moved (`_cached`): a start then
    runs no sandboxed process (≈ 45 ms)."""
    if not modules:
        return []
    paths = import_paths()
    files = [Path(m) if Path(m).is_absolute() else base / m for m in modules if is_path(m)]
    key = {"modules": list(modules), "base": str(base), "python": sys.executable, "paths": paths}
    cacheable = cache is not None and len(files) == len(modules)  # (a dotted name's file: found by importing)
    stamps = _description_stamps(files) if cacheable else None
    if cache is not None and stamps is not None and (known := _cached(cache, key, stamps)) is not None:
        return known
    tools = _described(sandbox, modules, base, paths, files)
    if cache is not None and stamps is not None:
        _keep(cache, {"key": key, "stamps": [list(s) for s in stamps], "tools": tools})
    return tools


def _described(
    sandbox: Sandbox, modules: Sequence[str], base: Path, paths: list[str], files: list[Path]
) -> list[dict[str, Any]]:
    from core.engine.tool_runner import BOOT

    shown = [f.resolve().parent for f in files]
    request = json.dumps({"paths": paths, "describe": list(modules), "base": str(base)}).encode()
    with tempfile.TemporaryDirectory(prefix="baton-tools-") as here:
        os.chmod(here, 0o755)
        argv = sandbox.command([sys.executable, "-c", BOOT], workdir=Path(here), network=False,
                               readable=shown, own_session=True)
        try:
            done = subprocess.run(argv, input=request, capture_output=True, timeout=DESCRIBE_TIMEOUT,
                                  check=False, env=_DESCRIBE_ENV, start_new_session=True)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ConfigurationError(
                f"the tool modules could not be imported in the step sandbox ({exc})",
                hint="Check that they import quickly and without network, then start Baton again.",
            ) from exc
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ConfigurationError(
            f"the tool modules {', '.join(modules)} did not import in the step sandbox: "
            + (said[-1] if said else f"exit {done.returncode}"),
            hint="A tool module must import as the step user, without network (what it needs at "
            "import, it reads from its own directory).",
        ) from None
    if "tools" not in answer:
        raise ConfigurationError(str(answer.get("message")), hint=str(answer.get("hint") or ""))
    return list(answer["tools"])


_DESCRIBE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
#: Baton's files that decide what a description holds (how tools are found and keyed)
_DESCRIBERS = tuple(_CODE / f for f in ("core/engine/tools.py", "core/engine/tool_runner.py",
                                        "core/engine/tool_identity.py", "core/canonical.py"))


def _description_stamps(files: Sequence[Path]) -> list[Stamp] | None:
    """What a kept description depends on besides its tools' own files: the modules (one
    that gains its first tool has no tool to tell) and Baton's describing code."""
    try:
        return [stamp(f) for f in (*files, *_DESCRIBERS)]
    except OSError:
        return None


def _cached(cache: Path, key: dict[str, Any], stamps: list[Stamp]) -> list[dict[str, Any]] | None:
    """The kept description, while its key is this start's and no file it depends on (the
    modules, Baton's describing code, each tool's source files) moved since."""
    try:
        fd = os.open(cache, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as file:
            kept = json.loads(file.read())
        tools = list(kept["tools"])
        if kept["key"] != key or [tuple(s) for s in kept["stamps"]] != stamps:
            return None
        if changed(tuple(s) for t in tools for s in t["stamps"]):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return tools


def _keep(cache: Path, kept: dict[str, Any]) -> None:
    """Write the description for the next start (0600, replaced atomically); a data directory
    that cannot take it only costs the next start a sandboxed process."""
    temp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(kept, file)
        os.replace(temp, cache)
    except OSError as exc:
        log.debug("tool descriptions not kept: %s", exc, extra={"action": "tools_not_kept"})
        with contextlib.suppress(OSError):
            os.unlink(temp)


def tool_module_paths(modules: Sequence[str], workflow_dirs: Sequence[Path]) -> list[str]:
    """Each of `modules` as `ToolRegistry.load` takes it, never relative to the working
    directory: a dotted name is imported from the Python path; an absolute `.py` path is
    itself; a relative one is looked for in each workflow directory, then in each one's
    parent (the project, so `workflows/tools.py` still works), and the first found is used.
    The default `tools.py` is every workflow directory's own, where there is one; any other
    module that is not found is a `ConfigurationError` naming where it was looked for."""
    paths: list[str] = []
    for module in modules:
        is_path = module.endswith(".py") or "/" in module or "\\" in module
        if not is_path or Path(module).is_absolute():  # a module name, or a path needing no lookup
            paths.append(module)
        elif module == DEFAULT_TOOL_MODULE:
            paths += [str((d / module).resolve()) for d in workflow_dirs if (d / module).is_file()]
        else:
            places = [d / module for d in workflow_dirs]
            places += [d.resolve().parent / module for d in workflow_dirs]
            found = next((p for p in places if p.is_file()), None)
            if found is None:
                where = ", ".join(dict.fromkeys(str(p.parent.resolve()) for p in places)) or "no directory"
                raise ConfigurationError(
                    f"tool module {module} was not found (looked in {where})",
                    hint="Fix BATON_TOOL_MODULES: .py paths are relative to a workflow directory "
                    "(BATON_WORKFLOW_DIRS) or its parent, or absolute.",
                )
            paths.append(str(found.resolve()))
    return list(dict.fromkeys(paths))
