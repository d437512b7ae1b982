"""`get_run` round trips through MCP, with the official SDK's client, over both transports.

    python -m bench.mcp_roundtrips --samples 200 --dir DIR

stdio: the client spawns `baton mcp` (as an agent's MCP host does) and calls `get_run` on a run
paused at a gate, `--samples` times, one call at a time. HTTP: `baton run` serves `/mcp` beside
the run pages on loopback; the client sends a bearer token and does the same. Each figure is
call sent -> result parsed by the client: the protocol, the principal's authorization, the
`status` command through the handler, the store reads and the JSON, as an agent sees them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from adapters.mcp.identity import token_hash
from bench.protocol import ROOT, emit

GATED = """\
name: gated
nodes:
  - id: prepare
    bash: echo prepared
    replay: pure
  - id: review
    depends_on: [prepare]
    approval: "Ship it?"
"""
TOKEN = "bench-token-9c1e"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_")}
    env.update(
        BATON_DATABASE_URL=f"sqlite:///{home / 'baton.db'}", BATON_WORKFLOW_DIRS=str(home / "workflows"),
        BATON_DATA_DIR=str(home / ".baton"), BATON_LOG_LEVEL="WARNING", BATON_WEB_PORT="off",
        BATON_MCP_PRINCIPAL="mcp:bench", PYTHONPATH=str(ROOT),
    )
    return {**env, **extra}


def _percentiles(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {"p50_ms": statistics.median(ordered), "p99_ms": p99, "max_ms": ordered[-1],
            "samples": len(ordered)}


async def _measure(session: ClientSession, samples: int) -> dict[str, float]:
    started = await session.call_tool("run_workflow", {"workflow": "gated"})
    run = (started.structured_content or {})["run"]
    await session.call_tool("wait_run", {"run": run, "timeout_s": 60})
    for _ in range(5):  # warm up: first imports, statement caches
        await session.call_tool("get_run", {"run": run})
    times: list[float] = []
    for _ in range(samples):
        began = time.perf_counter()
        result = await session.call_tool("get_run", {"run": run})
        times.append((time.perf_counter() - began) * 1000)
        if result.is_error or (result.structured_content or {}).get("attention") != "gate":
            raise RuntimeError(f"get_run answered {result}")
    return _percentiles(times)


async def stdio(home: Path, samples: int) -> dict[str, float]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "bot.main", "mcp"], env=_env(home),
                                   cwd=home)
    with (home / "stdio.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await _measure(session, samples)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _until(ready: Callable[[], Awaitable[bool]], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not await ready():
        if time.monotonic() > deadline:
            raise RuntimeError("`baton run` did not serve /mcp in time")
        await asyncio.sleep(0.1)


async def http(home: Path, samples: int) -> dict[str, float]:
    port = _free_port()
    env = _env(home, BATON_WEB_PORT=str(port), BATON_MCP_TOKENS=json.dumps({token_hash(TOKEN): "bench"}))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.main", "run", cwd=home, env=env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL, stderr=(home / "http.log").open("w"), start_new_session=True)
    url = f"http://127.0.0.1:{port}/mcp"

    async def ready() -> bool:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return False
        writer.close()
        return True

    try:
        await _until(ready, 60)
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as client,
            streamable_http_client(url, http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await _measure(session, samples)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        await proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--dir", type=Path, required=True)
    opts = parser.parse_args()
    results: dict[str, Any] = {}
    for name, measure in (("stdio", stdio), ("http", http)):
        home = opts.dir / name
        (home / "workflows").mkdir(parents=True)
        (home / "workflows" / "gated.yaml").write_text(GATED)
        results[name] = asyncio.run(measure(home, opts.samples))
    emit(results)


if __name__ == "__main__":
    main()
