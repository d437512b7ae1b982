"""Peak memory of the bot with 1,000 concurrent paused runs.

    python -m bench.baton_memory --runs 1000 --dir D

The bot as `baton run` builds it (`bot.app.build_baton` from `Settings`, SQLite under D),
with both chat adapters imported as a Slack + Discord deployment has them. Then 1,000
`run gated …` commands arrive back to back through the handler, each in a conversation of
its own, without waiting: up to 1,000 executions are in flight at once, and each stops at
its approval gate. Reported: RSS after start-up, and the peak (VmHWM) once all are paused.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import time
import uuid
from pathlib import Path

from bench.protocol import emit

GATED = (
    "name: gated\ndefaults: {replay: pure}\nnodes:\n  - id: ok\n    approval: Ship {{ inputs.message }}?\n"
    "  - id: ship\n    depends_on: [ok]\n    bash: echo shipped\n"
)


def rss_mb() -> tuple[float, float]:
    """(current RSS, peak RSS) of this process in MB, from /proc/self/status."""
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


async def measure(root: Path, runs: int) -> dict[str, object]:
    for name in ("adapters.slack", "adapters.discord", "adapters.console"):
        importlib.import_module(name)  # what a Slack + Discord deployment loads
    from bot.app import build_baton
    from core.commands.messages import ChatMessage, Reply
    from core.config import Settings

    (root / "workflows").mkdir(parents=True, exist_ok=True)
    (root / "workflows" / "gated.yaml").write_text(GATED)
    settings = Settings(
        database_url=f"sqlite:///{root / 'baton.db'}",
        workflow_dirs=[root / "workflows"],
        data_dir=root / "data",
        tool_modules=[],
        replica_id="bench-memory",
    )
    baton = build_baton(settings)
    sent: list[Reply] = []

    async def outbox(reply: Reply) -> None:
        sent.append(reply)

    baton.handler.register_outbox("console", outbox)
    async with baton.running(handle_signals=False):
        idle_rss, _ = rss_mb()
        started = time.perf_counter()
        run_ids = []
        for i in range(runs):
            message = ChatMessage(
                platform="console", conversation=f"mem-{i}", user="ana",
                text=f"run gated release-{i}", event_id=uuid.uuid4().hex, direct=True,
            )  # fmt: skip
            replies = await baton.handler.handle(message)
            run_ids.extend(r.run_id for r in replies[:1] if r.run_id)
        statuses = [(await baton.engine.wait(run_id, timeout=300)).status.value for run_id in run_ids]
        await baton.handler.drain()
        seconds = time.perf_counter() - started
        rss, peak = rss_mb()
    baton.close()
    return {
        "runs": runs,
        "paused": statuses.count("paused"),
        "startup_rss_mb": idle_rss,
        "rss_mb": rss,
        "peak_rss_mb": peak,
        "seconds_to_pause_all": seconds,
        "background_replies": len(sent),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--dir", required=True)
    opts = parser.parse_args()
    os.chdir(opts.dir)  # no stray .env or ./workflows from the checkout
    emit(asyncio.run(measure(Path(opts.dir), opts.runs)))


if __name__ == "__main__":
    main()
