"""A real supervisor over a real Baton child, for tests/integration/bot/test_supervisor.py.

    python -m tests.integration.bot.supervised_app serve|crash|config BURST BASE MAX_DELAY

`serve`: each child builds Baton from `BATON_*` (a SQLite file), enters `baton.running()`
(engine started, SIGTERM/SIGINT handled) and prints `READY <pid> <restarts>`; on a stop
signal it shuts down gracefully and prints `STOPPED <pid> <signal>`. `crash`: each child
prints `READY …` and exits 1. `config`: each child exits 2 (a configuration error).
"""

from __future__ import annotations

import asyncio
import os
import sys

from bot.app import build_baton
from bot.logging import setup_logging
from bot.settings import load_settings
from bot.supervisor import Backoff, supervise
from core.redaction import Redactor


def say(line: str) -> None:
    print(line, flush=True)


def serve(restarts: int) -> int:
    settings = load_settings()
    baton = build_baton(settings)

    async def main() -> None:
        async with baton.running(grace=1.0):
            say(f"READY {os.getpid()} {restarts}")
            await baton.stopping.wait()
        say(f"STOPPED {os.getpid()} {baton.shutdown.count}")

    try:
        asyncio.run(main())
    finally:
        baton.close()
    return 0


def crash(restarts: int) -> int:
    say(f"READY {os.getpid()} {restarts}")
    return 1


def config(restarts: int) -> int:
    say(f"READY {os.getpid()} {restarts}")
    return 2


def main() -> None:
    mode, burst, base, max_delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    setup_logging("INFO", Redactor(()))
    child = {"serve": serve, "crash": crash, "config": config}[mode]
    backoff = Backoff(burst=burst, window=60.0, base=base, max_delay=max_delay)
    sys.exit(supervise(child, name=f"test-{mode}", backoff=backoff))


if __name__ == "__main__":
    main()
