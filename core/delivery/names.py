"""People's names, for a platform whose message would ping whoever it names by id (Slack).

Only a few messages are meant to call someone (`Reply.pings`); the rest show a name (the
platform's `_fmt.j2`, `user`). Where names come from, per immutable user id:

1. What incoming messages already carry (`remember`: a slash command's user name, a click's or
   a form's `username`), kept in a bounded LRU.
2. The platform's look-up (`Lookup`, e.g. Slack's `users.info`) for an id never seen, kept in a
   bounded cache for `ttl` seconds. A look-up that fails (missing scope, unknown user, the
   platform slow or down) is remembered as failed for `FAILED_TTL` seconds and the message shows
   the bare id (no ping): a name is never worth holding a message up, so one reply's look-ups
   wait `LOOKUP_TIMEOUT` seconds at most, together, and messages sent at once that name one
   person share its look-up (never cancelled: a late answer still fills the cache).

Names are display text only: untrusted, escaped where shown like any text, and never used to
authorize anything: that is by id.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from cachetools import LRUCache, TTLCache

log = logging.getLogger("baton.names")

SIZE = 10_000  # people remembered (each cache)
TTL = 6 * 3600.0  # seconds a looked-up name is kept
FAILED_TTL = 300.0  # seconds a failed look-up is not tried again
LOOKUP_TIMEOUT = 2.0  # seconds one reply's look-ups may take, all together
MAX_NAME = 80  # characters of a name shown
MAX_LOOKUPS = 20  # ids one reply looks up at most (the rest show their ids)

#: The platform's look-up of one user id: the names it knows them by, best first (raises on failure).
Lookup = Callable[[str], Awaitable[Sequence[object]]]


def clean(name: object) -> str | None:
    """A name as shown: one line, bounded; None when there is none."""
    if not isinstance(name, str):
        return None
    text = " ".join(name.split())[:MAX_NAME]
    return text or None


class Names:
    """The names directory of one platform. `ids`: the pattern of its user ids (Slack: `U…`/`W…`)."""

    def __init__(
        self, platform: str, ids: str, lookup: Lookup | None, *, size: int = SIZE, ttl: float = TTL
    ) -> None:
        self.platform = platform
        self._id = re.compile(ids)
        self._in_text = re.compile(rf"\b{re.escape(platform)}:({ids})\b")
        self._lookup = lookup
        self._seen: LRUCache[str, str] = LRUCache(maxsize=size)  # from the people's own events
        self._looked: TTLCache[str, str] = TTLCache(maxsize=size, ttl=ttl)  # from the look-up
        self._failed: TTLCache[str, bool] = TTLCache(maxsize=size, ttl=FAILED_TTL)
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self.lookups = 0  # look-ups made (for tests and logs)

    def remember(self, user: object, name: object) -> None:
        """`user`'s name as an event of theirs carries it."""
        shown = clean(name)
        if isinstance(user, str) and self._id.fullmatch(user) and shown is not None:
            self._seen[user] = shown
            self._failed.pop(user, None)

    def known(self, user: str) -> str | None:
        return self._seen.get(user) or self._looked.get(user)

    def people_of(self, data: object) -> list[str]:
        """The user ids a reply's `data` names anywhere (values, lists, sentences), in order."""
        found: dict[str, None] = {}

        def walk(value: Any) -> None:
            if isinstance(value, str):
                for match in self._in_text.finditer(value):
                    found.setdefault(match.group(1), None)
            elif isinstance(value, Mapping):
                for item in value.values():
                    walk(item)
            elif isinstance(value, (list, tuple)):
                for item in value:
                    walk(item)

        walk(data)
        return list(found)

    async def names_for(self, data: object) -> dict[str, str]:
        """`<platform>:<id>` -> name, for the people a reply's `data` names whose name is known or found
        now. Never raises, and waits `LOOKUP_TIMEOUT` seconds at most."""
        return await self.resolve(self.people_of(data))

    async def resolve(self, users: Iterable[str]) -> dict[str, str]:
        users = list(dict.fromkeys(users))
        wanted = [u for u in users if self.known(u) is None and u not in self._failed][:MAX_LOOKUPS]
        if wanted and self._lookup is not None:
            _, late = await asyncio.wait([self._task(u) for u in wanted], timeout=LOOKUP_TIMEOUT)
            if late:  # until their answers come, these show as ids
                log.info(
                    "names slow: %d shown as ids", len(late), extra={"action": f"{self.platform}_names_slow"}
                )
                for user in wanted:
                    if self.known(user) is None:
                        self._failed[user] = True
        return {f"{self.platform}:{u}": name for u in users if (name := self.known(u)) is not None}

    def _task(self, user: str) -> asyncio.Task[None]:
        task = self._inflight.get(user)
        if task is None:
            task = self._inflight[user] = asyncio.create_task(self._look_up(user), name=f"name-{user}")
            task.add_done_callback(lambda _: self._inflight.pop(user, None))
        return task

    async def _look_up(self, user: str) -> None:
        assert self._lookup is not None
        self.lookups += 1
        try:
            candidates = await self._lookup(user)
        except Exception as exc:  # missing scope, unknown user, the platform down: the id is shown
            self._failed[user] = True
            log.info(
                "name look-up failed for %s: %s",
                user,
                str(exc) or type(exc).__name__,
                extra={"action": f"{self.platform}_names_failed"},
            )
            return
        name = next((shown for c in candidates if (shown := clean(c)) is not None), None)
        if name is None:
            self._failed[user] = True
        else:
            self._looked[user] = name
