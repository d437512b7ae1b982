"""The `baton` command line: `run`, `console`, `say`, `mcp`, `list`, `migrate`, `prune`, `worker`,
`discord sync`, `health`.

Settings are built once here (`load_settings`); `--database-url` and `--workflows DIR`
override `BATON_DATABASE_URL` / `BATON_WORKFLOW_DIRS`. A wrong setting is one line naming
the variable and exit code 2; other Baton errors are one line of cause, one of next step,
and exit code 1.
"""

from __future__ import annotations

import asyncio
import getpass
import importlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from bot.hardening import forbid_inspection
from bot.logging import active_redactor, setup_logging
from bot.settings import load_settings
from bot.startup import started
from core.commands.hints import hint
from core.commands.input_text import InvalidInput, check_text
from core.config import Settings
from core.errors import BatonError, ConfigurationError
from core.redaction import Redactor

__all__ = ["app", "load_settings"]

app = typer.Typer(
    name="baton",
    help="Baton: start, watch, approve, resume and repair workflows from chat or the terminal.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,  # never print locals (they may hold tokens)
)

EXIT_USAGE = 2

DatabaseUrl = Annotated[
    str | None, typer.Option("--database-url", help="Overrides BATON_DATABASE_URL.", show_default=False)
]
WorkflowDirs = Annotated[
    list[Path] | None,
    typer.Option("--workflows", help="A workflow directory (repeatable); overrides BATON_WORKFLOW_DIRS."),
]
Conversation = Annotated[str, typer.Option("--conversation", help="Conversation id.")]
Thread = Annotated[str | None, typer.Option("--thread", help="Thread id within the conversation.")]


def _default_user() -> str:
    try:
        return os.environ.get("USER") or getpass.getuser()
    except OSError:  # no passwd entry (containers)
        return "console"


User = Annotated[
    str | None, typer.Option("--user", help="Your user id (default: $USER).", show_default=False)
]


def fail(exc: BatonError, *, code: int | None = None) -> NoReturn:
    """Cause and next step on stderr (secrets hidden, like in the log); exit 2 for
    configuration (or `code`), 1 otherwise."""
    from adapters.console.output import terminal_safe  # a YAML error may quote what a file holds

    redactor = active_redactor()
    hide = redactor.redact if redactor is not None else str
    typer.echo(terminal_safe(f"error: {hide(exc.message)}"), err=True)
    next_step = hint(exc)
    if next_step:
        typer.echo(terminal_safe(hide(next_step)), err=True)
    raise typer.Exit(code if code is not None else EXIT_USAGE if isinstance(exc, ConfigurationError) else 1)


def settings_for(
    database_url: str | None, workflows: list[Path] | None, *, console: bool | None = False
) -> Settings:
    """Build the settings once and set up logging from them.

    When the interactive console is the screen (`console`), log lines would interleave with the
    chat: unless BATON_LOG_LEVEL is set, only warnings and errors are logged there.
    `console=None`: the console is the screen when no chat adapter is configured.
    """
    forbid_inspection()  # before anything else: the steps of this process (and of its forks)
    try:
        settings = load_settings(database_url=database_url, workflow_dirs=workflows)
    except ConfigurationError as exc:
        fail(exc)
    level = settings.log_level
    if console is None:
        console = not (settings.slack_enabled or settings.discord_enabled)
    if console and "log_level" not in settings.model_fields_set and level == "INFO":
        level = "WARNING"
    setup_logging(level, Redactor(settings.secrets()))  # the runtime's redactor replaces it once assembled
    return settings


def check_arguments(**values: str | None) -> None:
    """Refuse NUL bytes and invalid UTF-8 in the command line with one line (exit 2)."""
    try:
        for name, value in values.items():
            if value is not None:
                check_text(value, name)
    except InvalidInput as exc:
        fail(exc, code=EXIT_USAGE)


Supervise = Annotated[
    bool | None,
    typer.Option(
        "--supervise/--no-supervise",
        help="Serve in a child that a supervising parent restarts when it dies (default: BATON_SUPERVISE, "
        "off; leave it off under systemd or Kubernetes, which should see a crash).",
        show_default=False,
    ),
]


def _supervised(settings: Settings, flag: bool | None) -> bool:
    return settings.supervise if flag is None else flag


def _status_of(serve: Callable[[], None]) -> int:
    """`serve()` as a process exit status (what a supervised child exits with)."""
    try:
        serve()
    except typer.Exit as exc:
        return int(exc.exit_code)
    return 0


def _serve_supervised(name: str, serve: Callable[[], None], preload: list[str]) -> NoReturn:
    """Import `preload` (and what `serve` imports) here, once, then serve in forked children
    that are restarted when they die (bot/supervisor.py)."""
    from bot.supervisor import supervise

    for module in preload:
        importlib.import_module(module)
    started(collect=True)  # before the forks: the children share the frozen objects' pages
    raise typer.Exit(supervise(lambda _restarts: _status_of(serve), name=name))


def _preload(settings: Settings, adapters: list[str]) -> list[str]:
    """What a supervised child imports on its way: paid once, in the supervisor."""
    modules = ["jinja2.sandbox", "jsonschema", "core.render", *(f"adapters.{name}" for name in adapters)]
    if settings.prompt_provider == "openai":
        modules += ["httpx", "tenacity"]
    return modules


@app.command()
def run(
    database_url: DatabaseUrl = None,
    workflows: WorkflowDirs = None,
    console: Annotated[
        bool, typer.Option("--console", help="Also open the console (when stdin is a terminal).")
    ] = False,
    conversation: Conversation = "console",
    user: User = None,
    supervise: Supervise = None,
) -> None:
    """Start every configured chat adapter (Slack, Discord), or the console when none is.

    With --supervise (or BATON_SUPERVISE=true) and chat platforms to serve, a child that dies
    is restarted at once (docs/operations.md); by default a crash ends the process, for systemd
    or Kubernetes to restart. The console is never supervised (it owns the terminal)."""
    from bot.serve import configured_adapters, serve_all

    check_arguments(**{"--conversation": conversation, "--user": user})
    settings = settings_for(database_url, workflows, console=None)
    with_console = console and sys.stdin.isatty()
    adapters = configured_adapters(settings)

    def serve() -> None:
        try:
            asyncio.run(
                serve_all(
                    settings,
                    console=with_console,
                    conversation=conversation,
                    user=user or _default_user(),
                )
            )
        except BatonError as exc:
            fail(exc)

    if adapters and not with_console and _supervised(settings, supervise):
        _serve_supervised("baton run", serve, _preload(settings, adapters))
    serve()


@app.command()
def console(
    database_url: DatabaseUrl = None,
    workflows: WorkflowDirs = None,
    conversation: Conversation = "console",
    user: User = None,
    thread: Thread = None,
) -> None:
    """Chat with Baton in this terminal (history, numbered buttons, live progress; Ctrl-D quits)."""
    from bot.serve import console_only

    check_arguments(**{"--conversation": conversation, "--user": user, "--thread": thread})
    settings = settings_for(database_url, workflows, console=True)
    try:
        asyncio.run(
            console_only(settings, conversation=conversation, user=user or _default_user(), thread=thread)
        )
    except BatonError as exc:
        fail(exc)


@app.command()
def say(
    text: Annotated[str, typer.Argument(help="The message, e.g. 'run hello hi' or 'lgtm'. Quote it.")],
    database_url: DatabaseUrl = None,
    workflows: WorkflowDirs = None,
    conversation: Conversation = "console",
    user: User = None,
    thread: Thread = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the replies as a JSON array.")] = False,
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait until the run rests and print its progress too.")
    ] = False,
    event_id: Annotated[
        str | None, typer.Option("--event-id", help="The event id (duplicates are handled once).")
    ] = None,
) -> None:
    """Handle one message and print the replies. Runs persist in the database across calls."""
    from adapters.console.output import exports_dir, replies_json, send
    from bot.serve import say_once
    from core.commands.messages import Reply

    check_arguments(**{
        "The message": text, "--conversation": conversation, "--user": user, "--thread": thread,
        "--event-id": event_id,
    })  # fmt: skip
    settings = settings_for(database_url, workflows)
    exports = exports_dir(settings.data_dir)
    shown: dict[str, str] = {}  # replace_key -> text last printed (text mode prints on change)

    def stream(reply: Reply, redactor: Redactor) -> None:
        from adapters.console.output import reply_text

        if reply.how.replace_key is not None:
            text_now = reply_text(reply, redactor, exports)
            if shown.get(reply.how.replace_key) == text_now:
                return
            shown[reply.how.replace_key] = text_now
        send(reply, redactor, exports)

    try:
        said = asyncio.run(
            say_once(
                settings,
                text,
                conversation=conversation,
                user=user or _default_user(),
                thread=thread,
                event_id=event_id,
                wait=wait,
                on_reply=None if as_json else stream,
            )
        )
    except BatonError as exc:
        fail(exc)
    if as_json:
        typer.echo(replies_json(said.replies, said.redactor, exports))


@app.command()
def mcp(database_url: DatabaseUrl = None, workflows: WorkflowDirs = None) -> None:
    """Serve the Model Context Protocol on stdin/stdout, for an agent (docs/agents.md).

    The agent acts as BATON_MCP_PRINCIPAL (default mcp:local), granted in BATON_ACCESS like a
    person; its runs report to BATON_MCP_POST_TO. Logs go to stderr."""
    from bot.serve import mcp_stdio

    settings = settings_for(database_url, workflows, console=False)
    try:
        asyncio.run(mcp_stdio(settings))
    except BatonError as exc:
        fail(exc)


@app.command(name="list")
def list_workflows(
    database_url: DatabaseUrl = None,
    workflows: WorkflowDirs = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """List the workflows with their source file, and every file that failed to load.
    `--database-url` is taken as by every command (the settings are checked with it)."""
    from adapters.console.formatting import FORMAT as PLAIN
    from bot.runtime import load_tools, step_sandbox
    from core.commands import replies, voting
    from core.engine.step_env import SecretSource
    from core.engine.tools import unregistered
    from core.redaction import Redactor
    from core.render import render_text
    from core.workflows.catalog import Catalog

    settings = settings_for(database_url, workflows)
    redactor = Redactor(settings.secrets())
    try:  # the step secrets the operator provides: a workflow naming another one is broken
        source = SecretSource(os.environ, settings.secrets_file, step_secrets=settings.step_secrets)
    except BatonError as exc:
        fail(exc)
    catalog = Catalog(settings.workflow_dirs, limits=settings.load_limits(), secrets=source.provided)
    entries = catalog.entries()
    try:
        sandbox = step_sandbox(settings)
        tools = load_tools(settings.tool_modules, settings.workflow_dirs, sandbox, data_dir=settings.data_dir)
        tools_error: BatonError | None = None
    except BatonError as exc:  # a tool module missing or broken: the workflows calling tools are too
        tools, tools_error = None, exc
    rows: list[dict[str, Any]] = []
    for e in entries:
        error: BatonError | None = e.error
        if error is None and e.workflow is not None and any(n.tool for n in e.workflow.nodes):
            error = tools_error if tools is None else unregistered(e.workflow, tools)
        unmet = voting.unmet(settings.access_policy, e.workflow) if e.workflow is not None else []
        rows.append({
            "name": e.name,
            "path": str(e.path),
            "description": e.workflow.description if e.workflow is not None else "",
            "error": error.message if error is not None else None,
            "hint": error.hint if error is not None else None,
            # gates nobody can ever approve under these settings (e.g. no BATON_ACCESS)
            "warnings": [render_text(replies.unmet_gate(e.name, u), PLAIN, redactor).strip()
                         for u in unmet],
        })
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        dirs = ", ".join(f"{d}{_not_a_directory(d)}" for d in settings.workflow_dirs)
        typer.echo(f"No workflows found in {dirs}.\nAdd a YAML file there or set BATON_WORKFLOW_DIRS.")
        return
    from adapters.console.output import terminal_safe  # a description is what its file says

    name_width = max(len(r["name"] or "") for r in rows)
    path_width = max(len(r["path"] or "") for r in rows)
    for r in rows:
        status = f"ERROR {r['error']}" if r["error"] else r["description"]
        typer.echo(terminal_safe(f"{r['name']:<{name_width}}  {r['path']:<{path_width}}  {status}".rstrip()))
        if r["hint"]:
            typer.echo(terminal_safe(f"{'':<{name_width}}  {'':<{path_width}}  fix: {r['hint']}"))
        for warning in r["warnings"]:
            typer.echo(terminal_safe(f"{'':<{name_width}}  {'':<{path_width}}  {warning}"))


def _not_a_directory(path: Path) -> str:
    """Why `path` holds no workflow files when it is no directory (a typo in the setting)."""
    if path.is_dir():
        return ""
    return " (not a directory)" if path.exists() else " (it does not exist)"


@app.command()
def migrate(database_url: DatabaseUrl = None) -> None:
    """Bring the database schema to the newest revision (Baton also does this at start)."""
    from sqlalchemy.engine import make_url

    from bot.runtime import ensure_sqlite_dir
    from core.store.migration import HEAD_REVISION
    from core.store.repository import SqlStore

    settings = settings_for(database_url, None)
    try:
        ensure_sqlite_dir(settings.database_url)
        store = SqlStore(settings.database_url)
        try:
            before = store.migrate()
        finally:
            store.close()
        if settings.executor == "procrastinate":  # the job queue's tables (docs/operations.md)
            from core.engine.distributed import apply_queue_schema

            apply_queue_schema(settings.database_url)
    except BatonError as exc:
        fail(exc)
    safe_url = make_url(settings.database_url).render_as_string(hide_password=True)
    head = HEAD_REVISION
    if before is None:
        typer.echo(f"Created the schema of database {safe_url} (revision {head}).")
    elif before == head:
        typer.echo(f"Database {safe_url} was already at the newest schema (revision {head}); nothing to do.")
    else:
        typer.echo(f"Upgraded database {safe_url} from revision {before} to {head}.")


discord_app = typer.Typer(name="discord", help="Discord: Baton's application commands.", no_args_is_help=True)
app.add_typer(discord_app)


@discord_app.command("sync")
def discord_sync(database_url: DatabaseUrl = None) -> None:
    """Register /workflow with Discord now (`baton run` registers it only when it changed)."""
    from adapters.discord import sync_commands
    from bot.app import build_baton

    settings = settings_for(database_url, None)

    async def sync() -> int:
        baton = build_baton(settings)
        try:
            return await sync_commands(baton, settings)
        finally:
            baton.close()

    try:
        count = asyncio.run(sync())
    except BatonError as exc:
        fail(exc)
    where = (f"server {settings.discord_guild_id}" if settings.discord_guild_id
             else "every server (global commands: Discord may take up to an hour to show them)")
    typer.echo(f"Registered {count} application command{'s' if count != 1 else ''} in {where}.")


@app.command()
def prune(
    database_url: DatabaseUrl = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would go; delete nothing.")] = False,
    older_than: Annotated[
        float | None,
        typer.Option(
            "--older-than", help="Days; overrides BATON_RUN_RETENTION_DAYS.", min=0.0, show_default=False
        ),
    ] = None,
    vacuum: Annotated[
        bool, typer.Option("--vacuum", help="SQLite: give the freed space back to the disk afterwards.")
    ] = False,
) -> None:
    """Delete finished runs older than the retention with their history (pinned runs stay)."""
    from datetime import UTC, datetime

    from bot.housekeeping import DAY, pruner_from_settings
    from bot.retention import Pruner
    from core.store.repository import SqlStore

    settings = settings_for(database_url, None)
    days = older_than if older_than is not None else settings.run_retention_days
    if days is None and settings.audit_retention_days is None:
        fail(ConfigurationError(
            "Nothing to prune: BATON_RUN_RETENTION_DAYS is unset, so every run is kept.",
            hint="Set BATON_RUN_RETENTION_DAYS (days), or pass `--older-than DAYS`.",
        ))
    try:
        store = SqlStore(settings.database_url)
        try:
            store.migrate()
            configured = pruner_from_settings(store.retention, settings)
            pruner = Pruner(
                store.retention,
                run_retention=None if days is None else days * DAY,
                audit_retention=configured.audit_retention if configured is not None else None,
                data_dir=settings.data_dir,
                batch=settings.prune_batch,
            )
            report = pruner.prune(dry_run=dry_run)
            if vacuum and not dry_run:
                store.vacuum()
        finally:
            store.close()
    except BatonError as exc:
        fail(exc)
    c = report.counts
    when = (
        "" if report.cutoff is None
        else f" last changed before {datetime.fromtimestamp(report.cutoff, tz=UTC):%Y-%m-%d %H:%M} UTC"
    )
    verb = "Would prune" if dry_run else "Pruned"
    typer.echo(
        f"{verb} {c.runs} finished run{'s' if c.runs != 1 else ''}{when}: {c.journal} journal entries, "
        f"{c.gates} gates, {c.votes} votes, {c.deadlines} deadlines, {c.outbox} outbox rows"
        + ("" if dry_run else f"; {report.blobs} unreferenced blobs; {report.directories} run directories")
        + (f"; {'would forget' if dry_run else 'forgot'} {report.audit} audit rows"
           if settings.audit_retention_days is not None else "")
        + "."
    )
    typer.echo("Pinned, paused, queued, running and needs_attention runs are kept."
               + (" Run again without --dry-run to delete." if dry_run else ""))


@app.command()
def worker(
    database_url: DatabaseUrl = None,
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", min=1, help="Steps run at once (default BATON_WORKER_CONCURRENCY)."),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Worker name in logs (default host:pid).", show_default=False)
    ] = None,
    supervise: Supervise = None,
) -> None:
    """Execute workflow steps for `baton run` replicas (needs BATON_EXECUTOR=procrastinate and PostgreSQL).

    With --supervise (or BATON_SUPERVISE=true) a worker that dies is restarted at once."""
    from bot.worker import serve_worker

    settings = settings_for(database_url, None)

    def serve() -> None:
        try:
            asyncio.run(serve_worker(settings, concurrency=concurrency, name=name))
        except BatonError as exc:
            fail(exc)

    if _supervised(settings, supervise):
        _serve_supervised("baton worker", serve, _preload(settings, []))
    serve()


@app.command()
def health(
    live: Annotated[
        bool, typer.Option("--live", help="Only ask whether the process answers (/healthz).")
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Seconds to wait for the answer.")
    ] = 3.0,
) -> None:
    """Ask the `baton run` or `baton worker` on this machine whether it is ready (/readyz) or alive
    (--live): exit 0 if so, 1 if not. For exec probes; asks BATON_WEB_PORT."""
    import httpx

    settings = settings_for(None, None)
    if not settings.http_enabled:
        fail(ConfigurationError(
            "BATON_WEB_PORT is off: no process serves a health endpoint to ask",
            hint="Set BATON_WEB_PORT (the same value as the process's) and start Baton again.",
        ))
    host = "127.0.0.1" if settings.web_host in ("0.0.0.0", "::", "") else settings.web_host
    host = f"[{host}]" if ":" in host else host
    url = f"http://{host}:{settings.web_port}/{'healthz' if live else 'readyz'}"
    try:
        answer = httpx.get(url, timeout=timeout)
    except httpx.HTTPError as exc:
        state = "alive" if live else "ready"
        typer.echo(f"not {state}: {url} did not answer ({type(exc).__name__})", err=True)
        raise typer.Exit(1) from None
    typer.echo(answer.text)
    raise typer.Exit(0 if answer.status_code == 200 else 1)


if __name__ == "__main__":  # `python -m bot.main` (the `baton` executable is bot.startup.main)
    from bot.startup import prepare, run_cli

    prepare()
    run_cli(app)
