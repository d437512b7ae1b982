"""Baton's run pages: a live page per run and a list per conversation, behind signed links.

    links = page_links(settings, redactor)  # None when the pages are off; given to the Handler
    part = pages(baton, settings)           # `baton run`: mounted on the one server (bot/http.py)

The adapter only translates: `links` (signed, expiring, per-user tokens), `dag` (the layout
of the picture), `security` (headers, CSRF), `app` (the Starlette routes over the page data of
`core.commands.page_view`; live updates as server-sent events from `core.engine.live`) and
`server` (the part the process's HTTP server mounts). The key is `core.signing_key`'s.
Starlette is imported only when pages are served. The words are the templates' (templates/web).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.web.links import PageLinks
from core.config import Settings
from core.redaction import Redactor
from core.signing_key import signing_key

if TYPE_CHECKING:
    from adapters.web.server import Baton, Pages


def page_links(settings: Settings, redactor: Redactor) -> PageLinks | None:
    """The links chat replies offer, or None when the pages are off. The signing key is read
    (or made) now, and hidden by `redactor` from then on, before any step runs."""
    if not settings.web_enabled:
        return None
    key = signing_key(settings)
    redactor.add([key.decode("ascii")])
    return PageLinks(base_url=settings.page_base_url, ttl=settings.web_link_ttl, key=lambda: key)


def pages(baton: Baton, settings: Settings) -> Pages:
    """The pages as a part of the process's one HTTP server (`routes`, `running()`)."""
    from adapters.web.server import Pages

    return Pages(baton, settings)


__all__ = ["PageLinks", "page_links", "pages"]
