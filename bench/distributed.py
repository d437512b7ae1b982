"""Distributed throughput: Baton's no-op steps through `baton worker` against Procrastinate's
own no-op jobs, on the same PostgreSQL database, with one and with two worker processes.

    python -m bench.distributed --steps 400 --workers 1,2 --concurrency 4 --dir D [--db bench_dist]

Procrastinate: `--steps` jobs of an async task that returns at once are deferred to a queue
of their own, then worker processes (`App.run_worker_async`, listen/notify on, jobs deleted
when they succeed: as `baton worker` configures its own) run them; timed from the first
defer until the queue is empty. That is the ceiling of any design that puts one job per step
on Procrastinate. Its workers use the connector `baton worker` uses (`queue_connector`:
autocommit, a connection checked after a second unused), so that Baton's share is measured
against the same Procrastinate; the same jobs on Procrastinate's default connector (a
transaction and a check per query) are measured in the same rounds, for reference.
Baton: a replica (`build_baton` in this process, BATON_EXECUTOR=procrastinate) runs a
fan-out workflow of `--steps` no-op tool steps (an `async` tool, as Procrastinate's task)
while `baton worker` processes execute them;
timed from `start_run` until the run has completed, after a one-step run (untimed) has warmed
the replica's and the workers' connections, as Procrastinate's deferrer is opened before its
clock starts. Each step is a journal entry written
`queued` with its job in one transaction, claimed by a worker (`queued -> started`), settled
in the journal, and read back from the journal by the replica: the journal is the source of
truth, the queue only carries the work.
Both sides use the same worker processes count, the same concurrency per worker, and a
database created for the bench (`--db`, dropped first).
Next to the rates (medians of `--rounds`; each round's share in `rounds_share_pct`), CPU
milliseconds per step / job while the clock runs, which a shared machine's load moves much
less than the rates: the worker processes (`/proc/<pid>/stat`), the database server (its
backends for the bench's database) and the driving process (Baton's replica; Procrastinate's
deferrer).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.protocol import ROOT, emit

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
QUEUE = "bench_noop"
#: steps of the run in flight at once (BATON_MAX_PARALLEL): enough to keep every worker slot busy
MAX_PARALLEL = 64
#: an `async` no-op, as Procrastinate's task below: both sides run a no-op of the same kind on
#: the worker's event loop (a sync tool would add a thread hand-off that Procrastinate's side
#: does not have)
TOOLS = (
    "from core.engine.tools import tool\n\n@tool(replay='pure')\nasync def noop() -> str:\n    return 'ok'\n"
)

PQ_WORKER = """
import asyncio, sys
import procrastinate
from core.engine.distributed.queue import queue_connector
if sys.argv[4] == "baton":  # the connector `baton worker` uses
    connector = queue_connector(sys.argv[1], int(sys.argv[2]) + 3)
else:  # Procrastinate's own defaults
    connector = procrastinate.PsycopgConnector(conninfo=sys.argv[1], max_size=int(sys.argv[2]) + 3)
app = procrastinate.App(connector=connector)

@app.task(name="noop", queue=sys.argv[3])
async def noop() -> str:
    return "ok"

async def main() -> None:
    async with app.open_async():
        print("ready", flush=True)
        await app.run_worker_async(queues=[sys.argv[3]], concurrency=int(sys.argv[2]), wait=True,
                                   listen_notify=True, delete_jobs="successful", install_signal_handlers=True)
asyncio.run(main())
"""


def fresh_database(name: str) -> str:
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"postgresql://postgres@127.0.0.1:5432/{name}"


class _Proc:
    """A worker process whose output goes to a file (it logs every step): read by nothing
    while the clock runs, so writing the log is the worker's cost alone and no thread of the
    measuring process (the replica, on Baton's side) competes for its GIL."""

    def __init__(self, argv: list[str], env: dict[str, str], marker: str) -> None:
        self.log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in `_stop`
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )  # fmt: skip
        self.marker = marker

    def ready(self) -> bool:
        self.log.seek(0)
        return any(self.marker in line for line in self.log)

    def tail(self) -> str:
        self.log.seek(0)
        return " | ".join(line.rstrip() for line in self.log.readlines()[-5:])

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu(self) -> float:
        return _proc_cpu(self.pid)


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu(procs: list[_Proc]) -> float:
    return sum(proc.cpu() for proc in procs)


def _server_cpu(url: str) -> dict[int, float]:
    """CPU seconds so far of each PostgreSQL backend connected to the bench's database (the
    server runs on this machine): what each side costs the server, its connections' share."""
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (url.rsplit("/", 1)[1],)
        ).fetchall()
    return {int(pid): _proc_cpu(int(pid)) for (pid,) in rows}


def _server_ms(url: str, before: dict[int, float], steps: int) -> float:
    """CPU milliseconds per step of the database's backends since `before` (a backend that
    connected meanwhile counts whole; one that left meanwhile is missed)."""
    after = _server_cpu(url)
    return 1000 * sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items()) / steps


def _wait_ready(procs: list[_Proc], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    for proc in procs:
        while not proc.ready():
            if proc.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"a worker did not get ready: {proc.tail()}")
            time.sleep(0.05)


def _stop(procs: list[_Proc]) -> None:
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.proc.wait()
        proc.log.close()


def procrastinate_side(
    url: str, steps: int, workers: int, concurrency: int, connector: str = "baton"
) -> tuple[float, float, float, float]:
    """Jobs per second, the worker processes', the database server's and this process's (it
    defers the jobs and waits for the queue to empty: Baton's replica's counterpart) CPU
    milliseconds per job; `connector`:
    "baton" (as `baton worker` configures Procrastinate's connector) or "default"
    (Procrastinate's own defaults)."""
    import procrastinate

    from core.engine.distributed.queue import apply_queue_schema

    apply_queue_schema(url)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", PQ_WORKER, url, str(concurrency), QUEUE, connector]
    procs = [_Proc(argv, env, "ready") for _ in range(workers)]
    try:
        _wait_ready(procs)
        app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(conninfo=url))
        with app.open(), psycopg.connect(url, autocommit=True) as conn:
            cpu, server, own = _cpu(procs), _server_cpu(url), time.process_time()
            started = time.perf_counter()
            task = app.configure_task("noop", queue=QUEUE)
            for _ in range(steps):
                task.defer()
            while True:
                left = conn.execute(
                    "SELECT count(*) FROM procrastinate_jobs WHERE queue_name = %s", (QUEUE,)
                ).fetchone()
                if left is not None and left[0] == 0:
                    break
                time.sleep(0.005)
            rate = steps / (time.perf_counter() - started)
            driver_ms = 1000 * (time.process_time() - own) / steps
            return rate, 1000 * (_cpu(procs) - cpu) / steps, _server_ms(url, server, steps), driver_ms
    finally:
        _stop(procs)


def fanout_yaml(steps: int) -> str:
    lines = ["name: dist", "defaults: {replay: pure}", "nodes:"]
    for i in range(steps):
        lines += [f"  - id: s{i:05d}", "    tool: noop"]
    return "\n".join(lines) + "\n"


async def _run_replica(url: str, steps: int, procs: list[_Proc]) -> tuple[float, str, int, dict[str, float]]:
    """Steps per second, the run's status, its completed steps, and the CPU milliseconds per
    step of the worker processes, of this process (the replica) and of the database server."""
    from bot.app import build_baton
    from bot.settings import load_settings

    baton = build_baton(load_settings())
    try:
        async with baton.running(handle_signals=False):
            # a one-step run first (not timed): the replica's and the workers' first run pays
            # for cold connections and caches (≈ 30 ms against ≈ 10 ms warm), which
            # Procrastinate's side, its deferrer opened before the clock, does not
            warm = await baton.engine.start_run(
                workflow="warm", args={}, platform="console", conversation="bench", thread=None,
                requester="console:bench",
            )  # fmt: skip
            await baton.engine.wait(warm.id, timeout=600)
            cpu, own, server = _cpu(procs), time.process_time(), _server_cpu(url)
            started = time.perf_counter()
            run = await baton.engine.start_run(
                workflow="dist", args={}, platform="console", conversation="bench", thread=None,
                requester="console:bench",
            )  # fmt: skip
            done = await baton.engine.wait(run.id, timeout=600)
            elapsed = time.perf_counter() - started
            cpu_ms = {
                "worker_cpu_ms": 1000 * (_cpu(procs) - cpu) / steps,
                "replica_cpu_ms": 1000 * (time.process_time() - own) / steps,
                "server_cpu_ms": _server_ms(url, server, steps),
            }
            entries = baton.store.steps.journal([run.id])
            completed = sum(1 for e in entries if e.status.value == "completed")
            return steps / elapsed, done.status.value, completed, cpu_ms
    finally:
        baton.close()


def baton_side(url: str, root: Path, steps: int, workers: int, concurrency: int) -> dict[str, Any]:
    (root / "workflows").mkdir(parents=True, exist_ok=True)
    (root / "workflows" / "dist.yaml").write_text(fanout_yaml(steps))
    (root / "workflows" / "warm.yaml").write_text(fanout_yaml(1).replace("name: dist", "name: warm"))
    (root / "workflows" / "tools.py").write_text(TOOLS)
    # deployed tool modules were not written a moment ago: a file modified less than 2 s
    # before a step is read and parsed again by every step (`tool_identity.changed`: an edit
    # within the file system's timestamp granularity), which a bench run of a second or two
    # right after writing the module would otherwise pay on most of its steps
    an_hour_ago = time.time() - 3600
    os.utime(root / "workflows" / "tools.py", (an_hour_ago, an_hour_ago))
    baton_env = {
        "BATON_EXECUTOR": "procrastinate",
        "BATON_DATABASE_URL": url.replace("postgresql://", "postgresql+psycopg://"),
        "BATON_WORKFLOW_DIRS": json.dumps([str(root / "workflows")]),
        "BATON_TOOL_MODULES": json.dumps([str(root / "workflows" / "tools.py")]),
        "BATON_DATA_DIR": str(root / f"data-{time.time_ns()}"),
        "BATON_WORKER_CONCURRENCY": str(concurrency),
        "BATON_MAX_PARALLEL": str(MAX_PARALLEL),
        "BATON_LOG_LEVEL": "INFO",
        # no-op steps against no-op jobs: the queue's path, not the step sandbox, which runs a
        # tool step as a process of its own (its cost is the `real_steps` sandbox rows)
        "BATON_STEP_SANDBOX": "none",
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_")}
    env.update(baton_env, PYTHONPATH=str(ROOT))
    os.environ.update(baton_env, BATON_LOG_LEVEL="WARNING")  # the replica, in this process
    entry = Path(sys.executable).parent / "baton"
    argv = (
        [str(entry), "worker"]
        if entry.exists()
        else [sys.executable, "-c", "from bot.main import app; app()", "worker"]
    )
    # the first worker migrates the schema and installs the queue's before the others start
    procs = [_Proc(argv, env, "worker ready")]
    try:
        _wait_ready(procs)
        procs += [_Proc(argv, env, "worker ready") for _ in range(workers - 1)]
        _wait_ready(procs[1:])
        rate, status, completed, cpu_ms = asyncio.run(_run_replica(url, steps, procs))
    finally:
        _stop(procs)
    return {"steps_per_s": rate, "status": status, "completed": completed, **cpu_ms}


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--db", default="bench_dist")
    parser.add_argument("--dir", required=True)
    opts = parser.parse_args()
    out: dict[str, Any] = {"steps": opts.steps, "concurrency": opts.concurrency, "rounds": opts.rounds}
    for workers in [int(w) for w in opts.workers.split(",")]:
        pq, pq_default, bt, pq_cpu, bt_cpu, replica_cpu = [], [], [], [], [], []
        pq_server, bt_server, pq_driver = [], [], []
        for _ in range(opts.rounds):
            url = fresh_database(opts.db)
            rate, cpu, server, driver = procrastinate_side(url, opts.steps, workers, opts.concurrency)
            pq.append(rate)
            pq_cpu.append(cpu)
            pq_server.append(server)
            pq_driver.append(driver)
            url = fresh_database(opts.db)
            pq_default.append(procrastinate_side(url, opts.steps, workers, opts.concurrency, "default")[0])
            url = fresh_database(opts.db)
            result = baton_side(url, Path(opts.dir), opts.steps, workers, opts.concurrency)
            if result["status"] != "completed" or result["completed"] != opts.steps:
                raise SystemExit(
                    f"the distributed run ended {result['status']} with {result['completed']} steps"
                )
            bt.append(result["steps_per_s"])
            bt_cpu.append(result["worker_cpu_ms"])
            replica_cpu.append(result["replica_cpu_ms"])
            bt_server.append(result["server_cpu_ms"])
        out[str(workers)] = {
            "procrastinate_jobs_per_s": _median(pq),
            "procrastinate_default_jobs_per_s": _median(pq_default),
            "baton_steps_per_s": _median(bt),
            "share_pct": 100 * _median(bt) / _median(pq),
            # CPU per step / job of the worker processes (all of them), and of Baton's replica:
            # less sensitive to the machine's load than the rates
            "procrastinate_worker_cpu_ms": _median(pq_cpu),
            "baton_worker_cpu_ms": _median(bt_cpu),
            "baton_replica_cpu_ms": _median(replica_cpu),
            "procrastinate_deferrer_cpu_ms": _median(pq_driver),  # the replica's counterpart
            # the database server's CPU per job / step (its backends for this database)
            "procrastinate_server_cpu_ms": _median(pq_server),
            "baton_server_cpu_ms": _median(bt_server),
            "rounds_share_pct": [round(100 * b / p, 1) for b, p in zip(bt, pq, strict=True)],
        }
    emit(out)


if __name__ == "__main__":
    main()
