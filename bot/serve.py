"""The long-running and one-shot entry points behind the CLI, as coroutines.

Each builds `Baton` from ready settings, enters `baton.running()` (engine started,
signals handled), marks the process started (`bot.startup.started`: the objects of the
start are frozen out of later garbage collections) and closes the store at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapters.console.messages import to_chat_message
from adapters.console.oneshot import say
from bot.app import Baton, build_baton
from bot.health import PATHS, HealthRoutes
from bot.http import listen
from bot.runtime import assemble, require_sandbox, step_sandbox
from bot.startup import started
from core.commands.messages import Reply
from core.config import Settings
from core.errors import ConfigurationError
from core.redaction import Redactor

if TYPE_CHECKING:
    from bot.http import Mounted

log = logging.getLogger("baton.serve")

Serve = Callable[..., Awaitable[None]]
HISTORY_FILE = "console_history"
STDIN_LET_GO = 1.0  # seconds `baton mcp`'s stdin reader gets to end once the process stops


def check_platform_settings(settings: Settings) -> None:
    """The chat platforms' settings are whole, or `ConfigurationError`: a Slack bot token alone
    (or an app token or signing secret alone, or a Discord server without a token) left the
    platform off without a word while the console started, and an empty signing secret started
    HTTP mode with nothing to check Slack's signatures with (every request failed in Bolt)."""
    bot, app, signing = settings.slack_bot_token, settings.slack_app_token, settings.slack_signing_secret
    if bot is not None and app is None and signing is None:
        raise ConfigurationError(
            "BATON_SLACK_BOT_TOKEN is set, but neither BATON_SLACK_APP_TOKEN (Socket Mode) nor "
            "BATON_SLACK_SIGNING_SECRET (HTTP mode) is: Slack would stay off",
            hint="Set BATON_SLACK_APP_TOKEN (docs/slack.md, step 3), or unset BATON_SLACK_BOT_TOKEN to run "
            "without Slack.",
        )
    if bot is None and (app is not None or signing is not None):
        given = "BATON_SLACK_APP_TOKEN" if app is not None else "BATON_SLACK_SIGNING_SECRET"
        raise ConfigurationError(
            f"{given} is set without BATON_SLACK_BOT_TOKEN: Slack would stay off",
            hint="Set BATON_SLACK_BOT_TOKEN to the app's Bot User OAuth Token (xoxb-…, docs/slack.md).",
        )
    if settings.discord_token is None and settings.discord_guild_id is not None:
        raise ConfigurationError(
            "BATON_DISCORD_GUILD_ID is set without BATON_DISCORD_TOKEN: Discord would stay off",
            hint="Set BATON_DISCORD_TOKEN to the bot's token (docs/discord.md, Install step 2).",
        )
    if settings.slack_http and signing is not None and not signing.get_secret_value().strip():
        raise ConfigurationError(
            "BATON_SLACK_SIGNING_SECRET is empty: no request to /slack/events could be verified",
            hint="Copy the app's Signing Secret (Basic Information → App Credentials), or set "
            "BATON_SLACK_APP_TOKEN for Socket Mode.",
        )


def configured_adapters(settings: Settings) -> list[str]:
    """The chat platforms whose tokens are configured."""
    names = []
    if settings.slack_enabled:
        names.append("slack")
    if settings.discord_enabled:
        names.append("discord")
    return names


def _adapter_serve(name: str) -> Serve:
    """`adapters.<name>.serve`, imported only when that platform is configured."""
    module = importlib.import_module(f"adapters.{name}")
    serve: Serve = module.serve
    return serve


async def serve_all(settings: Settings, *, console: bool, conversation: str, user: str) -> None:
    """`baton run`: every configured adapter, plus the console when asked or when none is.

    Returns when the process is asked to stop, the console ends (Ctrl-D) or an adapter
    stops; a crashed adapter's error propagates after the others are stopped."""
    check_platform_settings(settings)
    names = configured_adapters(settings)
    if names and settings.access is None:
        log.warning(
            "BATON_ACCESS is not set: everyone on %s may run every workflow and approve every gate; "
            "set BATON_ACCESS to say who may (docs/commands.md, 'Who may do what')", " and ".join(names),
            extra={"action": "access_open", "platforms": names},
        )
    sock = listen(settings)  # bound first: no reply may offer a link to a port we do not serve
    if settings.slack_http and sock is None:  # Slack could not reach this process
        raise ConfigurationError(
            f"Slack's HTTP mode is served on BATON_WEB_PORT, which is "
            f"{'taken' if settings.http_enabled else 'off'}",
            hint="Set BATON_WEB_PORT to a free port that Slack's Request URL reaches (docs/slack.md), "
            "or BATON_SLACK_APP_TOKEN for Socket Mode.",
        )
    if sock is None and settings.http_enabled and settings.public_url is None:
        settings = settings.model_copy(update={"web_port": 0})  # links would reach whatever holds it
    try:
        sandbox = step_sandbox(settings)
        if names:
            require_sandbox(sandbox, settings, f"`baton run` on {' and '.join(names)}")
        baton = build_baton(settings, runtime=assemble(settings, sandbox=sandbox))
    except BaseException:
        if sock is not None:
            sock.close()
        raise
    baton.health.expect(names)
    try:
        async with contextlib.AsyncExitStack() as serving:
            await serving.enter_async_context(baton.running())
            slack = None
            if settings.slack_http:  # `/slack/events` on the one server; `serve` opens it
                from adapters.slack import http_endpoint

                slack = http_endpoint(baton, settings)
            tasks: dict[asyncio.Task[None], str] = {}
            for name in names:
                extra: dict[str, Any] = {"endpoint": slack} if name == "slack" and slack is not None else {}
                tasks[asyncio.ensure_future(_adapter_serve(name)(baton, settings, **extra))] = name
            if console or not names:
                from adapters.console.interactive import interactive  # prompt_toolkit: only when chatting
                from adapters.console.output import exports_dir

                history = settings.data_dir / HISTORY_FILE
                task = asyncio.create_task(
                    interactive(baton, conversation=conversation, user=user, history=history,
                                exports=exports_dir(settings.data_dir)),
                    name="adapter-console",
                )
                tasks[task] = "console"
            try:  # the adapters started first: building the server takes a moment
                await serving.enter_async_context(http_server(baton, settings, sock, slack=slack))
            except BaseException:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
            started(collect=True)  # what lives from here on is frozen out of later collections
            log.info("serving %s", ", ".join(tasks.values()), extra={"action": "serve"})
            stop = asyncio.create_task(baton.stopping.wait())
            done, _ = await asyncio.wait({stop, *tasks}, return_when=asyncio.FIRST_COMPLETED)
            baton.request_stop()
            await baton.settle()  # steps' grace, then the outbox, while the chat clients still send
            for task in tasks:
                task.cancel()
            stop.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            for task, result in zip(tasks, results, strict=True):
                if isinstance(result, Exception):
                    log.error(
                        "adapter %s stopped: %s", tasks[task], result, extra={"action": "adapter_failed"}
                    )
            crashed = [
                r for t, r in zip(tasks, results, strict=True) if t in done and isinstance(r, Exception)
            ]
            if crashed:
                raise crashed[0]
    finally:
        baton.close()
        if sock is not None:
            sock.close()


def http_parts(baton: Baton, settings: Settings, *, slack: Mounted | None = None) -> list[Mounted]:
    """What `baton run`'s one HTTP server mounts: health, Slack's events (HTTP mode: `slack`),
    `/mcp` when BATON_MCP_TOKENS is set (the SDK loaded only then), and the run pages, last (their
    404 page answers whatever nothing else does)."""
    parts: list[Mounted] = [HealthRoutes(baton.health)]
    if slack is not None:
        parts.append(slack)
    if settings.mcp_enabled or settings.web_enabled:
        from adapters.console import formatting  # noqa: F401  the default format: the pages' and agents' answers
    if settings.mcp_enabled:
        from adapters.mcp import http_mount

        parts.append(http_mount(baton, settings))
    if settings.web_enabled:
        from adapters.web import pages

        parts.append(pages(baton, settings))
    return parts


@contextlib.asynccontextmanager
async def http_server(baton: Baton, settings: Settings, sock: socket.socket | None, *,
                      slack: Mounted | None = None) -> AsyncIterator[int]:
    """`baton run`'s one HTTP server on `sock` while inside (bot/http.py); yields its port, or 0
    when nothing is served (BATON_WEB_PORT off or taken)."""
    if sock is None:
        yield 0
        return
    from bot.http import serving

    async with serving(http_parts(baton, settings, slack=slack), sock, stopping=baton.stopping,
                       always=PATHS, max_body=settings.http_max_body_bytes) as port:
        yield port


async def serve_web(baton: Baton, settings: Settings, *, sock: socket.socket,
                    slack: Mounted | None = None) -> None:
    """`baton run`'s HTTP server on an already bound `sock` until `baton.stopping` is set (tests)."""
    async with http_server(baton, settings, sock, slack=slack):
        await baton.stopping.wait()


async def mcp_stdio(settings: Settings) -> None:
    """`baton mcp`: MCP on stdin/stdout as BATON_MCP_PRINCIPAL, until the client closes it or
    the process is asked to stop."""
    from adapters.console import formatting  # noqa: F401  the default format: the agents' answers
    from adapters.mcp import serve_stdio

    baton = build_baton(settings)
    serving: asyncio.Task[None] | None = None
    try:
        async with baton.running():
            started()
            serving = asyncio.create_task(serve_stdio(baton, settings), name="adapter-mcp")
            stop = asyncio.create_task(baton.stopping.wait())
            await asyncio.wait({serving, stop}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            if not serving.done():  # asked to stop while the client still holds stdin open
                serving.cancel()
                await asyncio.wait({serving}, timeout=STDIN_LET_GO)
            failed = serving.exception() if serving.done() and not serving.cancelled() else None
            if failed is not None:
                raise failed
    finally:
        baton.close()
    if serving is not None and not serving.done():
        # The SDK reads stdin in a thread that only the client closing the pipe ends; the
        # engine is stopped and the store closed, so nothing is left to wait for.
        log.info("stopped with stdin still open", extra={"action": "mcp_stopped"})
        logging.shutdown()
        os._exit(0)


async def console_only(settings: Settings, *, conversation: str, user: str, thread: str | None) -> None:
    """`baton console`."""
    from adapters.console.interactive import interactive
    from adapters.console.output import exports_dir

    baton = build_baton(settings)
    try:
        async with baton.running():
            started(collect=True)
            await interactive(
                baton,
                conversation=conversation,
                user=user,
                thread=thread,
                history=Path(settings.data_dir) / HISTORY_FILE,
                exports=exports_dir(settings.data_dir),
            )
    finally:
        baton.close()


@dataclass(frozen=True)
class Said:
    """What `baton say` prints: the replies, through the runtime's redactor."""

    replies: list[Reply]
    redactor: Redactor


async def say_once(
    settings: Settings,
    text: str,
    *,
    conversation: str,
    user: str,
    thread: str | None,
    event_id: str | None,
    wait: bool,
    on_reply: Callable[[Reply, Redactor], None] | None = None,
) -> Said:
    """`baton say`: one message in, its replies out; started runs are driven to rest.
    `on_reply` sees each reply as it arrives, with the redactor to print it through."""
    baton = build_baton(settings)
    try:
        async with baton.running(schedules=False):  # a one-shot process fires no schedule by itself
            started()  # a one-shot process: frozen without a full collection (bot/startup.py)
            message = to_chat_message(text, conversation, user, thread, event_id=event_id)
            shown = None if on_reply is None else (lambda reply: on_reply(reply, baton.redactor))
            replies = await say(baton, message, wait=wait, on_reply=shown)
            return Said(replies, baton.redactor)
    finally:
        baton.close()
