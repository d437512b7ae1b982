"""Before a run starts from a channel: can Baton post there? (`conversations.info`)

Slack answers for the channel the command was typed in; Baton may post when it is a member of
a channel (public or private) that is not archived, or in its own direct messages. Anything
else (not a member, a private channel or group DM it was not added to, a direct message between
two people, which Slack reports as `channel_not_found`, an archived channel, a refused token,
Slack unreachable) fails closed: nothing starts and the user is told, privately (through the
command's response URL), what to do in that kind of conversation. A channel found writable is
remembered for `FRESH` seconds, so a burst of runs costs one call.
"""

from __future__ import annotations

import time

from cachetools import TTLCache
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.formatting import said
from adapters.slack.web_api import SlackCallFailed, call

FRESH = 30.0  # seconds a channel found writable is not asked about again
KEPT = 1_000  # channels remembered


class Preflight:
    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client
        self._writable: TTLCache[str, bool] = TTLCache(KEPT, FRESH, timer=time.monotonic)

    async def refusal(self, channel: str, channel_name: str | None = None) -> str | None:
        """None when Baton can post in `channel`; else the two lines to tell the user."""
        if channel in self._writable:  # found writable less than `FRESH` seconds ago
            return None
        try:
            response = await call(self._client, "conversations.info", channel=channel)
        except SlackCallFailed as exc:
            if exc.error in ("channel_not_found", "not_in_channel"):
                return said("cannot_post", _kind(channel, channel_name, {}), channel)
            return said("cannot_check", exc.error)
        info = response.get("channel") or {}
        if info.get("is_im") or (info.get("is_member") and not info.get("is_archived")):
            self._writable[channel] = True
            return None
        if info.get("is_archived"):
            return said("archived", channel)
        return said("cannot_post", _kind(channel, channel_name, info), channel)


def _kind(channel: str, channel_name: str | None, info: dict[str, object]) -> str:
    """"public", "private", "group_dm" or "dm": what kind of conversation `channel` is, from what
    Slack said of it (nothing, when it could not see it) and the slash command's `channel_name`."""
    name = channel_name or ""
    if info.get("is_mpim") or name.startswith("mpdm-"):
        return "group_dm"
    if info.get("is_im") or name == "directmessage" or channel.startswith("D"):
        return "dm"
    if info.get("is_private") or info.get("is_group") or name == "privategroup" or channel.startswith("G"):
        return "private"
    return "public"
