"""Slack's side of the conversation: signed HTTP requests to the Bolt app, as Slack sends them.

Slash commands and button clicks are form-encoded, events are JSON; each request is signed
with `slack_sdk.signature.SignatureVerifier` exactly as Slack signs it.
"""

from __future__ import annotations

import faulthandler
import gc
import itertools
import json
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
from slack_sdk.signature import SignatureVerifier

from tests.e2e.slack.mock_slack import BOT_USER, TEAM, Call, MockSlack

CHANNEL = "C0OPS"
ANA = "U0ANA"
BOB = "U0BOB"

_ids = itertools.count(1)


@dataclass(frozen=True)
class Answer:
    status: int
    seconds: float  # how long the app took to answer (Slack allows 3 s)
    body: str
    #: why it was slow, when it took longer than `STALL_AFTER`: the collector's pauses and
    #: every thread's stack at that moment (an ack check that fails on a loaded machine
    #: names what held the event loop)
    stalls: str = ""


STALL_AFTER = 2.0  # seconds into a request when its stacks are recorded


@contextmanager
def _stalls_recorded(into: list[str]) -> Iterator[None]:
    """Record the collector's pauses, and every thread's stack should the block last longer
    than `STALL_AFTER`; appended to `into` (empty when it was quick)."""
    paused = [0.0, 0.0]  # total, started

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            paused[1] = time.monotonic()
        else:
            paused[0] += time.monotonic() - paused[1]

    gc.callbacks.append(on_gc)
    with tempfile.TemporaryFile("w+") as dump:
        faulthandler.dump_traceback_later(STALL_AFTER, file=dump)
        started = time.monotonic()
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()
            gc.callbacks.remove(on_gc)
            if time.monotonic() - started > STALL_AFTER:
                dump.seek(0)
                into.append(f"collector paused {paused[0]:.2f}s; stacks after {STALL_AFTER}s:\n{dump.read()}")


class SlackHarness:
    def __init__(self, url: str, signing_secret: str, mock: MockSlack) -> None:
        self.url = url
        self.mock = mock
        self._verifier = SignatureVerifier(signing_secret)
        self._session = aiohttp.ClientSession()
        self.last_trigger = ""  # the trigger_id of the last command or click sent
        self.last_command_url = ""  # the mock's name of the last command's response URL

    async def close(self) -> None:
        await self._session.close()

    # -- raw ---------------------------------------------------------------------------
    def signed_headers(self, body: str, content_type: str, *, timestamp: int | None = None) -> dict[str, str]:
        ts = str(timestamp if timestamp is not None else int(time.time()))
        return {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": self._verifier.generate_signature(timestamp=ts, body=body),
        }

    async def post(self, body: str, headers: dict[str, str]) -> Answer:
        stalls: list[str] = []
        with _stalls_recorded(stalls):
            started = time.monotonic()
            async with self._session.post(self.url, data=body.encode(), headers=headers) as response:
                text = await response.text()
            seconds = time.monotonic() - started
        return Answer(response.status, seconds, text, "".join(stalls))

    async def _form(self, fields: dict[str, str], extra_headers: dict[str, str] | None = None) -> Answer:
        body = urlencode(fields)
        headers = self.signed_headers(body, "application/x-www-form-urlencoded")
        return await self.post(body, {**headers, **(extra_headers or {})})

    # -- what people do ------------------------------------------------------------------
    async def command(self, text: str, *, user: str = ANA, channel: str = CHANNEL,
                      channel_name: str = "ops") -> Answer:
        """`/workflow <text>` typed by `user` in `channel` (Slack names a direct message
        `directmessage`, a private channel `privategroup`, a group DM `mpdm-…`)."""
        n = next(_ids)
        self.last_command_url = f"command-{n}"  # the name of its response URL in the mock
        return await self._form({
            "token": "legacy", "team_id": TEAM, "team_domain": "baton-test",
            "channel_id": channel, "channel_name": channel_name, "user_id": user,
            "user_name": f"name-of-{user}",
            "command": "/workflow", "text": text, "api_app_id": "A0BATON",
            "response_url": self.mock.response_url(f"command-{n}"),
            "trigger_id": self._trigger(f"{n}.trigger"),
        })

    def _trigger(self, prefix: str) -> str:
        self.last_trigger = f"{prefix}.{time.time_ns()}"
        return self.last_trigger

    async def click(self, message: Call, action: str, *, user: str = ANA, channel: str = CHANNEL) -> Answer:
        """`user` clicks the `action` button of a message the bot posted (recorded by the mock)."""
        button = message.button(action)
        return await self._act(message, {**button, "block_id": "baton_actions_0"}, user=user, channel=channel)

    async def choose(self, message: Call, menu: int, option: str, *, user: str = ANA,
                     channel: str = CHANNEL) -> Answer:
        """`user` picks, in choice list `menu` of a message, the option whose value is `option`."""
        select = message.menus[menu]
        [picked] = [o for o in select["options"] if o["value"] == option]
        action = {"type": "static_select", "action_id": select["action_id"], "block_id": "baton_menus",
                  "selected_option": picked, "placeholder": select["placeholder"]}
        return await self._act(message, action, user=user, channel=channel)

    async def _act(self, message: Call, action: dict[str, Any], *, user: str, channel: str) -> Answer:
        """A `block_actions` payload for `action` on `message`, as Slack sends it."""
        n = next(_ids)
        blocks = message.body.get("blocks")
        blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
        original: dict[str, Any] = {"type": "message", "ts": message.ts, "text": message.body.get("text"),
                                    "blocks": blocks, "user": BOT_USER, "bot_id": "BBATON"}
        container: dict[str, Any] = {"type": "message", "message_ts": message.ts, "channel_id": channel,
                                     "is_ephemeral": False}
        if message.body.get("thread_ts"):
            original["thread_ts"] = message.body["thread_ts"]
            container["thread_ts"] = message.body["thread_ts"]
        payload = {
            "type": "block_actions", "team": {"id": TEAM, "domain": "baton-test"},
            "user": {"id": user, "username": f"name-of-{user}", "team_id": TEAM},
            "api_app_id": "A0BATON", "token": "legacy", "container": container,
            "trigger_id": self._trigger(f"{n}.click"), "channel": {"id": channel, "name": "ops"},
            "message": original, "response_url": self.mock.response_url(f"click-{n}"),
            "actions": [{**action, "action_ts": f"{time.time():.6f}{n}"}],
        }
        return await self._form({"payload": json.dumps(payload)})

    async def submit(self, opened: Call, values: dict[str, str], *, user: str = ANA) -> Answer:
        """`user` submits the modal Baton opened (`opened`: its views.open call) with these texts:
        {field name: text}; a field with choices is answered by picking that option."""
        view = opened.body["view"]
        view = json.loads(view) if isinstance(view, str) else view
        state: dict[str, Any] = {}
        for block in view["blocks"]:
            name = block["block_id"].removeprefix("field:")
            if name not in values:
                continue
            element = block["element"]
            if element["type"] == "static_select":
                [option] = [o for o in element["options"] if o["value"] == values[name]]
                state[block["block_id"]] = {"value": {"type": "static_select", "selected_option": option}}
            else:
                state[block["block_id"]] = {"value": {"type": "plain_text_input", "value": values[name]}}
        n = next(_ids)
        payload = {
            "type": "view_submission", "team": {"id": TEAM, "domain": "baton-test"},
            "user": {"id": user, "username": f"name-of-{user}", "team_id": TEAM},
            "api_app_id": "A0BATON", "token": "legacy", "trigger_id": self._trigger(f"{n}.submit"),
            "view": {**view, "id": f"V{n:08d}", "team_id": TEAM, "hash": f"{n}.hash",
                     "state": {"values": state}, "app_id": "A0BATON", "bot_id": "BBATON"},
            "response_urls": [],
        }
        return await self._form({"payload": json.dumps(payload)})

    async def event(self, event: dict[str, Any], *, event_id: str | None = None,
                    retry_num: int | None = None) -> Answer:
        envelope = {
            "token": "legacy", "team_id": TEAM, "api_app_id": "A0BATON", "event": event,
            "type": "event_callback", "event_id": event_id or f"Ev{next(_ids):08d}",
            "event_time": int(time.time()),
            "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
        }
        body = json.dumps(envelope)
        headers = self.signed_headers(body, "application/json")
        if retry_num is not None:
            headers |= {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "http_timeout"}
        return await self.post(body, headers)

    @staticmethod
    def message_event(text: str, *, user: str = ANA, channel: str = CHANNEL, thread_ts: str | None = None,
                      channel_type: str = "channel", **extra: Any) -> dict[str, Any]:
        ts = f"{int(time.time())}.{next(_ids):06d}"
        event: dict[str, Any] = {"type": "message", "channel": channel, "user": user, "text": text,
                                 "ts": ts, "channel_type": channel_type, **extra}
        if thread_ts:
            event["thread_ts"] = thread_ts
        return event
