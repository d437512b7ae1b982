"""Baton: one `map:` node over N items of a no-op tool (each item its own journaled step), on
SQLite WAL, with the chat layer's progress on (one progress message for the whole map).

    python -m bench.baton_map --n 10000 --children 100 --dir /tmp/x

The timed span is `start_run` until the run rests, as in `baton_steps`. Reported: the time
per item, how many progress replies the run produced (one message, edited in place), and
the process's peak RSS. Then a fan-out of `--children` sub-workflows (`map:` over a
`workflow:` step, each child run one no-op step): the time per child run, start to rest.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time
from pathlib import Path

from bench.protocol import emit
from bench.rig import rig
from core.commands.messages import Reply
from core.engine.prepared import prepare

MAPPED = """\
name: mapped
defaults: {{replay: pure}}
nodes:
  - id: each
    map: {{items: "{{{{ range({n}) | list }}}}", max_parallel: 16, max_items: {n}}}
    tool: noop
"""


CHILD = """\
name: leaf
defaults: {replay: pure}
inputs:
  i: {type: integer}
nodes:
  - id: work
    tool: noop
"""

FAN_OUT = """\
name: fan
nodes:
  - id: each
    map: {{items: "{{{{ range({n}) | list }}}}", as: i, max_parallel: 16, max_items: {n}}}
    workflow: leaf
    with: {{i: "{{{{ i }}}}"}}
"""


async def measure(root: Path, n: int, children: int = 100) -> dict[str, object]:
    replies: list[Reply] = []

    async def keep(reply: Reply) -> None:
        replies.append(reply)

    async with rig(root) as r:
        r.handler.register_outbox("console", keep)
        r.add_workflow("mapped", MAPPED.format(n=n))
        r.catalog.reload()
        prepare(r.catalog.get("mapped"), r.engine.tools)
        started = time.perf_counter()
        run_id = await r.run("mapped")
        seconds = time.perf_counter() - started
        await r.handler.drain()
        run = r.store.runs.get_run(run_id)
        items = sum(1 for e in r.store.steps.journal([run_id]) if e.node_id.startswith("each["))
        if run.status.value != "completed":
            raise SystemExit(f"the run ended {run.status.value}: {run.reason}")
        r.add_workflow("leaf", CHILD)
        r.add_workflow("fan", FAN_OUT.format(n=children))
        started = time.perf_counter()
        fan_id = await r.run("fan")
        fan_seconds = time.perf_counter() - started
        await r.handler.drain()
        fan = r.store.runs.get_run(fan_id)
        if fan.status.value != "completed":
            raise SystemExit(f"the fan-out ended {fan.status.value}: {fan.reason}")
        child_runs = r.store.runs.child_runs([fan_id])
    mapped = [r for r in replies if r.kind == "progress" and r.run_id == run_id]
    progress = {r.how.replace_key for r in mapped}  # one key: one message, edited
    fanned = {fan_id, *(c.id for c in child_runs)}
    fan_messages = {r.how.replace_key or id(r) for r in replies if r.run_id in fanned}
    return {
        "side": "baton-map",
        "n": n,
        "seconds": seconds,
        "per_item_ms": seconds * 1000 / n,
        "journaled_items": items,
        "progress_messages": len(progress),
        "progress_edits": len(mapped),
        "fan_out_messages": len(fan_messages),  # the parent's progress and final: its children say nothing
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "children": len(child_runs),
        "children_completed": sum(1 for c in child_runs if c.status.value == "completed"),
        "fan_out_seconds": fan_seconds,
        "per_child_ms": fan_seconds * 1000 / children,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--children", type=int, default=100)
    parser.add_argument("--dir", required=True)
    opts = parser.parse_args()
    emit(asyncio.run(measure(Path(opts.dir), opts.n, opts.children)))


if __name__ == "__main__":
    main()
