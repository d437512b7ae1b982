"""DBOS side of the recovery benchmark (the parent is `bench.recovery`).

    python -m bench.peers.dbos_recovery --phase first|relaunch --db D --n 1000 --kill-at 500

Same shape as `bench.baton_recovery`: a workflow of N steps whose step `kill_at` blocks in
the first process, which the parent kills with SIGKILL. On relaunch, `DBOS.launch()`
recovers the pending workflow (its default local recovery), replays the recorded step
outputs, re-runs the interrupted step, and the process waits for the workflow's result.
"""

from __future__ import annotations

import argparse
import threading
import time

from bench.protocol import emit

WORKFLOW_ID = "bench-recovery"


def event(name: str) -> None:
    print(f"EVENT {name} {time.time():.6f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phase", choices=["first", "relaunch"], required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--kill-at", type=int, default=500)
    opts = parser.parse_args()
    if opts.phase == "relaunch":
        event("process_started")

    from dbos import DBOS, DBOSConfig, SetWorkflowID

    phase = opts.phase
    executions = {"count": 0}

    @DBOS.step()
    def step(i: int) -> int:
        executions["count"] += 1
        if i == opts.kill_at:
            if phase == "first":
                event("at_kill")
                threading.Event().wait()  # killed here
            event("running_again")
        return i

    @DBOS.workflow()
    def recover(n: int) -> int:
        return sum(step(i) for i in range(n))

    config: DBOSConfig = {
        "name": "baton-bench-recovery",
        "system_database_url": f"sqlite:///{opts.db}",
        "log_level": "WARNING",
    }
    DBOS(config=config)
    if phase == "first":
        DBOS.launch()
        with SetWorkflowID(WORKFLOW_ID):
            recover(opts.n)  # never returns: the parent kills us
        return
    event("engine_starting")
    DBOS.launch()  # recovers the pending workflow in a background thread
    result = DBOS.retrieve_workflow(WORKFLOW_ID).get_result()
    event("completed")
    DBOS.destroy()
    emit(
        {
            "status": "completed" if result == sum(range(opts.n)) else f"wrong result {result}",
            "completed_steps": opts.n,
            "executions": executions["count"],
            "n": opts.n,
        }
    )


if __name__ == "__main__":
    main()
