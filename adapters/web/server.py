"""The run pages as a part of the process's one HTTP server (bot/http.py, on its event loop).

The server shares the loop with the engine and the chat adapters, so an engine event of a
run that moves here wakes its open pages at once (`LiveHub.poke`); page building runs in
worker threads (Starlette runs plain `def` endpoints there), so a large page never holds up
chat. The pages are mounted last, at the root: their own security headers and 404 page
answer every path no other part claims.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

from starlette.routing import BaseRoute, Mount

from adapters.web.app import RunPagesApp
from adapters.web.links import PageLinks
from adapters.web.security import Csrf
from core.commands.handler import Handler
from core.commands.page_view import PageStore, Parts, snapshot_of
from core.config import Settings
from core.engine.engine import Engine
from core.engine.events import EngineEvent
from core.engine.live import LiveHub
from core.errors import ConfigurationError
from core.redaction import Redactor
from core.workflows.catalog import Catalog


class Baton(Protocol):
    """What the pages need of `bot.app.Baton` (adapters never import `bot`)."""

    @property
    def store(self) -> PageStore: ...  # the roles the pages read, `views` for their pulse
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


def build_app(baton: Baton, settings: Settings, hub: LiveHub) -> RunPagesApp:
    links = baton.handler.pages
    if not isinstance(links, PageLinks):
        raise ConfigurationError("Run pages are off (BATON_WEB_PORT, BATON_PAGES).",
                                 hint="Set BATON_WEB_PORT to a free port and BATON_PAGES=on to serve them.")
    parts = Parts(store=baton.store, engine=baton.engine, catalog=baton.catalog,
                  access=settings.access_policy, redactor=baton.redactor)
    origin = settings.page_base_url.split("/", 3)
    csrf = Csrf(links.secret, secure=settings.page_base_url.startswith("https://"),
                public_origin="/".join(origin[:3]))
    return RunPagesApp(parts=parts, handler=baton.handler, links=links, hub=hub, csrf=csrf,
                       agents=settings.agents)


def live_hub(baton: Baton, settings: Settings) -> LiveHub:
    parts = Parts(store=baton.store, engine=baton.engine, catalog=baton.catalog,
                  access=settings.access_policy, redactor=baton.redactor)
    return LiveHub(pulse=baton.store.views.run_pulse, read=functools.partial(snapshot_of, parts),
                   poll=settings.web_poll_ms / 1000)


class Pages:
    """The pages' routes (one app at the root) and, while they are served, their live hub."""

    def __init__(self, baton: Baton, settings: Settings) -> None:
        self.engine = baton.engine
        self.hub = live_hub(baton, settings)
        self.app = build_app(baton, settings, self.hub)

    @property
    def routes(self) -> list[BaseRoute]:
        return [Mount("", app=self.app.asgi())]

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async def on_event(event: EngineEvent) -> None:
            self.hub.poke(event.run_id)

        unsubscribe = self.engine.subscribe(on_event)
        try:
            yield
        finally:
            unsubscribe()
            await self.hub.close()  # open pages' event streams end
