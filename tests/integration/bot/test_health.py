"""/healthz and /readyz of the app as `baton run` assembles it (`build_baton`, `running()`, the
one HTTP server: `bot.serve.http_server`), on a real PostgreSQL database that stops accepting
connections and comes back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from bot.app import Baton, build_baton
from bot.http import bind
from bot.serve import http_server
from core.config import Settings

pytestmark = pytest.mark.postgres


@pytest.fixture
async def served(postgres_url: str, tmp_path: Path) -> AsyncIterator[tuple[Baton, httpx.AsyncClient]]:
    (tmp_path / "workflows").mkdir()
    settings = Settings(_env_file=None, database_url=postgres_url,  # type: ignore[call-arg]
                        workflow_dirs=[tmp_path / "workflows"], data_dir=tmp_path / "data", tool_modules=[],
                        web_port=0)
    baton = build_baton(settings)
    try:
        async with (
            baton.running(handle_signals=False, grace=1.0),
            http_server(baton, settings, bind("127.0.0.1", 0)) as port,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client,
        ):
            yield baton, client
    finally:
        baton.close()


def _allow_connections(admin_url: str, database: str, allow: bool) -> None:
    """Let the database take connections again, or refuse new ones and end the open ones."""
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'ALTER DATABASE "{database}" WITH ALLOW_CONNECTIONS {str(allow).lower()}'))
            if not allow:
                conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                     "WHERE datname = :db AND pid <> pg_backend_pid()"), {"db": database})
    finally:
        admin.dispose()


async def test_ready_while_the_database_answers_and_not_while_it_refuses(
    served: tuple[Baton, httpx.AsyncClient], postgres_server: str, postgres_url: str
) -> None:
    _, client = served
    database = sa.engine.make_url(postgres_url).database
    assert database is not None

    ready = await client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ready", "checks": {
        "serving": {"ok": True, "detail": "started"}, "database": {"ok": True, "detail": "reachable"}}}

    _allow_connections(postgres_server, database, allow=False)
    try:
        down = await client.get("/readyz")
        assert down.status_code == 503, down.text
        assert down.json()["status"] == "not ready"
        assert down.json()["checks"]["database"]["ok"] is False
        assert down.json()["checks"]["serving"]["ok"] is True
        assert (await client.get("/healthz")).status_code == 200  # alive: restarting would not help
    finally:
        _allow_connections(postgres_server, database, allow=True)
    assert (await client.get("/readyz")).status_code == 200  # the pool reconnects


async def test_a_stopping_process_and_a_platform_not_connected_are_not_ready(
    served: tuple[Baton, httpx.AsyncClient],
) -> None:
    baton, client = served
    baton.health.expect(["discord"])
    waiting = await client.get("/readyz")
    assert waiting.status_code == 503
    assert waiting.json()["checks"]["discord"] == {"ok": False, "detail": "not connected yet"}

    up = {"now": True}

    async def connected() -> bool:
        return up["now"]

    baton.watch_platform("discord", connected)
    assert (await client.get("/readyz")).status_code == 200
    up["now"] = False
    down = (await client.get("/readyz")).json()["checks"]["discord"]
    assert down == {"ok": False, "detail": "disconnected"}
    up["now"] = True

    baton.request_stop()  # the first SIGTERM: unready at once, alive until the process ends
    stopping = await client.get("/readyz")
    assert stopping.status_code == 503
    assert stopping.json()["checks"]["serving"]["ok"] is False
    assert (await client.get("/healthz")).json() == {"status": "alive"}
    other = await client.get("/slack/events")  # any other path: the process takes no more input
    assert other.status_code == 503 and other.headers["retry-after"] == "5", other.text


async def test_baton_worker_serves_its_health_and_is_unready_once_stopping(
    postgres_url: str, tmp_path: Path
) -> None:
    """`serve_worker` (what `baton worker` runs) on BATON_WEB_PORT: ready while it fetches
    jobs, alive and unready after the first SIGTERM, gone once it has stopped."""
    import asyncio
    import os
    import signal
    import socket

    from bot.worker import serve_worker

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    (tmp_path / "workflows").mkdir()
    settings = Settings(_env_file=None, database_url=postgres_url,  # type: ignore[call-arg]
                        workflow_dirs=[tmp_path / "workflows"], data_dir=tmp_path / "data", tool_modules=[],
                        executor="procrastinate", shutdown_grace=1.0, worker_heartbeat_seconds=0.3,
                        web_port=port)
    ready = asyncio.Event()
    worker = asyncio.create_task(serve_worker(settings, name="w-health", on_ready=ready.set))
    try:
        await asyncio.wait_for(ready.wait(), 60)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            answer = await client.get("/readyz")
            assert answer.status_code == 200, answer.text
            assert set(answer.json()["checks"]) == {"serving", "database"}
            os.kill(os.getpid(), signal.SIGTERM)  # handled by the worker's shutdown path on this loop
            stopping = await client.get("/readyz")  # answered while it finishes: alive, unready
            assert stopping.status_code == 503, stopping.text
            assert stopping.json()["checks"]["serving"]["ok"] is False
            await asyncio.wait_for(worker, 60)
            try:
                await client.get("/healthz")
            except httpx.ConnectError:
                pass
            else:
                raise AssertionError("the health endpoint outlived the worker")
    finally:
        if not worker.done():
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)
