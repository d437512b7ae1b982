"""The process's one HTTP server: one Starlette app, one uvicorn on the process's own event loop,
one port (BATON_WEB_HOST:BATON_WEB_PORT), where each part that is on mounts its routes.

    sock = listen(settings)                                    # first: links may point at it
    async with serving([health, slack, mcp, pages], sock, stopping=baton.stopping) as port:
        ...                                                    # until the process stops

`baton run` mounts `/healthz` and `/readyz` (bot/health.py), Slack's `/slack/events` in HTTP
mode (adapters/slack), `/mcp` when BATON_MCP_TOKENS is set (adapters/mcp) and the run pages
(adapters/web, last: its 404 page answers what nothing else does); `baton worker` mounts health
only. The composition root (bot/serve.py, bot/worker.py) picks the parts; the parts never see
each other.

Each part's `running()` is entered before the server answers and left as soon as `stopping`
is set; from then on every request but health's is answered 503 (the process takes no more
input, Slack retries elsewhere) while `/readyz` answers 503 (`serving` is false) and `/healthz`
200, until the `async with` ends. The process's own signal handling stays in charge
(`bot.shutdown`): uvicorn is told not to install its own. Starlette and uvicorn are imported
only when something is served.

No request body is read past `max_body` (BATON_HTTP_MAX_BODY_BYTES): one that says it is
longer is answered 413 before a byte of it is read, and one sent without a length (chunked)
is cut off at the limit and answered 413. Bolt reads a body whole before it can check
Slack's signature, so without this anyone who can reach `/slack/events` could make the
process hold gigabytes (400 MB sent: `baton run` grew by 1.5 GB).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Collection, Generator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import TYPE_CHECKING, Protocol

from core.config import Settings

if TYPE_CHECKING:
    from starlette.routing import BaseRoute
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("baton.http")
GRACE = 2  # seconds open connections get when the server stops
MAX_BODY = 4 * 1024 * 1024  # bytes of a request body read at most (BATON_HTTP_MAX_BODY_BYTES)


class Mounted(Protocol):
    """A part served by the one server: its routes, and what lives while they are served."""

    @property
    def routes(self) -> list[BaseRoute]: ...
    def running(self) -> AbstractAsyncContextManager[None]: ...


class _Stopping:
    """ASGI middleware: once the process is stopping, 503 for every path but `always`'s."""

    def __init__(self, app: ASGIApp, *, stopping: asyncio.Event, always: Collection[str]) -> None:
        self.app, self.stopping, self.always = app, stopping, frozenset(always)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.stopping.is_set() and scope["path"] not in self.always:
            from starlette.responses import PlainTextResponse

            answer = PlainTextResponse("Baton is stopping; try again shortly.", status_code=503,
                                       headers={"Retry-After": "5", "Connection": "close"})
            await answer(scope, receive, send)
            return
        await self.app(scope, receive, send)


class _BodyTooLarge(Exception):
    """Raised from `receive` once a request's body is over the limit."""


class _Bounded:
    """ASGI middleware: no request body is read past `limit` bytes; such a request gets 413."""

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, receive, send)
            return
        received = 0
        started = over = answered = False

        async def bounded() -> Message:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    over = True
                    raise _BodyTooLarge  # the app stops reading; its error answer becomes ours
            return message

        async def sending(message: Message) -> None:
            nonlocal started, answered
            if over and not started:  # (Starlette answers the raise with a 500 first)
                if not answered:
                    answered = True
                    await self._refuse(scope, receive, send)
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, bounded, sending)
        except _BodyTooLarge:
            if not started and not answered:
                await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        from starlette.responses import PlainTextResponse

        answer = PlainTextResponse(f"The request body is over {self.limit:,} bytes.", status_code=413,
                                   headers={"Connection": "close"})
        await answer(scope, receive, send)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port); OSError when it is taken.

    Made with `IPPROTO_TCP` named: the connections it accepts inherit the protocol number, and
    asyncio sets TCP_NODELAY only on a socket whose `proto` says TCP. With 0 (the default),
    Nagle held a response's body until the client acknowledged its headers, and a delayed
    ACK made that ~40 ms on every request (a 10-node run page: 52 ms served, 9 ms of work)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(512)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def listen(settings: Settings) -> socket.socket | None:
    """The server's socket on BATON_WEB_HOST:BATON_WEB_PORT, bound before anything offers a
    link to it; None when BATON_WEB_PORT is off, or (logged as `action=web_failed`) taken."""
    if not settings.http_enabled:
        return None
    try:
        return bind(settings.web_host, settings.web_port)
    except OSError as exc:
        log.error("nothing served over HTTP (run pages, health, /mcp): %s:%d is not free (%s); "
                  "set BATON_WEB_PORT to a free port", settings.web_host, settings.web_port,
                  exc.strerror or exc, extra={"action": "web_failed", "port": settings.web_port})
        return None


def build_app(mounts: Sequence[Mounted], *, stopping: asyncio.Event, always: Collection[str] = (),
              max_body: int = MAX_BODY) -> ASGIApp:
    """The one app: every mount's routes, in order (the first that matches answers)."""
    from starlette.applications import Starlette

    routes = [route for mount in mounts for route in mount.routes]
    return _Bounded(_Stopping(Starlette(routes=routes), stopping=stopping, always=always), limit=max_body)


async def _lives(mounts: Sequence[Mounted], entered: asyncio.Future[None], leave: asyncio.Event) -> None:
    """Each mount's `running()`, entered and left in this one task (the MCP SDK's task group
    must be left by the task that entered it)."""
    async with AsyncExitStack() as lifetimes:
        for mount in mounts:
            await lifetimes.enter_async_context(mount.running())
        entered.set_result(None)
        await leave.wait()


@contextlib.asynccontextmanager
async def serving(mounts: Sequence[Mounted], sock: socket.socket, *, stopping: asyncio.Event,
                  always: Collection[str] = (), max_body: int = MAX_BODY) -> AsyncIterator[int]:
    """Serve `mounts` on `sock` while inside (see the module docstring); yields the bound port.
    `always`: the paths still answered once `stopping` is set (health's); `max_body`: bytes of
    a request body read at most."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Generator[None, None, None]:
            yield  # SIGTERM / SIGINT belong to the process (bot/shutdown.py)

    app = build_app(mounts, stopping=stopping, always=always, max_body=max_body)
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off", server_header=False,
                            timeout_graceful_shutdown=GRACE, proxy_headers=False)
    server = Server(config)
    port = int(sock.getsockname()[1])
    leave = asyncio.Event()
    entered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    lives = asyncio.create_task(_lives(mounts, entered, leave), name="http-parts")
    try:
        await asyncio.wait({lives, entered}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # cancelled while the parts start
        leave.set()
        lives.cancel()
        await asyncio.gather(lives, return_exceptions=True)
        sock.close()
        raise
    if not entered.done():  # a part failed to start (a refused Slack token): nothing is served
        sock.close()
        await lives
    task = asyncio.create_task(server.serve(sockets=[sock]), name="http-server")

    async def leave_at_stop() -> None:
        await stopping.wait()
        leave.set()  # the parts stop (live pages end, Slack's replies drain) while health answers

    watch = asyncio.create_task(leave_at_stop(), name="http-stopping")
    log.info("http on %s:%d", *sock.getsockname()[:2], extra={"action": "http_started", "port": port})
    try:
        yield port
    finally:
        watch.cancel()
        leave.set()
        try:
            await lives
        finally:
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await task
            sock.close()
