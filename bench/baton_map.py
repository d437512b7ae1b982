"""Baton: one `map:` node over N items of a no-op tool (each item its own journaled step), on
SQLite WAL, with the chat layer's progress on (one progress message for the whole map).

    python -m bench.baton_map --n 10000 --dir /tmp/x

The timed span is `start_run` until the run rests, as in `baton_steps`. Reported: the time
per item, how many progress replies the run produced (one message, edited in place), and
the process's peak RSS.
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


async def measure(root: Path, n: int) -> dict[str, object]:
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
        run = r.store.get_run(run_id)
        items = sum(1 for e in r.store.journal([run_id]) if e.node_id.startswith("each["))
        if run.status.value != "completed":
            raise SystemExit(f"the run ended {run.status.value}: {run.reason}")
    progress = {r.replace_key for r in replies if r.kind == "progress"}  # one key: one message, edited
    return {
        "side": "baton-map",
        "n": n,
        "seconds": seconds,
        "per_item_ms": seconds * 1000 / n,
        "journaled_items": items,
        "progress_messages": len(progress),
        "progress_edits": sum(1 for r in replies if r.kind == "progress"),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--dir", required=True)
    opts = parser.parse_args()
    emit(asyncio.run(measure(Path(opts.dir), opts.n)))


if __name__ == "__main__":
    main()
