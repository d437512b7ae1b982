"""Liveness and readiness of a serving process, for systemd, Kubernetes and load balancers.

    health = Health(ping=store.ping)          # built with the process (bot/app.py, bot/worker.py)
    health.expect(["slack"])                  # the platforms this process must be connected to
    health.watch("slack", probe)              # the adapter, once connected: `await probe()` -> bool
    HealthRoutes(health)                      # GET /healthz, /readyz on the one server (bot/http.py)

`/healthz` answers 200 while the process's event loop does (a wedged loop answers nothing,
and the prober's timeout fails it). `/readyz` answers 200 only when every check passes and
503 otherwise, with the checks as JSON either way:

- `serving`: the engine (or the worker) is started and the process is not stopping;
- `database`: the store answers a trivial query within `PING_TIMEOUT` seconds;
- one per expected platform (`slack`, `discord`): its adapter is connected.

Both are served on BATON_WEB_PORT, beside the run pages, by `baton run` and `baton worker`,
and keep answering while the process stops (bot/http.py). `baton health` (bot/main.py) asks
a running process's `/readyz` (or `/healthz` with `--live`) and exits 0 or 1: an exec probe
for those who prefer one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # starlette is imported only when the endpoint is served
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute


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


PATHS = ("/healthz", "/readyz")


class HealthRoutes:
    """`/healthz` and `/readyz` as routes of the one server (bot/http.py)."""

    def __init__(self, health: Health) -> None:
        self.health = health

    @property
    def routes(self) -> list[BaseRoute]:
        from starlette.routing import Route

        return [Route(PATHS[0], self.healthz, methods=["GET"]), Route(PATHS[1], self.readyz, methods=["GET"])]

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        yield

    async def healthz(self, _request: Request) -> Response:
        return _json({"status": "alive"})

    async def readyz(self, _request: Request) -> Response:
        ok, checks = await self.health.ready()
        body = {"status": "ready" if ok else "not ready",
                "checks": {name: {"ok": c.ok, "detail": c.detail} for name, c in checks.items()}}
        return _json(body, status=200 if ok else 503)


def _json(body: object, status: int = 200) -> Response:
    from starlette.responses import Response

    return Response(json.dumps(body), status_code=status, media_type="application/json")
