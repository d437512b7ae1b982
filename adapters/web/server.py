"""Serving the run pages inside `baton run`: uvicorn on the process's own event loop.

The server shares the loop with the engine and the chat adapters, so an engine event of a
run that moves here wakes its open pages at once (`LiveHub.poke`); page building runs in
worker threads (Starlette runs plain `def` endpoints there), so a large page never holds up
chat. The process's own signal handling stays in charge (`bot.app.Baton.running`): uvicorn
is told not to install its own. A port that cannot be bound is logged and the bot goes on
without pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
from collections.abc import Generator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Protocol

import uvicorn
from starlette.routing import BaseRoute

from adapters.web.app import RunPagesApp, snapshot_of
from adapters.web.links import PageLinks
from adapters.web.live import LiveHub
from adapters.web.security import Csrf
from adapters.web.view import Parts
from core.commands.handler import Handler
from core.config import Settings
from core.engine.engine import Engine
from core.engine.events import EngineEvent
from core.errors import ConfigurationError
from core.redaction import Redactor
from core.store.port import Store
from core.workflows.catalog import Catalog

log = logging.getLogger("baton.web")
GRACE = 2  # seconds open connections get when the server stops


class Baton(Protocol):
    """What the pages need of `bot.app.Baton` (adapters never import `bot`)."""

    @property
    def store(self) -> Store: ...
    @property
    def engine(self) -> Engine: ...
    @property
    def catalog(self) -> Catalog: ...
    @property
    def handler(self) -> Handler: ...
    @property
    def redactor(self) -> Redactor: ...
    @property
    def stopping(self) -> asyncio.Event: ...


class Mounted(Protocol):
    """Another app served beside the pages (`/mcp`: `adapters.mcp.http.HttpMount`)."""

    @property
    def routes(self) -> list[BaseRoute]: ...
    def running(self) -> AbstractAsyncContextManager[None]: ...


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # SIGTERM / SIGINT belong to the process (bot.app.Baton.running)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port); OSError when it is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(512)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def build_app(baton: Baton, settings: Settings, hub: LiveHub) -> RunPagesApp:
    links = baton.handler.pages
    if not isinstance(links, PageLinks):
        raise ConfigurationError("Run pages are off (BATON_WEB_PORT).",
                                 hint="Set BATON_WEB_PORT to a free port to serve them.")
    parts = Parts(store=baton.store, engine=baton.engine, catalog=baton.catalog,
                  access=settings.access_policy, redactor=baton.redactor)
    origin = settings.page_base_url.split("/", 3)
    csrf = Csrf(links.secret, secure=settings.page_base_url.startswith("https://"),
                public_origin="/".join(origin[:3]))
    return RunPagesApp(parts=parts, handler=baton.handler, links=links, hub=hub, csrf=csrf)


def live_hub(baton: Baton, settings: Settings) -> LiveHub:
    parts = Parts(store=baton.store, engine=baton.engine, catalog=baton.catalog,
                  access=settings.access_policy, redactor=baton.redactor)
    return LiveHub(pulse=baton.store.run_pulse, read=functools.partial(snapshot_of, parts),
                   poll=settings.web_poll_ms / 1000)


async def serve_pages(baton: Baton, settings: Settings, *, sock: socket.socket | None = None,
                      mounts: Sequence[Mounted] = ()) -> None:
    """Serve until `baton.stopping` is set (or the task is cancelled); `mounts` beside the pages,
    each `running()` while they are served."""
    if sock is None:
        try:
            sock = bind(settings.web_host, settings.web_port)
        except OSError as exc:
            log.error("run pages not served: %s:%d is not free (%s); set BATON_WEB_PORT to a free port",
                      settings.web_host, settings.web_port, exc.strerror or exc,
                      extra={"action": "web_failed", "port": settings.web_port})
            await baton.stopping.wait()
            return
    hub = live_hub(baton, settings)
    app = build_app(baton, settings, hub)

    async def on_event(event: EngineEvent) -> None:
        hub.poke(event.run_id)

    unsubscribe = baton.engine.subscribe(on_event)
    routes = [route for mount in mounts for route in mount.routes]
    config = uvicorn.Config(app.asgi(routes), log_config=None, access_log=False, lifespan="off",
                            server_header=False, timeout_graceful_shutdown=GRACE, proxy_headers=False)
    server = _Server(config)
    lifetimes = AsyncExitStack()
    for mount in mounts:
        await lifetimes.enter_async_context(mount.running())
    task = asyncio.create_task(server.serve(sockets=[sock]), name="web-server")
    host, port = sock.getsockname()[:2]
    log.info("run pages on %s:%d, linked as %s", host, port, settings.page_base_url,
             extra={"action": "web_started", "port": port})
    try:
        stop = asyncio.ensure_future(baton.stopping.wait())
        await asyncio.wait({stop, task}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
    finally:
        unsubscribe()
        await hub.close()
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await lifetimes.aclose()
        sock.close()
