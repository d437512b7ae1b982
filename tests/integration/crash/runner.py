"""Runs a real engine in a child process, for the crash and recovery-race tests.

    python -m tests.integration.crash.runner start   <db-url> <root> <workflow> <args-json>
    python -m tests.integration.crash.runner recover <db-url> <root> <run-id>
    python -m tests.integration.crash.runner race    <db-url> <root> <replica-id>

`start` prints the run id and keeps executing until the test kills it (kill -9).
`recover` starts an engine of the same replica (which takes over runs of dead local
processes at once), waits for the run to rest and prints
`{"status": ..., "recovered_in": seconds}`.
`race` prints `ready`, waits for `go` on stdin, makes one recovery pass and prints
`{"won": [run ids]}` (then lets a won run finish).

Tools (`TOOLS`): `mark` (pure, inline) appends its node id to `<dir>/marks`; `hold_pure` and
`hold_unsafe` (inline) write `<node> <pid>` into the FIFO `sig` and block until `<dir>/release`
exists. `CRASH_GROUP_COMMIT` (seconds) sets the engine's group-commit window.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

from bot import testing
from core.engine.engine import Engine
from core.engine.tools import ToolRegistry

REPLICA = "crash"


def _tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool("mark", replay="pure", inline=True)
    def mark(dir: str, node: str) -> str:
        with open(Path(dir) / "marks", "a") as f:
            f.write(node + "\n")
        return node

    def hold(dir: str, sig: str, node: str) -> str:
        if not (Path(dir) / "release").exists():
            with open(sig, "w") as f:
                f.write(f"{node} {os.getpid()}\n")
            time.sleep(60)  # killed here (the test sends kill -9)
        return node

    tools.tool("hold_pure", replay="pure", inline=True)(hold)
    tools.tool("hold_unsafe", replay="unsafe", inline=True)(hold)
    return tools


def build(url: str, root: Path, replica: str, lease_seconds: float = 15.0) -> Engine:
    window = os.environ.get("CRASH_GROUP_COMMIT")
    baton = testing.build(root, database_url=url, tools=_tools(), replica_id=replica,
                          lease_seconds=lease_seconds,
                          group_commit=float(window) if window is not None else None)  # fmt: skip
    return baton.engine


def say(value: object) -> None:
    print(value if isinstance(value, str) else json.dumps(value), flush=True)


async def start(url: str, root: Path, workflow: str, args: str) -> None:
    engine = build(url, root, REPLICA)
    await engine.start()
    run = await engine.start_run(
        workflow=workflow,
        args=json.loads(args),
        platform="console",
        conversation="crash",
        thread=None,
        requester="console:crash",
    )
    say(run.id)
    await engine.wait(run.id)
    await engine.stop()


async def recover(url: str, root: Path, run_id: str) -> None:
    engine = build(url, root, REPLICA)
    began = time.monotonic()
    await engine.start()  # dead local owners are taken over here, before start() returns
    taken = time.monotonic() - began
    run = await engine.wait(run_id, timeout=20)
    say({"status": run.status.value, "recovered_in": round(taken, 4)})
    await engine.stop()


async def race(url: str, root: Path, replica: str) -> None:
    engine = build(url, root, replica)
    say("ready")
    line = await asyncio.to_thread(sys.stdin.readline)
    if line.strip() != "go":
        raise SystemExit(f"expected `go`, got {line!r}")
    won = await engine.recover_now()
    say({"won": won})
    for run_id in won:
        await engine.wait(run_id, timeout=20)
    await engine.stop()


def main(argv: list[str]) -> None:
    mode, url, root = argv[0], argv[1], Path(argv[2])
    if mode == "start":
        asyncio.run(start(url, root, argv[3], argv[4]))
    elif mode == "recover":
        asyncio.run(recover(url, root, argv[3]))
    elif mode == "race":
        asyncio.run(race(url, root, argv[3]))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1:])
