"""Baton: a run of N no-op tool steps (chain or fan-out), journaled on SQLite WAL.

    python -m bench.baton_steps --shape chain --n 1000 --sync NORMAL --dir /tmp/x [--profile out.pstats]

Each step is durable the way DESIGN.md says: a `started` journal entry committed before the
tool is called, the output blob, then the `completed` entry, each its own commit. The timed
span is `start_run` until the run rests (`engine.wait`), i.e. what a user waits for; the
workflow file is loaded and prepared before (an untimed warm-up run warms the store).

By default the engine runs alone, as DBOS and Prefect are measured (libraries with no chat
layer). `--bot` keeps the conversation layer subscribed with an outbox registered, as in
`baton run`: every step's events then feed the progress message (each event marks the run;
the node table is re-read and re-rendered at most once per progress interval and once when
the run rests), which is what a chat user's run costs. The span ends when the run rests: the
final report lands inside it when the loop happens to run it first (a chain that never yields).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import time
from pathlib import Path

from bench.protocol import emit
from bench.rig import DURABILITY, rig, steps_yaml
from core.commands.messages import Reply
from core.engine.engine import EngineConfig
from core.engine.prepared import prepare


async def measure(
    root: Path, shape: str, n: int, sync: str, profile: str | None, bot: bool, group_commit_ms: float
) -> dict[str, object]:
    async with rig(root, synchronous=sync, group_commit=group_commit_ms / 1000) as r:  # type: ignore[arg-type]
        if bot:
            r.handler.register_outbox("console", _discard)  # progress replies are built, then dropped
        else:
            r.handler.progress.unsubscribe()  # the engine alone, as DBOS and Prefect are measured
        r.add_workflow("warmup", steps_yaml("warmup", 1, "chain"))
        r.add_workflow("steps", steps_yaml("steps", n, shape))  # type: ignore[arg-type]
        await r.run("warmup")
        r.catalog.reload()
        # parse, validate and prepare the definition outside the timed span (as for a workflow
        # that was run before; DBOS and Prefect register theirs at import time)
        prepare(r.catalog.get("steps"), r.engine.tools)
        profiler = cProfile.Profile() if profile else None
        started = time.perf_counter()
        if profiler:
            profiler.enable()
        run_id = await r.run("steps")
        if profiler:
            profiler.disable()
            profiler.dump_stats(profile)
        seconds = time.perf_counter() - started
        run = r.store.runs.get_run(run_id)
        entries = r.store.steps.journal([run_id])
        if run.status.value != "completed":
            raise SystemExit(f"the run ended {run.status.value}: {run.reason}")
    return {
        "side": f"baton-{sync.lower()}" + ("-bot" if bot else "") + ("" if group_commit_ms else "-percommit"),
        "shape": shape,
        "n": n,
        "seconds": seconds,
        "per_step_ms": seconds * 1000 / n,
        "durability": DURABILITY[sync]
        + (
            f"; pure results group-committed, {group_commit_ms:g} ms window"
            if group_commit_ms
            else "; a commit per step"
        )
        + ("; chat progress on" if bot else ""),
        "journaled_steps": sum(1 for e in entries if e.status.value == "completed"),
    }


async def _discard(_reply: Reply) -> None:
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", choices=["chain", "fanout"], required=True)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--sync", choices=["NORMAL", "FULL"], default="NORMAL")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--profile")
    parser.add_argument("--bot", action="store_true", help="with the chat layer's progress reporting")
    parser.add_argument(
        "--group-commit-ms", type=float, default=EngineConfig.group_commit * 1000, help="0: a commit per step"
    )
    opts = parser.parse_args()
    emit(
        asyncio.run(
            measure(
                Path(opts.dir), opts.shape, opts.n, opts.sync, opts.profile, opts.bot, opts.group_commit_ms
            )
        )
    )


if __name__ == "__main__":
    main()
