"""Prefect: a flow of N no-op tasks (chain or fan-out), results persisted, local ephemeral server.

    python -m bench.peers.prefect_tasks --shapes chain,fanout --rounds 3 --n 1000 --home /tmp/prefect-home

No Prefect Cloud and no server of ours: with no PREFECT_API_URL, Prefect starts its own
temporary local API server on SQLite under PREFECT_HOME. Analytics are switched off. Task
results are persisted (`persist_result=True`, local file storage) so that each task is
durable the way a Baton step or a DBOS step is. Only the flow call is timed; the server
is started (and its database migrated) by a warm-up flow first. Starting that server takes
tens of seconds here, so one child measures every round of both shapes (alternating them)
and reports each sample; the other sides run one child per sample.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from bench.protocol import emit

DURABILITY = "task results persisted to local files; run state in the ephemeral server's SQLite"


def configure(home: str) -> None:
    """Set before `import prefect`: a private home, ephemeral server, no telemetry."""
    os.environ["PREFECT_HOME"] = home
    os.environ.pop("PREFECT_API_URL", None)
    os.environ["PREFECT_SERVER_ALLOW_EPHEMERAL_MODE"] = "true"
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ["PREFECT_RESULTS_PERSIST_BY_DEFAULT"] = "true"
    os.environ["PREFECT_LOGGING_LEVEL"] = "WARNING"
    os.environ["PREFECT_LOGGING_TO_API_ENABLED"] = "false"
    os.environ["DO_NOT_TRACK"] = "1"
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default="chain,fanout")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--home", required=True)
    opts = parser.parse_args()
    configure(opts.home)

    from prefect import flow, task
    from prefect.task_runners import ThreadPoolTaskRunner

    @task(persist_result=True)
    def noop(i: int) -> int:
        return i

    @flow(persist_result=True)
    def chain(n: int) -> int:
        total = 0
        for i in range(n):
            total += noop(i)
        return total

    @flow(persist_result=True, task_runner=ThreadPoolTaskRunner(max_workers=4))
    def fanout(n: int) -> int:
        return sum(noop.map(range(n)).result())

    flows = {"chain": chain, "fanout": fanout}
    chain(2)  # warm-up: starts the ephemeral server, migrates its database
    expected = sum(range(opts.n))
    samples = []
    for _ in range(opts.rounds):
        for shape in opts.shapes.split(","):
            started = time.perf_counter()
            got = flows[shape](opts.n)
            seconds = time.perf_counter() - started
            if got != expected:
                raise SystemExit(f"Prefect returned {got}, expected {expected}")
            samples.append({"shape": shape, "seconds": seconds, "per_step_ms": seconds * 1000 / opts.n})
    emit(
        {
            "side": "prefect",
            "n": opts.n,
            "samples": samples,
            "durability": DURABILITY,
            "persisted_results": _count_results(opts.home),
        }
    )
    sys.stdout.flush()


def _count_results(home: str) -> int:
    storage = os.path.join(home, "storage")
    return len(os.listdir(storage)) if os.path.isdir(storage) else 0


if __name__ == "__main__":
    main()
