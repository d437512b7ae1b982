"""A chat platform's life in the process, the same for every adapter (#27): its commands
registered only when they changed, its connection served until the process settles, and the
errors that stop Baton at start said in the platform's sentences.

    synced = await registered(handler, "discord", scope, payload, register, always=False)
    await until_settled(baton, asyncio.create_task(client.start(token)), client.close)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from core.errors import ConfigurationError
from core.render import Format, sentence

if TYPE_CHECKING:
    from core.commands.handler import Handler

log = logging.getLogger("baton.lifecycle")


async def registered(handler: Handler, platform: str, scope: str, payload: object,
                     register: Callable[[], Awaitable[int]], *, always: bool) -> int | None:
    """The platform's commands registered (`register`: how many) when `payload`, what the
    platform gets for them, changed since the last registration in `scope` (its digest kept with
    the core, `remember`), or `always`; None when unchanged and skipped."""
    key = f"commands:{scope}"
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
    if not always and handler.recall(platform, key) == digest:
        log.info("application commands unchanged; not synced",
                 extra={"action": "commands_unchanged", "scope": scope})
        return None
    count = await register()
    handler.remember(platform, key, digest)
    log.info("application commands synced",
             extra={"action": "commands_synced", "scope": scope, "count": count})
    return count


async def until_settled(baton: Any, running: asyncio.Task[Any], close: Callable[[], Awaitable[None]]) -> None:
    """Until the platform's connection (`running`) ends or the process has settled (steps' grace
    over, outbox flushed: `baton.settled`; a bare stop request where none comes), so the replies
    of runs that finish meanwhile still go out; then `close()` and wait for the connection."""
    stopping = asyncio.create_task(getattr(baton, "settled", baton.stopping).wait())
    try:
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        await close()
        await asyncio.wait({running})


def stopped(fmt: Format, name: str, *args: object) -> ConfigurationError:
    """An error that stops Baton at start, the sentence `name` of the platform's `_said.j2`: its
    line of cause, its line of next step."""
    cause, _, hint = sentence(fmt, name, *args).partition("\n")
    return ConfigurationError(cause, hint=hint)
