"""The durable outbox: what writing a reply's row costs a state change, and how long a reply
takes from the state change to the platform call.

    python -m bench.baton_outbox --dir D [--n 1000] [--runs 100] [--db sqlite|postgres|both]

overhead  `n` runs brought to rest three ways, interleaved run by run on one database: the
          single-call CAS the engine made before the outbox (`store.runs.transition`), the same CAS
          in a unit of work, and the unit with its outbox row (`tell_rest`, what the engine does
          now). Medians per state change; the ratio of the last to the first is the overhead.
latency   `runs` runs of a one-step workflow through the real Engine and Handler (SQLite): from
          the row's `created_at` (the state change's commit) to the platform's call for the final
          edit of the progress message and for the final reply. `recording`: a platform whose
          sender records the call; `slack`: the real Slack sender and slack_sdk client against a
          local fake of the Web API.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.baton_latency import POSTGRES_ADMIN
from bench.protocol import emit
from bot import testing
from core.commands.messages import Reply
from core.engine.events import tell_rest
from core.engine.tools import ToolRegistry
from core.store.port import NewRun, Transition
from core.store.records import RunStatus
from core.store.repository import SqlStore

HELLO = """
name: hello
nodes:
  - id: say
    bash: printf hi
    replay: pure
"""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextmanager
def _database(db: str, directory: Path) -> Iterator[str]:
    if db == "sqlite":
        yield f"sqlite:///{directory / 'outbox.db'}"
        return
    name = f"baton_bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(POSTGRES_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield sa.engine.make_url(POSTGRES_ADMIN).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _running(store: SqlStore, n: int) -> list[str]:
    digest = store.blobs.put_blob(b"{}")
    with store.transaction() as tx:
        runs = [tx.create_run(NewRun(workflow="hello", platform="slack", conversation="C1", thread=None,
                                     requester="slack:U1", args_digest=digest, status=RunStatus.RUNNING,
                                     lease_owner="bench", lease_seconds=600)) for _ in range(n)]  # fmt: skip
    return [r.id for r in runs]


def overhead(url: str, n: int) -> dict[str, Any]:
    store = SqlStore(url)
    store.migrate()
    _running(store, 50)  # warm: statements compiled, pages cached

    def single(run_id: str) -> None:
        store.runs.transition(Transition(run_id, RunStatus.COMPLETED, actor="baton", reason=None,
                                         expected_version=1,
                                         allowed_from=[RunStatus.RUNNING]))  # fmt: skip

    def unit(run_id: str) -> None:
        with store.transaction() as tx:
            tx.transition(Transition(run_id, RunStatus.COMPLETED, actor="baton", reason=None,
                                     expected_version=1,
                                     allowed_from=[RunStatus.RUNNING]))  # fmt: skip

    def with_row(run_id: str) -> None:
        with store.transaction() as tx:
            tx.transition(Transition(run_id, RunStatus.COMPLETED, actor="baton", reason=None,
                                     expected_version=1,
                                     allowed_from=[RunStatus.RUNNING]))  # fmt: skip
            tell_rest(tx, run_id, RunStatus.COMPLETED, reason=None)

    ways: dict[str, Callable[[str], None]] = {
        "cas": single, "cas_in_unit": unit, "cas_with_outbox_row": with_row,
    }
    times: dict[str, list[float]] = {k: [] for k in ways}
    runs = {k: _running(store, n) for k in ways}
    for i in range(n):
        for name, way in ways.items():
            began = time.perf_counter()
            way(runs[name][i])
            times[name].append((time.perf_counter() - began) * 1e6)
    assert len(store.outbox.undelivered(limit=n + 1)) == n
    store.close()
    out: dict[str, Any] = {
        name: {"median_us": statistics.median(v), "p99_us": _pct(v, 0.99)} for name, v in times.items()
    }
    out["ratio_row_vs_cas"] = out["cas_with_outbox_row"]["median_us"] / out["cas"]["median_us"]
    out["ratio_row_vs_unit"] = out["cas_with_outbox_row"]["median_us"] / out["cas_in_unit"]["median_us"]
    out["state_changes"] = n
    return out


class _FakeSlack:
    """chat.postMessage / chat.update answered at once; when each arrived."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, str, dict[str, Any]]] = []
        self._ts = 0
        self.url = ""
        self._runner: Any = None

    async def start(self) -> None:
        from aiohttp import web

        async def api(request: web.Request) -> web.Response:
            method = request.match_info["method"]
            json_body = request.content_type == "application/json"
            body = await request.json() if json_body else dict(await request.post())
            self.arrivals.append((time.time(), method, body))
            self._ts += 1
            ts = body.get("ts") or f"1700000000.{self._ts:06d}"
            return web.json_response({"ok": True, "ts": ts, "channel": body.get("channel")})

        app = web.Application()
        app.router.add_post("/api/{method}", api)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/api/"

    async def stop(self) -> None:
        await self._runner.cleanup()


async def latency(url: str, runs: int, directory: Path, platform: str) -> dict[str, Any]:
    store = SqlStore(url)
    store.migrate()
    workflows = directory / f"workflows-{platform}"
    workflows.mkdir()
    (workflows / "hello.yaml").write_text(textwrap.dedent(HELLO))
    baton = testing.build(directory, store=store, environ={}, tools=ToolRegistry(), workflow_dirs=[workflows],
                          data_dir=directory / f"data-{platform}", replica_id="bench")  # `baton run`'s wiring
    engine, handler = baton.engine, baton.handler
    calls: list[tuple[float, Reply]] = []
    fake: _FakeSlack | None = None
    if platform == "slack":
        from slack_sdk.web.async_client import AsyncWebClient

        from adapters.slack.sender import SlackSender

        fake = _FakeSlack()
        await fake.start()
        sender = SlackSender(AsyncWebClient(token="xoxb-bench", base_url=fake.url), handler, threads=False)
    else:

        async def outbox(reply: Reply) -> None:
            calls.append((time.time(), reply))

        handler.register_outbox("slack", outbox)
    await engine.start()
    edit: list[float] = []
    final: list[float] = []
    for _ in range(runs):
        run = await engine.start_run(workflow="hello", args={}, platform="slack", conversation="C1",
                                     thread=None, requester="slack:U1")  # fmt: skip
        await engine.wait(run.id, timeout=60)
        await handler.drain()
        if fake is not None:
            await sender.delivery.idle()
        [row] = store.outbox.deliveries(run.id)
        changed = row.created_at
        if fake is not None:
            mine = [(at, m, b) for at, m, b in fake.arrivals if run.id in str(b.get("text", ""))]
            edited = next(at for at, m, b in mine if m == "chat.update" and "completed" in str(b.get("text")))
            posted = next(at for at, m, b in mine
                          if m == "chat.postMessage" and "completed in" in str(b.get("text")))
            edit.append((edited - changed) * 1000)
            final.append((posted - changed) * 1000)
        else:
            mine_r = [(at, r) for at, r in calls if r.run_id == run.id]
            edit.append((next(at for at, r in mine_r if r.kind == "progress" and r.run_status == "completed")
                         - changed) * 1000)
            final.append((next(at for at, r in mine_r if r.kind != "progress") - changed) * 1000)
    await engine.stop(grace=2)
    await handler.drain()
    if fake is not None:
        await fake.stop()
    store.close()
    return {
        "runs": runs,
        "final_edit": {"p50_ms": _pct(edit, 0.5), "p99_ms": _pct(edit, 0.99)},
        "final_reply": {"p50_ms": _pct(final, 0.5), "p99_ms": _pct(final, 0.99)},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    opts = parser.parse_args()
    root: Path = opts.dir
    result: dict[str, Any] = {"overhead": {}, "latency": {}}
    for db in (["sqlite", "postgres"] if opts.db == "both" else [opts.db]):
        place = root / db
        place.mkdir(parents=True)
        with _database(db, place) as url:
            result["overhead"][db] = overhead(url, opts.n)
    for platform in ("recording", "slack"):
        place = root / f"latency-{platform}"
        place.mkdir(parents=True)
        result["latency"][platform] = asyncio.run(
            latency(f"sqlite:///{place / 'b.db'}", opts.runs, place, platform)
        )
    emit(result)


if __name__ == "__main__":
    main()
