"""The run pages of a Baton assembled for real (`build_baton`), served to an httpx client.

`Site.open(...)` builds the runtime from settings the way `baton run` does, takes the app
from `adapters.web.server.build_app` (what `serve` mounts) and talks to it over ASGI.
Users talk to the bot through its handler, as the console adapter does; the console outbox
is recorded (`told`), so a decision taken on a page can be seen arriving in chat.
"""

from __future__ import annotations

import itertools
import re
import textwrap
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from adapters.console.messages import to_chat_message
from adapters.web.links import PageLinks
from adapters.web.server import build_app, live_hub
from bot.app import Baton, build_baton
from bot.settings import load_settings
from core.commands.messages import Reply
from core.config import Settings
from core.store.records import Run

BASE = "http://127.0.0.1:8080"
LINK = re.compile(r"https?://[^\s>|)]+/(?:r|c)/[A-Za-z0-9_.\-]+")


def write_workflows(root: Path, workflows: Mapping[str, str]) -> Path:
    folder = root / "workflows"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in workflows.items():
        (folder / f"{name}.yaml").write_text(textwrap.dedent(text).lstrip())
    return folder


def settings_for(root: Path, database_url: str, workflows: Mapping[str, str], **overrides: Any) -> Settings:
    values: dict[str, Any] = {"data_dir": root / ".baton", "web_port": 8080, **overrides}
    return load_settings(database_url=database_url, workflow_dirs=[write_workflows(root, workflows)],
                         overrides=values)


@dataclass
class Site:
    baton: Baton
    settings: Settings
    client: httpx.AsyncClient
    told: list[Reply] = field(default_factory=list)  # what the console outbox received
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    @classmethod
    @asynccontextmanager
    async def open(cls, root: Path, database_url: str, workflows: Mapping[str, str],
                   **overrides: Any) -> AsyncIterator[Site]:
        settings = settings_for(root, database_url, workflows, **overrides)
        baton = build_baton(settings)
        try:
            async with baton.running(handle_signals=False):
                transport = None  # pages off: a client that is never used
                if settings.web_enabled:
                    app = build_app(baton, settings, live_hub(baton, settings)).asgi()
                    transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
                    site = cls(baton, settings, client)

                    async def outbox(reply: Reply) -> None:
                        site.told.append(reply)

                    baton.handler.register_outbox("console", outbox)
                    yield site
                    await baton.handler.drain()
        finally:
            baton.close()

    @property
    def links(self) -> PageLinks:
        assert isinstance(self.baton.handler.pages, PageLinks)
        return self.baton.handler.pages

    async def say(self, text: str, *, user: str = "ana", conversation: str = "c1") -> list[Reply]:
        message = to_chat_message(text, conversation, user, event_id=f"t-{next(self._ids)}")
        return await self.baton.handler.handle(message)

    async def start(self, text: str, *, user: str = "ana", conversation: str = "c1") -> Run:
        """`run …` in chat, then wait until the run rests."""
        answer = await self.say(text, user=user, conversation=conversation)
        run_id = answer[0].run_id
        assert run_id is not None, answer
        rested = await self.baton.engine.wait(run_id, timeout=60)
        await self.baton.handler.drain()  # its final replies are out: nothing else reads meanwhile
        return rested

    async def link(self, run: Run, *, user: str = "ana") -> str:
        """The link `open <run>` gives `user` in chat (the path part)."""
        answer = await self.say(f"open {run.id}", user=user, conversation=run.conversation)
        assert answer[0].kind == "page_link", answer
        return str(answer[0].data["url"]).removeprefix(BASE)
