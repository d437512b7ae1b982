"""Baton's run pages: a live page per run and a list per conversation, behind signed links.

    links = page_links(settings, redactor)  # None when BATON_WEB_PORT is off; given to the Handler
    sock = bind_pages(settings)             # `baton run`, first: None when the port is taken
    await serve(baton, settings, sock=sock) # `baton run`: until baton.stopping is set

The adapter only translates: `links` (signed, expiring, per-user tokens), `view` (store ->
page data, redacted), `dag` (the layout of the picture), `live` (one watcher per open run,
server-sent events), `security` (headers, CSRF), `app` (the Starlette routes) and `server`
(uvicorn on the bot's loop). Starlette and uvicorn are imported only when pages are served.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING

from adapters.web.links import PageLinks
from adapters.web.signing_key import signing_key
from core.config import Settings
from core.redaction import Redactor

if TYPE_CHECKING:
    from adapters.web.server import Baton, Mounted

log = logging.getLogger("baton.web")


def page_links(settings: Settings, redactor: Redactor) -> PageLinks | None:
    """The links chat replies offer, or None when the pages are off. The signing key is read
    (or made) now, and hidden by `redactor` from then on, before any step runs."""
    if not settings.web_enabled:
        return None
    key = signing_key(settings)
    redactor.add([key.decode("ascii")])
    return PageLinks(base_url=settings.page_base_url, ttl=settings.web_link_ttl, key=lambda: key)


async def serve(baton: Baton, settings: Settings, *, sock: socket.socket | None = None,
                mounts: Sequence[Mounted] = ()) -> None:
    """Serve the pages until `baton.stopping` is set; `sock`: an already bound socket; `mounts`:
    other apps served beside them (`/mcp`)."""
    from adapters.web.server import serve_pages

    await serve_pages(baton, settings, sock=sock, mounts=mounts)


def bind_pages(settings: Settings) -> socket.socket | None:
    """The pages' listening socket, bound before anything offers a link to it; None (logged as
    `action=web_failed`) when the address is taken: the process goes on without pages."""
    from adapters.web.server import bind

    try:
        return bind(settings.web_host, settings.web_port)
    except OSError as exc:
        log.error("run pages not served: %s:%d is not free (%s); set BATON_WEB_PORT to a free port",
                  settings.web_host, settings.web_port, exc.strerror or exc,
                  extra={"action": "web_failed", "port": settings.web_port})
        return None


__all__ = ["PageLinks", "bind_pages", "page_links", "serve"]
