"""Resume cost: a run of N nodes where all but the last are cached.

    python -m bench.baton_resume --n 1000 --dir D

Two ways a person continues after the last step failed (chain of N pure tool steps):
  resume       `/workflow resume <run>`: the same run; N-1 steps are done in it, the last re-runs;
  resume-from  `/workflow run X --resume-from <run>` after editing the last step: a new run
               that copies N-1 results from the old one (one batched insert) and runs the last.
For each: the time of `plan` (the dry run) and of the resume until the run rests, and the
number of SQL statements each sends (`bench.query_count`), which must not grow with N.
Loading the edited YAML (parse, validate, prepare) happens once per file change, whatever
command comes first; it is reported on its own (`load_edited_ms`), outside the resume.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from bench.protocol import emit
from bench.query_count import counting
from bench.rig import bench_tools, rig, steps_yaml
from core.engine.prepared import prepare
from core.engine.tools import ToolRegistry


def tools() -> ToolRegistry:
    failed: set[str] = set()

    def extra(registry: ToolRegistry) -> None:
        @registry.tool("flaky", replay="pure", inline=True)
        def flaky(v: int = 0) -> str:
            if not failed:
                failed.add("once")
                raise RuntimeError("the last step fails once")
            return f"last {v}"

    return bench_tools(extra)


def edited(n: int) -> str:
    """The same workflow with the last step's definition changed (its `with:`)."""
    return steps_yaml("resume", n, "chain", last_tool="flaky").rstrip("\n") + "\n    with: {v: 1}\n"


async def measure(root: Path, n: int) -> dict[str, object]:
    async with rig(root, tools=tools()) as r:
        r.add_workflow("resume", steps_yaml("resume", n, "chain", last_tool="flaky"))
        run_id = await r.run("resume")
        failed = r.store.runs.get_run(run_id)
        if failed.status.value != "failed":
            raise SystemExit(f"the first run should fail at its last step, it is {failed.status.value}")
        out: dict[str, object] = {"n": n}

        with counting(r.store) as q:
            t = time.perf_counter()
            plan = r.engine.plan(run_id)
            out["resume_plan_ms"] = (time.perf_counter() - t) * 1000
        out["resume_plan_queries"] = q.total
        runs = [p.node_id for p in plan.nodes if p.action == "runs"]
        out["resume_plan_runs"] = len(runs)

        with counting(r.store) as q:
            t = time.perf_counter()
            await r.engine.resume(run_id, actor="console:bench")
            done = await r.engine.wait(run_id)
            out["resume_ms"] = (time.perf_counter() - t) * 1000
        out["resume_queries"] = q.total
        out["resume_queries_split"] = [q.sqlalchemy, q.hot_path]
        out["resume_status"] = done.status.value

        r.add_workflow("resume", edited(n))
        t = time.perf_counter()
        r.catalog.reload()
        prepare(r.catalog.get("resume"), r.engine.tools)  # the edit's own cost: parse + prepare once
        out["load_edited_ms"] = (time.perf_counter() - t) * 1000
        with counting(r.store) as q:
            t = time.perf_counter()
            run = await r.engine.start_run(
                workflow="resume", args={}, platform="console", conversation="bench",
                thread=None, requester="console:bench", resume_from=run_id,
            )  # fmt: skip
            done = await r.engine.wait(run.id)
            out["resume_from_ms"] = (time.perf_counter() - t) * 1000
        out["resume_from_queries"] = q.total
        out["resume_from_queries_split"] = [q.sqlalchemy, q.hot_path]
        out["resume_from_status"] = done.status.value
        entries = r.store.steps.journal([run.id])
        out["resume_from_cached"] = sum(1 for e in entries if e.cached_from)
        out["resume_from_executed"] = sum(1 for e in entries if not e.cached_from)

        with counting(r.store) as q:
            t = time.perf_counter()
            plan = r.engine.plan(run.id)
            out["plan_done_ms"] = (time.perf_counter() - t) * 1000
        out["plan_done_queries"] = q.total
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--dir", required=True)
    opts = parser.parse_args()
    emit(asyncio.run(measure(Path(opts.dir), opts.n)))


if __name__ == "__main__":
    main()
