"""A real Handler on a real Engine and a temporary SQLite store, with a recording outbox."""

from __future__ import annotations

import asyncio
import itertools
import textwrap
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot import testing
from bot.app import Baton
from core.commands.handler import Handler
from core.commands.messages import ChatMessage, Reply
from core.config import Access
from core.engine.engine import Engine
from core.store.records import Run
from core.store.repository import SqlStore

FINAL_KINDS = {"run_completed", "run_failed", "gate_waiting", "needs_attention", "run_cancelled"}

WORKFLOWS = {
    # fails while the file named by `marker` is missing; the message is echoed
    "flaky": """
        name: flaky
        description: fails until its marker file exists
        inputs:
          marker: {type: string, default: /nonexistent/baton-marker}
        nodes:
          - id: check
            bash: test -e {{ inputs.marker }} && printf '%s' {{ inputs.message }}
            replay: pure
    """,
    "gated": """
        name: gated
        description: a step, an approval, a step
        nodes:
          - id: prepare
            bash: printf 'prepared %s' {{ inputs.message }}
            replay: pure
          - id: review
            depends_on: [prepare]
            approval: "Ship {{ nodes.prepare.output }}?"
          - id: ship
            depends_on: [review]
            bash: printf shipped
            replay: pure
    """,
}


@dataclass
class Chat:
    """Talk to the handler like an adapter would; collect background replies."""

    baton: Baton  # as `bot.testing` wired it: `running()` starts its loops
    handler: Handler
    store: SqlStore
    engine: Engine
    root: Path
    platform: str = "console"
    outbox: list[Reply] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def say(self, text: str, *, user: str = "ana", command: bool = True, thread: str | None = None,
                  direct: bool | None = None, mentions: bool = False, event_id: str | None = None,
                  conversation: str = "c1") -> list[Reply]:
        message = ChatMessage(
            platform=self.platform, conversation=conversation, user=user, text=text,
            event_id=event_id or f"{self.root.name}-e{next(self._ids)}", thread=thread, is_command=command,
            direct=(self.platform == "console") if direct is None else direct, mentions_bot=mentions,
        )
        return await self.handler.handle(message)

    async def _collect(self, reply: Reply) -> None:
        self.outbox.append(reply)
        self._arrived.set()

    async def final(self, run_id: str, timeout: float = 30.0) -> Reply:
        """Wait (with a deadline) for the final background reply of `run_id`."""
        async def until() -> Reply:
            while True:
                for reply in self.outbox:
                    if reply.run_id == run_id and reply.kind in FINAL_KINDS and not reply.how.edit_only:
                        self.outbox.remove(reply)
                        return reply
                self._arrived.clear()
                await self._arrived.wait()

        return await asyncio.wait_for(until(), timeout)

    async def rest(self, run_id: str) -> Run:
        run = await self.engine.wait(run_id, timeout=30)
        await self.handler.drain()
        return run

    def runs(self) -> list[Run]:
        return self.store.runs.recent_runs(limit=100)


async def make_chat(root: Path, url: str, access: Access | None = None, platform: str = "console",
                    lease_seconds: float = 15.0, event_stale_after: float = 60.0,
                    clock: Callable[[], float] = time.time, **settings: Any) -> Chat:
    (root / "workflows").mkdir(parents=True, exist_ok=True)
    for name, text in WORKFLOWS.items():
        (root / "workflows" / f"{name}.yaml").write_text(textwrap.dedent(text))
    baton = testing.build(root, database_url=url, access=access, lease_seconds=lease_seconds,
                          event_stale_seconds=event_stale_after, clock=clock, **settings)  # fmt: skip
    assert isinstance(baton.store, SqlStore)
    chat = Chat(baton=baton, handler=baton.handler, store=baton.store, engine=baton.engine, root=root,
                platform=platform)  # fmt: skip
    baton.handler.register_outbox(platform, chat._collect)
    return chat


@pytest.fixture
async def chat(tmp_path: Path, migrated_database_url: str) -> AsyncIterator[Chat]:
    """SQLite and the real PostgreSQL server (skipped when unreachable, outside CI). With the
    loops of the production wiring that deliver (the outbox's) and fire gate deadlines, and
    stopped as `baton run` stops (`Baton.settle`: steps' grace, then the outbox flushed)."""
    c = await make_chat(tmp_path, migrated_database_url, shutdown_grace=5.0)
    outbox, deadlines = c.baton.outbox, c.baton.deadlines
    assert outbox is not None and deadlines is not None
    await outbox.start()
    await deadlines.start()
    yield c
    await deadlines.stop()
    await c.baton.settle()
    c.store.close()
