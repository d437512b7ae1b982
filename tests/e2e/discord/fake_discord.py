"""A local stand-in for Discord's HTTP API (aiohttp on 127.0.0.1), recording every request.

discord.py is pointed at it by `Route.BASE`, so the real client, CommandTree, views and
interaction webhooks talk HTTP to it exactly as they would to discord.com. It keeps just
enough state to answer realistically: messages (with their components, so a test can click a
button the bot posted), threads, and which interactions were acknowledged (a second
acknowledgement is refused with Discord's error 40060, as for a gateway redelivery).
Tests assert on `calls`: what Discord would have received.

It enforces Discord's limits as Discord does (400, code 50035): message content at most 2,000
UTF-16 code units, a component's `custom_id` at most 100 characters, at most 5 action rows of
at most 5 components. A message or edit sent without `allowed_mentions: {"parse": []}` (or
`{"parse": [], "users": [ids]}`, each of those users mentioned in its content: a message that
calls them) is answered, and recorded in `violations` (the fixture fails a test that leaves any).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web

T = TypeVar("T")


def _pings_only_named(body: dict[str, Any], content: str) -> bool:
    """Nothing may ping but the users the message names and allows by id (never a role, never
    @everyone, never a `parse` of users)."""
    mentions = body.get("allowed_mentions")
    if not isinstance(mentions, dict) or mentions.get("parse") != [] or set(mentions) - {"parse", "users"}:
        return False
    return all(f"<@{user}>" in content for user in mentions.get("users", []))

APP_ID = "1100000000000000001"
BOT_ID = "1100000000000000002"
GUILD_ID = "1100000000000000003"
CHANNEL_ID = "1100000000000000004"
COMMAND_ID = "1100000000000000005"
ISO = "2025-01-01T00:00:00.000000+00:00"


def user(user_id: str, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {"id": user_id, "username": name, "global_name": name, "discriminator": "0",
            "avatar": None, "bot": bot, "public_flags": 0}


BOT_USER = user(BOT_ID, "baton", bot=True)


@dataclass(frozen=True)
class Call:
    """One request discord.py made."""

    method: str
    path: str  # after /api/v10
    json: Any
    files: dict[str, bytes]
    query: dict[str, str]
    at: float  # time.monotonic()
    status: int = 200  # what the fake answered

    @property
    def content(self) -> str:
        return str(self.json.get("content") or "") if isinstance(self.json, dict) else ""

    def buttons(self) -> list[dict[str, Any]]:
        rows = (self.json.get("components") or []) if isinstance(self.json, dict) else []
        return [c for row in rows for c in row.get("components", [])]


@dataclass
class FakeDiscord:
    calls: list[Call] = field(default_factory=list)
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    channels: dict[str, dict[str, Any]] = field(default_factory=dict)
    acknowledged: set[str] = field(default_factory=set)
    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)  # token -> channel, original
    refuse_threads: bool = False  # answer thread creation as a channel without the permission
    refuse_answers: bool = False  # interaction followups/edits fail (e.g. the token expired)
    fail_answers: int = 0  # this many next interaction followups/edits fail (then they work again)
    guilds: set[str] = field(default_factory=lambda: {GUILD_ID})  # servers the bot was invited to
    bot_token: str | None = None  # set: a request with another bot token is refused (401)
    fail_modals: int = 0  # this many next modal answers (callback type 9) are refused
    violations: list[str] = field(default_factory=list)  # messages sent that could ping someone
    #: channel id -> (HTTP status, Discord code) every write in it gets: (404, 10003) a deleted
    #: thread, (403, 50013) a missing permission, (403, 50001) no access
    fail_channels: dict[str, tuple[int, int]] = field(default_factory=dict)
    max_upload: int | None = 10 * 1024 * 1024  # a larger file is refused (413): Discord's default limit
    #: seconds an interaction's token takes webhook calls (Discord: 15 minutes); then 401, 50027
    token_ttl: float = 15 * 60.0
    #: failures for the next matching requests (`fail_next`): a 429 with Retry-After, a 5xx, a
    #: dropped connection
    faults: list[Fault] = field(default_factory=list)
    #: (channel, nonce) -> the message it created: a create with `enforce_nonce` and a nonce
    #: seen before returns that message instead of posting again (Discord keeps them minutes)
    nonces: dict[tuple[str, str], str] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1200000000000000000))
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _runner: web.AppRunner | None = None
    #: (method, text contained): such requests get no answer until `release` (a slow Discord)
    _holds: list[tuple[str, str]] = field(default_factory=list)
    _released: asyncio.Event = field(default_factory=asyncio.Event)
    held: list[Call] = field(default_factory=list)  # requests left unanswered (not in `calls`)

    def hold(self, method: str, text: str) -> None:
        """Requests of `method` whose content contains `text` hang unanswered until `release`."""
        self._holds.append((method, text))
        self._released.clear()

    def release(self) -> None:
        self._holds.clear()
        self._released.set()

    def __post_init__(self) -> None:
        self.channels[CHANNEL_ID] = text_channel(CHANNEL_ID)

    def fail_next(self, method: str, path_part: str, status: int, *, times: int = 1,
                  retry_after: float = 0.0, drop: bool = False, content: str = "", code: int = 0,
                  taken: bool = False) -> None:
        """The next `times` `method` requests whose path contains `path_part` (and whose content
        contains `content`) fail: `status` as Discord answers it (429: with `Retry-After`, as
        Cloudflare relays it; 4xx: with the JSON error `code`), or with the connection closed
        unanswered (`drop`)."""
        self.faults.append(Fault(method, path_part, status, times, retry_after, drop, content, code, taken))

    def snowflake(self) -> str:
        return str(next(self._ids))

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> str:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/api/v10/{path:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        return f"http://127.0.0.1:{port}/api/v10"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # -- waiting on what was received ----------------------------------------------------------
    async def wait_for(self, found: Callable[[list[Call]], T | None], timeout: float = 10.0) -> T:
        """The first truthy `found(calls)`, re-checked on every request; TimeoutError after
        `timeout` seconds naming what was received."""
        result: list[T] = []

        def ready() -> bool:
            value = found(self.calls)
            if value:
                result.append(value)
            return bool(value)

        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(ready), timeout)
            except TimeoutError:
                seen = "\n".join(f"  {c.method} {c.path} {c.content[:80]!r}" for c in self.calls)
                raise TimeoutError(f"not received within {timeout}s; received:\n{seen}") from None
        return result[0]

    def find(self, method: str, path_part: str, text: str = "") -> list[Call]:
        return [c for c in self.calls if c.method == method and path_part in c.path and text in c.content]

    def posts(self, text: str = "") -> list[Call]:
        """Messages created anywhere (channel messages, followups, interaction responses)."""
        return [c for c in self.calls if text in c.content and (
            (c.method == "POST" and (c.path.endswith("/messages") or c.path.startswith("webhooks/")))
            or (c.method == "PATCH" and c.path.endswith("/@original"))
        )]

    # -- the API ------------------------------------------------------------------------------
    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        payload, files = await _read_body(request)
        path = request.match_info["path"]
        call = Call(request.method, path, payload, files, dict(request.query), time.monotonic())
        if any(call.method == m and text in call.content for m, text in self._holds):
            async with self._changed:
                self.held.append(call)
                self._changed.notify_all()
            await self._released.wait()
            return _json({"code": 0, "message": "503: Service Unavailable"}, status=503)
        authorization = request.headers.get("Authorization")
        wrong = self.bot_token is not None and authorization not in (None, f"Bot {self.bot_token}")
        response: web.StreamResponse | None = None
        try:
            fault = self._fault(call)
            if fault is not None and fault.drop and request.transport is not None:
                if fault.taken:  # Discord made the message; the answer is lost on the way back
                    self._answer(call, path.split("/"))
                request.transport.close()  # no answer at all: the client sees the connection drop
                response = web.Response(status=599)
                return response
            if wrong:
                response = _json({"code": 0, "message": "401: Unauthorized"}, status=401)
            elif fault is not None:
                response = fault.answer()
            else:
                response = self._injected(call, path.split("/"))
            if response is None and (invalid := self._invalid(call)) is not None:
                response = _json({"code": 50035, "message": f"Invalid Form Body: {invalid}"}, status=400)
            if response is None:
                response = self._answer(call, path.split("/"))
            return response
        finally:
            async with self._changed:
                self.calls.append(dataclasses.replace(call, status=response.status if response else 500))
                self._changed.notify_all()

    def _fault(self, call: Call) -> Fault | None:
        for fault in self.faults:
            if fault.times > 0 and fault.method == call.method and fault.path_part in call.path \
                    and fault.content in call.content:
                fault.times -= 1
                return fault
        return None

    def _injected(self, call: Call, parts: list[str]) -> web.Response | None:
        """The failure a test asked for, as Discord answers it (None: none)."""
        if self.max_upload is not None and any(len(data) > self.max_upload for data in call.files.values()):
            return _json({"code": 40005, "message": "Request entity too large"}, status=413)
        if parts[0] == "channels" and call.method in ("POST", "PATCH") and parts[1] in self.fail_channels:
            status, code = self.fail_channels[parts[1]]
            return _json({"code": code, "message": _MESSAGES.get(code, "Error")}, status=status)
        return None

    def _invalid(self, call: Call) -> str | None:
        """What breaks Discord's limits in a message the call creates or edits (None: nothing)."""
        body = call.json if isinstance(call.json, dict) else {}
        if call.path.startswith("interactions/"):  # a response: only types 4 and 7 are messages
            body = (body.get("data") or {}) if body.get("type") in (4, 7) else {}
        creates = call.method in ("POST", "PATCH") and (
            call.path.endswith("/messages") or call.path.startswith(("webhooks/", "interactions/"))
            or "/messages/" in call.path)
        if not creates or not isinstance(body, dict):
            return None
        content = str(body.get("content") or "")
        if utf16(content) > CONTENT_LIMIT:
            return f"content: Must be {CONTENT_LIMIT} or fewer in length ({utf16(content)})"
        rows = body.get("components") or []
        if len(rows) > 5 or any(len(row.get("components", [])) > 5 for row in rows):
            return "components: at most 5 rows of 5"
        if any(len(c.get("custom_id", "")) > 100 for row in rows for c in row.get("components", [])):
            return "custom_id: Must be 100 or fewer in length"
        if ("content" in body or "components" in body) and not _pings_only_named(body, content):
            mentions = body.get("allowed_mentions")
            self.violations.append(f"{call.method} {call.path}: allowed_mentions {mentions}")
        return None

    def _answer(self, call: Call, parts: list[str]) -> web.StreamResponse:
        m, p = call.method, parts
        if m == "GET" and p == ["users", "@me"]:
            return _json(BOT_USER)
        if m == "GET" and p == ["oauth2", "applications", "@me"]:
            return _json(application())
        if m == "PUT" and p[0] == "applications" and p[-1] == "commands":
            if len(p) == 5 and p[2] == "guilds" and p[3] not in self.guilds:  # not invited there
                return _json({"code": 50001, "message": "Missing Access"}, status=403)
            refused = _invalid_commands(call.json)
            if refused:  # Discord refuses the whole sync: no command is registered
                return _json({"code": 50035, "message": f"Invalid Form Body: {refused}"}, status=400)
            return _json([{**c, "id": COMMAND_ID, "application_id": APP_ID, "version": "1"}
                                      for c in call.json])
        if m == "POST" and p == ["users", "@me", "channels"]:  # open a direct message
            channel = {"id": self.snowflake(), "type": 1, "last_message_id": None,
                       "recipients": [user(call.json["recipient_id"], "someone")]}
            self.channels[channel["id"]] = channel
            return _json(channel)
        if m == "POST" and p[0] == "interactions":
            return self._callback(p[1], p[2], call.json)
        if p[0] == "webhooks":
            return self._webhook(m, p[2], p[3:], call)
        if p[0] == "channels":
            return self._channel(m, p[1], p[2:], call)
        return _json({"code": 0, "message": "404: Not Found"}, status=404)

    def _callback(self, interaction_id: str, token: str, body: dict[str, Any]) -> web.Response:
        if body["type"] == 9 and self.fail_modals:
            self.fail_modals -= 1
            return _json({"code": 50035, "message": "Invalid Form Body"}, status=400)
        if interaction_id in self.acknowledged:
            return _json(
                {"code": 40060, "message": "Interaction has already been acknowledged."}, status=400)
        self.acknowledged.add(interaction_id)
        place = self.tokens.setdefault(token, {"channel": CHANNEL_ID, "original": None})
        place.setdefault("at", time.monotonic())
        response: dict[str, Any] = {"type": body["type"]}
        interaction: dict[str, Any] = {"id": interaction_id, "type": 2}
        if body["type"] in (4, 5):  # a message (or its "thinking…" placeholder) is the response
            data = body.get("data") or {}
            message = self._create(place["channel"], {**data, "content": data.get("content", "")},
                                   interaction_flags=data.get("flags", 0))
            place["original"] = message["id"]
            response["message"] = message
            interaction.update(response_message_id=message["id"], response_message_loading=body["type"] == 5,
                               response_message_ephemeral=bool(data.get("flags", 0) & 64))
        return _json({"interaction": interaction, "resource": response})

    def _webhook(self, method: str, token: str, rest: list[str], call: Call) -> web.Response:
        place = self.tokens.setdefault(token, {"channel": CHANNEL_ID, "original": None})
        if time.monotonic() - place.setdefault("at", time.monotonic()) > self.token_ttl:
            return _json({"code": 50027, "message": "Invalid Webhook Token"}, status=401)
        if (self.refuse_answers or self.fail_answers) and method in ("POST", "PATCH"):
            self.fail_answers = max(0, self.fail_answers - 1)
            return _json({"code": 10015, "message": "Unknown Webhook"}, status=404)
        if method == "POST" and not rest:
            return _json(self._create(place["channel"], call.json or {}))
        target = place["original"] if rest[-1] == "@original" else rest[-1]
        if method == "DELETE":
            self.messages.pop(str(target), None)
            return web.Response(status=204)
        return _json(self._edit(str(target), call.json or {}))

    def _channel(self, method: str, channel_id: str, rest: list[str], call: Call) -> web.Response:
        if method == "GET" and not rest:
            channel = self.channels.get(channel_id)
            return _json(channel) if channel else _json(
                {"code": 10003, "message": "Unknown Channel"}, status=404)
        if method == "POST" and rest == ["messages"]:
            body = call.json or {}
            nonce = body.get("nonce")
            if nonce is not None and body.get("enforce_nonce"):  # a repeat: the first message again
                seen = self.nonces.get((channel_id, str(nonce)))
                if seen is not None and seen in self.messages:
                    return _json(self.messages[seen])
            message = self._create(channel_id, body)
            if nonce is not None:
                message["nonce"] = str(nonce)
                self.nonces[(channel_id, str(nonce))] = message["id"]
            return _json(message)
        if method == "POST" and len(rest) == 3 and rest[2] == "threads":
            if self.refuse_threads:
                return _json({"code": 50013, "message": "Missing Permissions"}, status=403)
            thread = thread_channel(self.snowflake(), channel_id, call.json["name"])
            self.channels[thread["id"]] = thread
            return _json(thread, status=201)
        if method == "PATCH" and len(rest) == 2:
            if rest[1] not in self.messages:  # deleted (or never posted)
                return _json({"code": 10008, "message": "Unknown Message"}, status=404)
            return _json(self._edit(rest[1], call.json or {}))
        if method == "DELETE" and len(rest) == 2:
            self.messages.pop(rest[1], None)
            return web.Response(status=204)
        return _json({"code": 0, "message": "405: Method Not Allowed"}, status=405)

    def _create(self, channel_id: str, body: dict[str, Any], *, interaction_flags: int = 0) -> dict[str, Any]:
        message = {
            "id": self.snowflake(), "channel_id": channel_id, "author": BOT_USER, "type": 0,
            "content": body.get("content") or "", "timestamp": ISO, "edited_timestamp": None,
            "tts": False, "mention_everyone": False, "mentions": [], "mention_roles": [],
            "attachments": [], "embeds": [], "pinned": False,
            "components": body.get("components") or [],
            "flags": body.get("flags", interaction_flags) or 0,
        }
        if channel_id in self.channels and "guild_id" in self.channels[channel_id]:
            message["guild_id"] = self.channels[channel_id]["guild_id"]
        self.messages[message["id"]] = message
        return message

    def _edit(self, message_id: str, body: dict[str, Any]) -> dict[str, Any]:
        message = self.messages.setdefault(message_id, {**self._create(CHANNEL_ID, {}), "id": message_id})
        for key in ("content", "components"):
            if key in body:
                message[key] = body[key]
        message["edited_timestamp"] = ISO
        return message


CONTENT_LIMIT = 2_000
_MESSAGES = {10003: "Unknown Channel", 10008: "Unknown Message", 50001: "Missing Access",
             50013: "Missing Permissions"}


@dataclass
class Fault:
    """A failure for the next `times` matching requests (`FakeDiscord.fail_next`)."""

    method: str
    path_part: str
    status: int
    times: int
    retry_after: float = 0.0
    drop: bool = False
    content: str = ""
    code: int = 0
    taken: bool = False  # with `drop`: the request took effect before the connection dropped

    def answer(self) -> web.Response:
        if self.status == 429:  # as Discord answers through Cloudflare (discord.py checks `Via`)
            body = {"message": "You are being rate limited.", "retry_after": self.retry_after,
                    "global": False}
            return web.Response(body=json.dumps(body).encode(), status=429, headers={
                "Content-Type": "application/json", "Via": "1.1 google",
                "Retry-After": str(max(1, round(self.retry_after))), "X-RateLimit-Scope": "user"})
        if self.status < 500:
            error = {"code": self.code, "message": _MESSAGES.get(self.code, "Error")}
            return _json(error, status=self.status)
        return web.Response(text=f"{self.status}: gateway trouble", status=self.status,
                            headers={"Content-Type": "text/plain"})


def utf16(text: str) -> int:
    """Length as Discord counts it: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def _json(value: Any, status: int = 200) -> web.Response:
    """JSON with exactly the content type discord.py checks for (no charset suffix)."""
    return web.Response(body=json.dumps(value).encode(), status=status,
                        headers={"Content-Type": "application/json"})


async def _read_body(request: web.Request) -> tuple[Any, dict[str, bytes]]:
    if request.content_type.startswith("multipart/"):
        form = await request.post()
        files: dict[str, bytes] = {}
        payload: Any = None
        for name, value in form.items():
            if name == "payload_json":
                payload = json.loads(str(value))
            elif hasattr(value, "file"):
                files[getattr(value, "filename", name)] = value.file.read()
        return payload, files
    raw = await request.read()
    return (json.loads(raw) if raw else None), {}


def application() -> dict[str, Any]:
    return {"id": APP_ID, "name": "Baton", "description": "", "icon": None, "bot_public": False,
            "bot_require_code_grant": False, "owner": user("1100000000000000009", "owner"),
            "verify_key": "0" * 64, "flags": 0, "team": None}


def text_channel(channel_id: str) -> dict[str, Any]:
    return {"id": channel_id, "type": 0, "guild_id": GUILD_ID, "name": "ops", "position": 0,
            "permission_overwrites": [], "nsfw": False, "parent_id": None}


def thread_channel(thread_id: str, parent_id: str, name: str) -> dict[str, Any]:
    return {"id": thread_id, "type": 11, "guild_id": GUILD_ID, "parent_id": parent_id, "name": name,
            "owner_id": BOT_ID, "message_count": 0, "member_count": 1, "rate_limit_per_user": 0,
            "thread_metadata": {"archived": False, "auto_archive_duration": 1440,
                                "archive_timestamp": ISO, "locked": False}}


def _invalid_commands(commands: list[dict[str, Any]]) -> str:
    """What Discord's API refuses in an application-command sync (its documented limits): a
    name of 1-32 characters, a description of 1-100, at most 25 options or choices."""
    def check(item: dict[str, Any], where: str) -> str:
        name, description = str(item.get("name", "")), str(item.get("description", ""))
        if not 1 <= len(name) <= 32:
            return f"{where}.name: Must be between 1 and 32 in length"
        if "description" in item and not 1 <= len(description) <= 100:
            return f"{where}.description: Must be between 1 and 100 in length ({len(description)})"
        children = item.get("options") or []
        if len(children) > 25 or len(item.get("choices") or []) > 25:
            return f"{where}.options: Must be 25 or fewer in length"
        for i, child in enumerate(children):
            if refused := check(child, f"{where}.options.{i}"):
                return refused
        return ""

    for i, command in enumerate(commands):
        if refused := check(command, str(i)):
            return refused
    return ""
