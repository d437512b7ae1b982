"""`baton worker`'s HTTP: `/healthz` and `/readyz` only, on BATON_WEB_PORT only when that is set
for it (its default 8080 is `baton run`'s), with the one server's code (bot/http.py)."""

from __future__ import annotations

import asyncio
import logging
import socket

import httpx
import pytest

from bot.health import Health
from bot.worker import serve_health
from core.config import Settings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _taken(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


async def test_a_worker_serves_health_only_and_only_on_a_port_set_for_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stopping = asyncio.Event()
    health = Health(ping=lambda: None, stopping=stopping)
    health.started = True
    caplog.set_level(logging.INFO, logger="baton.http")
    async with serve_health(health, Settings(_env_file=None), stopping=stopping):  # type: ignore[call-arg]
        pass
    assert not [r for r in caplog.records if getattr(r, "action", "") in ("http_started", "web_failed")]
    port = _free_port()
    settings = Settings(_env_file=None, web_port=port)  # type: ignore[call-arg]
    async with serve_health(health, settings, stopping=stopping), \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        assert (await client.get("/readyz")).status_code == 200
        assert (await client.get("/r/anything")).status_code == 404  # no pages in a worker
        stopping.set()
        assert (await client.get("/readyz")).status_code == 503
        assert (await client.get("/healthz")).status_code == 200
    assert [r.port for r in caplog.records if getattr(r, "action", "") == "http_started"] == [port]  # type: ignore[attr-defined]
    assert not _taken(port)
