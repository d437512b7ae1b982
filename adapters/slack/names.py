"""People's names for Slack messages: who is named is shown by name, not pinged.

Slack turns `<@U123>` in a bot's message into a mention that notifies that person. Baton's
messages name people all the time ("started by …", "Approved by … and …", "proposed by …"), and
only a few are meant to call someone (`Reply.pings`: a reminder or escalation to the approvers
it waits on, "handled after a restart" to who typed the command); the rest show a name
(`templates/slack/_fmt.j2`, `user` and `ping`).

Where names come from, per immutable user id (`U…`, `W…`):
1. What incoming events already carry: a slash command's `user_name`, a block action's or a
   view submission's `user.name` / `user.username` (`remember_body`), kept in a bounded LRU.
2. Slack's `users.info` for an id never seen (the profile's display name, else real name,
   else the account name), kept in a bounded cache for `TTL` seconds (`cachetools`). A lookup
   that fails (missing scope, unknown user, Slack slow or down) is remembered as failed for
   `FAILED_TTL` seconds and the message shows the bare id (`U123`, no ping): a name is never
   worth holding a message up, so a lookup waits `LOOKUP_TIMEOUT` seconds at most.

Names are display text only: untrusted, escaped where shown like any text (a name `<!channel>`
or `*bold*` neither pings nor formats), and never used to authorize anything: that is by id.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from cachetools import LRUCache, TTLCache
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from core.commands.messages import Reply

log = logging.getLogger("baton.slack")

PLATFORM = "slack"
SIZE = 10_000  # people remembered (each cache)
TTL = 6 * 3600.0  # seconds a looked-up name is kept
FAILED_TTL = 300.0  # seconds a failed lookup is not tried again
LOOKUP_TIMEOUT = 2.0  # seconds one reply's lookups may take, all together
MAX_NAME = 80  # characters of a name shown
MAX_LOOKUPS = 20  # ids one reply looks up at most (the rest show their ids)
_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
_IN_TEXT = re.compile(r"\bslack:([UW][A-Z0-9]{2,})\b")


def _clean(name: object) -> str | None:
    """A name as shown: one line, bounded; None when there is none."""
    if not isinstance(name, str):
        return None
    text = " ".join(name.split())[:MAX_NAME]
    return text or None


def people_of(reply: Reply) -> list[str]:
    """The Slack user ids `reply` names anywhere in its data (values, lists, sentences), in order."""
    found: dict[str, None] = {}

    def walk(value: Any) -> None:
        if isinstance(value, str):
            for match in _IN_TEXT.finditer(value):
                found.setdefault(match.group(1), None)
        elif isinstance(value, Mapping):
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    walk(reply.data)
    return list(found)


class Names:
    """The names directory of one Slack app (see the module docstring)."""

    def __init__(self, client: AsyncWebClient | None, *, size: int = SIZE, ttl: float = TTL) -> None:
        self._client = client
        self._seen: LRUCache[str, str] = LRUCache(maxsize=size)  # from the people's own events
        self._looked: TTLCache[str, str] = TTLCache(maxsize=size, ttl=ttl)  # from users.info
        self._failed: TTLCache[str, bool] = TTLCache(maxsize=size, ttl=FAILED_TTL)
        #: lookups under way: messages sent at once that name one person share its lookup
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self.lookups = 0  # users.info calls made (for tests and logs)

    def remember(self, user: object, name: object) -> None:
        """`user`'s name as an event of theirs carries it."""
        shown = _clean(name)
        if isinstance(user, str) and _ID.match(user) and shown is not None:
            self._seen[user] = shown
            self._failed.pop(user, None)

    def remember_body(self, body: Mapping[str, Any]) -> None:
        """The name an incoming request carries: a slash command (`user_id`, `user_name`), a
        block action or a view submission (`user: {id, username, name}`)."""
        if body.get("user_id"):
            self.remember(body.get("user_id"), body.get("user_name"))
        user = body.get("user")
        if isinstance(user, Mapping):
            self.remember(user.get("id"), user.get("username") or user.get("name"))

    def known(self, user: str) -> str | None:
        return self._seen.get(user) or self._looked.get(user)

    async def names_for(self, reply: Reply) -> dict[str, str]:
        """`slack:U…` -> name, for the people `reply` names whose name is known or found now.
        Never raises, and waits `LOOKUP_TIMEOUT` seconds at most."""
        return await self.resolve(people_of(reply))

    async def resolve(self, users: Iterable[str]) -> dict[str, str]:
        users = list(dict.fromkeys(users))
        wanted = [u for u in users if self.known(u) is None and u not in self._failed][:MAX_LOOKUPS]
        if wanted and self._client is not None:
            tasks = [self._lookup_task(u) for u in wanted]
            _, late = await asyncio.wait(tasks, timeout=LOOKUP_TIMEOUT)  # never cancelled: a late
            if late:  # answer still fills the cache; until then these show as ids
                log.info("users.info slow: %d names shown as ids", len(late),
                         extra={"action": "slack_names_slow"})
                for user in wanted:
                    if self.known(user) is None:
                        self._failed[user] = True
        return {f"{PLATFORM}:{u}": name for u in users if (name := self.known(u)) is not None}

    def _lookup_task(self, user: str) -> asyncio.Task[None]:
        task = self._inflight.get(user)
        if task is None:
            task = self._inflight[user] = asyncio.create_task(self._look_up(user), name=f"slack-name-{user}")
            task.add_done_callback(lambda _: self._inflight.pop(user, None))
        return task

    async def _look_up(self, user: str) -> None:
        assert self._client is not None
        self.lookups += 1
        try:
            response = await self._client.users_info(user=user)
            found = response.get("user") or {}
        except Exception as exc:  # missing scope, unknown user, Slack down: the id is shown
            self._failed[user] = True
            error = exc.response.get("error") if isinstance(exc, SlackApiError) else type(exc).__name__
            log.info("users.info failed for %s: %s", user, error, extra={"action": "slack_names_failed"})
            return
        profile = found.get("profile") or {}
        name = (_clean(profile.get("display_name")) or _clean(profile.get("real_name"))
                or _clean(found.get("real_name")) or _clean(found.get("name")))
        if name is None:
            self._failed[user] = True
            return
        self._looked[user] = name
