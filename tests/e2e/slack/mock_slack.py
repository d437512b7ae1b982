"""A local stand-in for Slack's Web API: an aiohttp server on a free 127.0.0.1 port that
records every call (method, JSON or form body) and answers like Slack does.

Tests wait on the recorded calls with a deadline (`await mock.wait_for(...)`), never by
sleeping. `fail_next(method, error, ...)` makes the next call(s) of a method fail the way
Slack fails (e.g. `ratelimited` with HTTP 429 and `Retry-After`).

It enforces Block Kit's limits as Slack does (`invalid_blocks`): at most 50 blocks a message,
3,000 characters of text a section, 2,000 a button's value.

It keeps the messages posted (`messages`, with their `metadata`) and answers
`conversations.history` (top-level messages, newest first) and `conversations.replies` (a thread,
oldest first) from them, paged by `limit` (at most 1,000) and `cursor`, `oldest` respected; a
message's metadata is returned only with `include_all_metadata`, as Slack does. A failure or a
hold `taken=True` keeps the message before failing (Slack took it, its answer was lost).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import WSMsgType, web

BOT_USER = "UBATONBOT"
BOT_ID = "BBATON"
APP_ID = "A0BATON"
TEAM = "T0BATON"


@dataclass(frozen=True)
class Call:
    method: str  # "chat.postMessage", "upload", "response_url"
    body: dict[str, Any]
    at: float  # time.monotonic()
    ts: str | None = None  # ts of the message it created, if any ("response": a response URL took it)

    @property
    def text(self) -> str:
        """Every human-readable text of the call: `text` plus the texts of its blocks."""
        parts = [str(self.body.get("text") or "")]
        for block in _blocks(self.body):
            text = block.get("text")
            if isinstance(text, dict):
                parts.append(str(text.get("text", "")))
            for element in block.get("elements", []) or []:
                if isinstance(element, dict) and element.get("type") in ("mrkdwn", "plain_text"):
                    parts.append(str(element.get("text", "")))
        return "\n".join(parts)

    @property
    def buttons(self) -> list[dict[str, Any]]:
        return [e for e in self._elements() if e.get("type") == "button"]

    @property
    def menus(self) -> list[dict[str, Any]]:
        """The choice lists (static_select elements)."""
        return [e for e in self._elements() if e.get("type") == "static_select"]

    def _elements(self) -> list[dict[str, Any]]:
        return [
            element
            for block in _blocks(self.body)
            if block.get("type") == "actions"
            for element in block.get("elements", [])
        ]

    def button(self, action: str) -> dict[str, Any]:
        for element in self.buttons:
            if element["action_id"].split(":")[1] == action:
                return element
        raise AssertionError(f"no {action!r} button in {[b['action_id'] for b in self.buttons]}")


def _is_user(channel: object) -> bool:
    return isinstance(channel, str) and channel[:1] in ("U", "W")


def dm_of(channel: object) -> object:
    """The conversation a message posted to `channel` lands in: a user id's DM is `D` + the id."""
    return f"D{channel}" if _is_user(channel) else channel


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = body.get("blocks") or []
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    return list(blocks)


@dataclass
class _Failure:
    error: str
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    drop: bool = False  # close the connection without answering (Slack unreachable)
    only: dict[str, Any] = field(default_factory=dict)  # fail only calls whose body has these values
    taken: bool = False  # the message is posted before the call fails (the answer was lost)


class MockSlack:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.uploads: dict[str, bytes] = {}
        #: what `conversations.info` says of a channel, over the default (a channel Baton is in)
        self.channels: dict[str, dict[str, Any]] = {}
        #: response URLs Slack no longer takes (as after their 30 minutes); each takes 5 posts
        self.expired_urls: set[str] = set()
        self._url_uses: dict[str, int] = {}
        self._changed = asyncio.Condition()
        self._failures: dict[str, list[_Failure]] = {}
        self._ts = 1_700_000_000_000_000
        self._runner: web.AppRunner | None = None
        self._sockets: list[web.WebSocketResponse] = []
        self.port = 0
        #: (method, text contained): such calls get no answer until `release` (a slow Slack)
        self._holds: list[tuple[str, str]] = []
        self._released = asyncio.Event()
        self.held: list[Call] = []  # calls left unanswered (not in `calls`: Slack never took them)
        self._holds_taken: set[tuple[str, str]] = set()  # holds whose calls Slack takes first
        self._holds_left: dict[tuple[str, str], int] = {}  # holds that catch only so many calls
        #: messages posted (chat.postMessage): channel, ts, thread_ts, text, metadata
        self.messages: list[dict[str, Any]] = []
        #: the workspace's people as `users.info` answers (id -> user object); any other user id
        #: is a person whose display name is `name-of-<id>` (as the harness's events name them),
        #: but those in `unknown_users` (users.info: user_not_found)
        self.users: dict[str, dict[str, Any]] = {}
        self.unknown_users: set[str] = set()

    # -- lifecycle ---------------------------------------------------------------
    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)  # the SDK GETs the reading methods
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_post("/response/{name}", self._response_url)
        app.router.add_get("/socket", self._socket)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        for socket in self._sockets:
            await socket.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def response_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/response/{name}"

    async def send_envelope(self, envelope: dict[str, Any]) -> None:
        """Socket Mode: push an envelope to the connected app (recorded acks: `socket.ack`)."""
        await self._sockets[-1].send_str(json.dumps(envelope))

    # -- test controls ---------------------------------------------------------------
    def fail_next(self, method: str, error: str, *, times: int = 1, status: int = 200,
                  headers: dict[str, str] | None = None, drop: bool = False,
                  only: dict[str, Any] | None = None, taken: bool = False, **extra: Any) -> None:
        """The next `times` calls of `method` (those whose body has the values of `only`) fail;
        `taken`: a message is posted all the same (Slack took it, its answer was lost)."""
        failure = _Failure(error, status, headers or {}, extra, drop, only or {}, taken)
        self._failures.setdefault(method, []).extend([failure] * times)

    def hold(self, method: str, contains: str, *, taken: bool = False, times: int | None = None) -> None:
        """Calls of `method` whose text contains `contains` (the first `times` of them) hang
        unanswered until `release`; `taken`: Slack posts the message first (it is in `calls`
        and `messages`), only the answer never comes."""
        self._holds.append((method, contains))
        if taken:
            self._holds_taken.add((method, contains))
        if times is not None:
            self._holds_left[(method, contains)] = times
        self._released.clear()

    def release(self) -> None:
        self._holds.clear()
        self._holds_taken.clear()
        self._holds_left.clear()
        self._released.set()

    def of(self, *methods: str) -> list[Call]:
        return [c for c in self.calls if c.method in methods]

    async def wait_for(self, predicate: Callable[[list[Call]], Any], timeout: float = 15.0) -> Any:
        """Wait until `predicate(calls)` is truthy; return its value. Fails after `timeout`."""
        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(lambda: predicate(self.calls)), timeout)
            except TimeoutError:
                summary = "\n".join(f"  {c.method}: {c.text[:200]!r}" for c in self.calls)
                raise AssertionError(f"no matching Slack call within {timeout}s; calls:\n{summary}") from None
            return predicate(self.calls)

    async def wait_call(
        self, method: str, contains: str = "", *, after: int = 0, timeout: float = 15.0
    ) -> Call:
        """The first call of `method` (from index `after`) whose text contains `contains`."""
        def find(calls: list[Call]) -> Call | None:
            for call in calls[after:]:
                if call.method == method and contains in call.text:
                    return call
            return None

        return await self.wait_for(find, timeout)  # type: ignore[no-any-return]

    # -- handlers ------------------------------------------------------------------------
    async def _record(self, call: Call) -> None:
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()

    def _next_ts(self) -> str:
        self._ts = max(self._ts + 1, time.time_ns() // 1_000)  # Slack's clock: epoch microseconds
        return f"{self._ts // 1_000_000}.{self._ts % 1_000_000:06d}"

    async def _body(self, request: web.Request) -> dict[str, Any]:
        raw = await request.text()
        body: dict[str, Any] = dict(request.query)  # the SDK sends some methods' arguments as a query
        if request.content_type == "application/json":
            body.update(json.loads(raw or "{}"))
        else:
            body.update(parse_qsl(raw))
        return body

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        body = await self._body(request)
        failures = self._failures.get(method)
        if failures and all(body.get(k) == v for k, v in failures[0].only.items()):
            failure = failures.pop(0)
            ts = self._keep(body) if failure.taken and method == "chat.postMessage" else None
            await self._record(Call(method, body, time.monotonic(), ts))
            if failure.drop and request.transport is not None:
                request.transport.close()  # the client sees the server disconnect
            payload = {"ok": False, "error": failure.error, **failure.extra}
            return web.json_response(payload, status=failure.status, headers=failure.headers)
        asked = Call(method, body, time.monotonic())
        if hold := next(((m, t) for m, t in self._holds if method == m and t in asked.text), None):
            if (left := self._holds_left.get(hold)) is not None:
                self._holds_left[hold] = left - 1
                if left <= 1:
                    self._holds.remove(hold)  # caught its last call: later ones are answered
            if hold in self._holds_taken and method == "chat.postMessage":
                asked = Call(method, body, asked.at, self._keep(body))
                await self._record(asked)
            async with self._changed:
                self.held.append(asked)
                self._changed.notify_all()
            await self._released.wait()
            return web.json_response({"ok": False, "error": "internal_error"}, status=503)
        invalid = _invalid_blocks(body) if method.startswith("chat.") else None
        if invalid is not None:
            await self._record(Call(method, body, time.monotonic()))
            return web.json_response({"ok": False, "error": "invalid_blocks", "errors": [invalid]})
        if method in ("chat.update", "chat.delete") and _is_user(body.get("channel")):
            # as Slack: a message posted to a user id lives in their DM (D…), which edits must name
            await self._record(Call(method, body, time.monotonic()))
            return web.json_response({"ok": False, "error": "channel_not_found"})
        if method == "chat.postMessage":
            ts = self._keep(body)
        else:
            ts = self._next_ts() if method == "chat.postEphemeral" else body.get("ts")
        await self._record(Call(method, body, time.monotonic(), ts))
        return web.json_response(self._answer(method, body, ts))

    def _keep(self, body: dict[str, Any]) -> str:
        """A message posted: kept (with its metadata) for `conversations.history`/`replies`."""
        ts = self._next_ts()
        metadata = body.get("metadata")
        self.messages.append({"channel": dm_of(body.get("channel")), "ts": ts, "text": body.get("text"),
                              "thread_ts": body.get("thread_ts"),
                              "metadata": json.loads(metadata) if isinstance(metadata, str) else metadata,
                              "bot_id": BOT_ID, "app_id": APP_ID})
        return ts

    def plant(self, channel: str, thread_ts: str | None, text: str, metadata: dict[str, Any], *,
              bot_id: str, app_id: str) -> str:
        """A message another app (or person) posted: read back by conversations.history/replies."""
        ts = self._next_ts()
        self.messages.append({"channel": channel, "ts": ts, "text": text, "thread_ts": thread_ts,
                              "metadata": metadata, "bot_id": bot_id, "app_id": app_id})
        return ts

    def _read(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        """conversations.history / conversations.replies over the kept messages."""
        channel, thread = body.get("channel"), body.get("ts")
        oldest = float(body.get("oldest") or 0)
        if method == "conversations.replies":
            if not thread:
                return {"ok": False, "error": "invalid_arguments"}
            found = [m for m in self.messages if m["channel"] == channel
                     and (m["ts"] == thread or (m["thread_ts"] == thread and float(m["ts"]) > oldest))]
            found.sort(key=lambda m: float(m["ts"]))
        else:
            found = [m for m in self.messages if m["channel"] == channel and float(m["ts"]) > oldest
                     and m["thread_ts"] in (None, m["ts"])]
            found.sort(key=lambda m: -float(m["ts"]))
        metadata = str(body.get("include_all_metadata", "")).lower() in ("true", "1")
        limit = min(int(body.get("limit") or 100), PAGE_LIMIT)
        start = int(body.get("cursor") or 0)
        page = found[start:start + limit]
        more = start + limit < len(found)
        messages = [{"type": "message", "ts": m["ts"], "text": m["text"], "bot_id": m["bot_id"],
                     "app_id": m["app_id"],
                     **({"thread_ts": m["thread_ts"]} if m["thread_ts"] else {}),
                     **({"metadata": m["metadata"]} if metadata and m["metadata"] else {})} for m in page]
        return {"ok": True, "messages": messages, "has_more": more,
                "response_metadata": {"next_cursor": str(start + limit) if more else ""}}

    def _answer(self, method: str, body: dict[str, Any], ts: str | None) -> dict[str, Any]:
        if method == "auth.test":
            return {"ok": True, "url": "https://baton-test.slack.com/", "team": "Baton Test",
                    "user": "baton", "team_id": TEAM, "user_id": BOT_USER, "bot_id": BOT_ID,
                    "app_id": APP_ID}
        if method == "chat.postMessage":  # posted to a user id: Slack answers with their DM's id
            return {"ok": True, "channel": dm_of(body.get("channel")), "ts": ts,
                    "message": {"text": body.get("text"), "ts": ts, "bot_id": BOT_ID}}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": ts}
        if method == "conversations.info":
            channel = str(body.get("channel", ""))
            direct = channel.startswith("D")
            info = {"id": channel, "is_channel": not direct, "is_im": direct, "is_mpim": False,
                    "is_private": False, "is_archived": False, "is_member": True}
            return {"ok": True, "channel": {**info, **self.channels.get(channel, {})}}
        if method in ("conversations.history", "conversations.replies"):
            return self._read(method, body)
        if method == "users.info":
            uid = str(body.get("user", ""))
            if uid in self.unknown_users or uid[:1] not in ("U", "W"):
                return {"ok": False, "error": "user_not_found"}
            profile = {"display_name": f"name-of-{uid}", "real_name": f"Real {uid}"}
            user = self.users.get(uid) or {"id": uid, "name": uid.lower(), "profile": profile}
            return {"ok": True, "user": user}
        if method == "chat.update":
            return {"ok": True, "channel": body.get("channel"), "ts": ts, "text": body.get("text")}
        if method == "files.getUploadURLExternal":
            file_id = f"F{len(self.uploads) + 1:08d}"
            self.uploads[file_id] = b""
            return {"ok": True, "file_id": file_id, "upload_url": f"http://127.0.0.1:{self.port}/upload/{file_id}"}
        if method == "apps.connections.open":
            return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/socket"}
        if method == "files.completeUploadExternal":
            return {"ok": True, "files": [{"id": f["id"], "title": f.get("title")} for f in _files(body)]}
        return {"ok": True}

    async def _upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        data = await request.read()
        self.uploads[file_id] = data
        await self._record(Call("upload", {"file_id": file_id, "size": len(data)}, time.monotonic()))
        return web.Response(text="OK")

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        self._sockets.append(socket)
        await self._record(Call("socket.connect", {}, time.monotonic()))
        async for message in socket:
            if message.type == WSMsgType.TEXT:
                await self._record(Call("socket.ack", json.loads(message.data), time.monotonic()))
        return socket

    async def _response_url(self, request: web.Request) -> web.Response:
        """A post through a response URL: "up to five times within thirty minutes"."""
        body = await self._body(request)
        name = body["name"] = request.match_info["name"]
        self._url_uses[name] = uses = self._url_uses.get(name, 0) + 1
        refused = "expired_url" if name in self.expired_urls else "used_url" if uses > URL_USES else None
        refused = refused or _invalid_blocks(body)
        await self._record(Call("response_url", body, time.monotonic(), ts=None if refused else "response"))
        if refused:
            return web.Response(status=404 if refused in ("expired_url", "used_url") else 400, text=refused)
        return web.Response(text="ok")


MESSAGE_BLOCKS = 50
PAGE_LIMIT = 1_000  # messages a conversations.history / replies page holds at most
URL_USES = 5  # posts a response URL takes
SECTION_TEXT = 3_000
BUTTON_VALUE = 2_000


def _invalid_blocks(body: dict[str, Any]) -> str | None:
    """What breaks Block Kit's limits in a message's blocks (None: nothing)."""
    blocks = _blocks(body)
    if len(blocks) > MESSAGE_BLOCKS:
        return f"no more than {MESSAGE_BLOCKS} items allowed [json-pointer:/blocks]"
    for index, block in enumerate(blocks):
        text = block.get("text") if block.get("type") == "section" else None
        if isinstance(text, dict) and len(text.get("text", "")) > SECTION_TEXT:
            return f"must be less than {SECTION_TEXT + 1} characters [json-pointer:/blocks/{index}/text]"
        for element in block.get("elements", []) or []:
            if isinstance(element, dict) and len(str(element.get("value", ""))) > BUTTON_VALUE:
                return f"must be less than {BUTTON_VALUE + 1} characters [json-pointer:/blocks/{index}]"
    return None


def _files(body: dict[str, Any]) -> list[dict[str, Any]]:
    files = body.get("files") or []
    return list(json.loads(files) if isinstance(files, str) else files)
