"""Liveness and readiness of a serving process, for systemd, Kubernetes and load balancers.

    health = Health(ping=store.ping)          # built with the process (bot/app.py, bot/worker.py)
    health.expect(["slack"])                  # the platforms this process must be connected to
    health.watch("slack", probe)              # the adapter, once connected: `await probe()` -> bool
    async with serve_health(health, settings):  # GET /healthz, /readyz on BATON_HEALTH_PORT
        ...

`/healthz` answers 200 while the process's event loop does (a wedged loop answers nothing,
and the prober's timeout fails it). `/readyz` answers 200 only when every check passes and
503 otherwise, with the checks as JSON either way:

- `serving`: the engine (or the worker) is started and the process is not stopping;
- `database`: the store answers a trivial query within `PING_TIMEOUT` seconds;
- one per expected platform (`slack`, `discord`): its adapter is connected.

`baton health` (bot/main.py) asks a running process's `/readyz` (or `/healthz` with
`--live`) and exits 0 or 1: an exec probe for those who prefer one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.config import Settings
from core.errors import ConfigurationError

if TYPE_CHECKING:  # aiohttp is imported only when the endpoint is served
    from aiohttp import web

log = logging.getLogger("baton.health")

PING_TIMEOUT = 2.0  # seconds the database gets to answer a readiness check
PROBE_TIMEOUT = 2.0  # seconds a platform's probe gets
Probe = Callable[[], Awaitable[bool]]


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str


class Health:
    """What `/readyz` checks. Adapters call `watch` (through `bot.app.Baton`) once connected."""

    def __init__(self, ping: Callable[[], None], *, stopping: asyncio.Event | None = None) -> None:
        self._ping = ping
        self._stopping = stopping
        self._expected: list[str] = []
        self._probes: dict[str, Probe] = {}
        self.started = False  # set by the process once its engine (or worker) runs

    @property
    def serving(self) -> bool:
        """Started and not stopping: a stopping process is unready at once, so a load balancer
        stops sending it work while in-flight steps get their grace."""
        return self.started and not (self._stopping is not None and self._stopping.is_set())

    def expect(self, platforms: Iterable[str]) -> None:
        self._expected = list(dict.fromkeys(platforms))

    def watch(self, platform: str, probe: Probe) -> None:
        self._probes[platform] = probe

    def forget(self, platform: str) -> None:
        self._probes.pop(platform, None)

    async def checks(self) -> dict[str, Check]:
        out = {"serving": Check(self.serving, "started" if self.serving else "not started, or stopping")}
        out["database"] = await self._database()
        for name in self._expected:
            out[name] = await self._platform(name)
        return out

    async def _database(self) -> Check:
        try:
            await asyncio.wait_for(asyncio.to_thread(self._ping), PING_TIMEOUT)
        except TimeoutError:
            return Check(False, f"no answer within {PING_TIMEOUT:g}s")
        except Exception as exc:  # any driver error: unreachable, refused, closed
            return Check(False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return Check(True, "reachable")

    async def _platform(self, name: str) -> Check:
        probe = self._probes.get(name)
        if probe is None:
            return Check(False, "not connected yet")
        try:
            up = await asyncio.wait_for(probe(), PROBE_TIMEOUT)
        except Exception as exc:
            return Check(False, f"{type(exc).__name__}: {exc}")
        return Check(up, "connected" if up else "disconnected")

    async def ready(self) -> tuple[bool, dict[str, Check]]:
        checks = await self.checks()
        return all(c.ok for c in checks.values()), checks


def health_app(health: Health) -> web.Application:
    from aiohttp import web

    async def healthz(_request: web.Request) -> web.Response:
        return web.json_response({"status": "alive"})

    async def readyz(_request: web.Request) -> web.Response:
        ok, checks = await health.ready()
        body = {"status": "ready" if ok else "not ready",
                "checks": {name: {"ok": c.ok, "detail": c.detail} for name, c in checks.items()}}
        return web.json_response(body, status=200 if ok else 503, dumps=json.dumps)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


@contextlib.asynccontextmanager
async def serve_health(health: Health, settings: Settings, *, port: int | None = None) -> AsyncIterator[int]:
    """Serve `/healthz` and `/readyz` on BATON_HEALTH_HOST:BATON_HEALTH_PORT while inside; yields
    the bound port (`port=0` binds a free one), or 0 when the endpoint is off."""
    port = settings.health_port if port is None else port
    if port is None:
        yield 0
        return
    from aiohttp import web

    runner = web.AppRunner(health_app(health), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, settings.health_host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise ConfigurationError(
            f"BATON_HEALTH_PORT: {settings.health_host}:{port} is not free ({exc.strerror or exc})",
            hint="Set BATON_HEALTH_PORT to a free port, or unset it to serve no health endpoint.",
        ) from exc
    bound = next((int(a[1]) for a in runner.addresses if isinstance(a, tuple)), port)
    log.info("health endpoint on %s:%d (/healthz, /readyz)", settings.health_host, bound,
             extra={"action": "health_started", "port": bound})
    try:
        yield bound
    finally:
        await runner.cleanup()
