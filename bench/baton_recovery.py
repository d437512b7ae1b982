"""Baton side of the recovery benchmark (the parent is `bench.recovery`).

    python -m bench.baton_recovery --phase first      --dir D --n 1000 --kill-at 500
    python -m bench.baton_recovery --phase relaunch   --dir D --n 1000 --kill-at 500
    python -m bench.baton_recovery --phase supervised --dir D --n 1000 --kill-at 500

`first` starts a chain of N steps; step `kill_at` (0-based: 500 steps are done by then)
announces `EVENT at_kill <time> <pid>` and blocks, and the parent kills that pid with
SIGKILL. That leaves the run `running` with a lease held by a dead pid and a `started`
journal entry without a result. `relaunch` is the restarted bot: `Engine.start()` takes over
runs of dead local processes at once (no lease wait), the pure step re-runs, the other 500
are not executed again. Events carry wall-clock times so the parent can measure from its
spawn (cold relaunch) or from its kill (supervised).

`supervised` runs both phases under the real `bot.supervisor.supervise`: this process
imports the stack, the first child (restart 0) runs `first`; the parent kills that child,
the supervisor forks restart 1, which runs `relaunch` and exits 0, ending the supervisor.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

from bench.protocol import emit
from bench.rig import bench_tools, rig, step_id
from core.engine.tools import ToolRegistry


def event(name: str, *extra: object) -> None:
    print(" ".join(["EVENT", name, f"{time.time():.6f}", *map(str, extra)]), flush=True)


def chain_yaml(n: int, kill_at: int) -> str:
    lines = ["name: recover", "defaults: {replay: pure}", "nodes:"]
    for i in range(n):
        lines.append(f"  - id: {step_id(i)}")
        if i:
            lines.append(f"    depends_on: [{step_id(i - 1)}]")
        lines.append("    tool: " + ("victim" if i == kill_at else "noop"))
    return "\n".join(lines) + "\n"


def tools(phase: str) -> ToolRegistry:
    def extra(registry: ToolRegistry) -> None:
        @registry.tool("victim", replay="pure")
        async def victim() -> str:
            if phase == "first":
                event("at_kill", os.getpid())  # the pid to kill: this process, or the supervised child
                await asyncio.Event().wait()  # killed here
            event("running_again")
            return "ok"

    return bench_tools(extra)


async def first(root: Path, n: int, kill_at: int) -> None:
    async with rig(root, tools=tools("first"), replica_id="bench-recovery") as r:
        r.add_workflow("recover", chain_yaml(n, kill_at))
        await r.run("recover")  # never returns: the parent kills us at `kill_at`


async def relaunch(root: Path, n: int) -> None:
    event("process_started")
    async with rig(root, tools=tools("relaunch"), replica_id="bench-recovery") as r:
        event("engine_starting")
        engine_started = time.time()
        await r.engine.start()  # recovers the dead process's run right here
        runs = r.store.runs.recent_runs(limit=1)
        if not runs:
            raise SystemExit("no run to recover")
        run = await r.engine.wait(runs[0].id, timeout=120)
        event("completed")
        entries = r.store.steps.journal([run.id])
        emit(
            {
                "status": run.status.value,
                "completed_steps": sum(1 for e in entries if e.status.value == "completed"),
                "executions": sum(1 for e in entries if e.started_at >= engine_started),
                "n": n,
            }
        )


def supervised(root: Path, n: int, kill_at: int) -> int:
    """Both phases in children of the real supervisor; the restart counter picks the phase."""
    from bot.startup import started
    from bot.supervisor import supervise

    def child(restarts: int) -> int:
        if restarts == 0:
            asyncio.run(first(root, n, kill_at))  # killed at `kill_at`
            return 1
        asyncio.run(relaunch(root, n))
        return 0

    started(collect=True)  # as `baton run --supervise` does before it forks
    return supervise(child, name="bench-recovery")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phase", choices=["first", "relaunch", "supervised"], required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--kill-at", type=int, default=500)
    opts = parser.parse_args()
    root = Path(opts.dir)
    if opts.phase == "first":
        asyncio.run(first(root, opts.n, opts.kill_at))
    elif opts.phase == "supervised":
        sys.exit(supervised(root, opts.n, opts.kill_at))
    else:
        asyncio.run(relaunch(root, opts.n))


if __name__ == "__main__":
    main()
