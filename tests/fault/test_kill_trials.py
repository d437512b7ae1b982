"""kill -9 replicas and workers at every step of a run; nothing is lost or done twice.

A cluster of real processes on one PostgreSQL database (BATON_EXECUTOR=procrastinate):
three `baton run` replicas and three workers, leases of 1 s, worker heartbeats of 0.25 s.
Each trial starts a run of a workflow mixing pure, idempotent and unsafe steps through a
chat event, waits until its step is in flight (steps report over a FIFO) and kills the
replica that owns the run, the worker running the step, or both: every (step, target) pair,
once with the event delivered once and once delivered twice (24 trials, three at a time, so
other lanes' kills land at points no trial picks). Killed processes are replaced in the
background.

Kills never land while a replica handles a chat event: the event would be claimed (deduped)
by a process that died before starting its run, and the platform's redelivery would be
ignored. That gap is the conversation layer's (docs/operations.md, "Known limits").

Invariants, per trial: the run rests `completed` or `needs_attention` (and only an unsafe
step ever causes the latter); the unsafe step ran at most once; every execution of the
idempotent step used one key; a completed run has each step completed once in its journal;
every event produced exactly one run and none is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from core.store.records import NodeStatus, RunStatus
from core.store.repository import SqlStore
from tests.integration.scale.processes import Node, replica_options, worker_options
from tests.integration.step_signals import StepSignals

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

NODES = ("p1", "i1", "u1", "p2")
TARGETS = ("replica", "worker", "both")
#: (step, target, event delivered twice) per trial: every distinct kill point, both ways
CASES = [(node, target, twice) for twice in (False, True) for target in TARGETS for node in NODES]
TRIALS = len(CASES)
LANES = 3  # trials run three at a time: a kill may hit other lanes' runs too

MIXED = """
name: mixed
nodes:
  - id: p1
    bash: |
      echo run >> {out}/$BATON_RUN_ID.p1
      timeout 5 sh -c "echo $BATON_RUN_ID-p1 $PPID > {fifo}"
      sleep 0.1; echo one
    replay: pure
  - id: i1
    depends_on: [p1]
    bash: |
      echo $BATON_IDEMPOTENCY_KEY >> {out}/$BATON_RUN_ID.i1
      timeout 5 sh -c "echo $BATON_RUN_ID-i1 $PPID > {fifo}"
      sleep 0.1; echo two
    replay: idempotent
  - id: u1
    depends_on: [p1]
    bash: |
      echo ran >> {out}/$BATON_RUN_ID.u1
      timeout 5 sh -c "echo $BATON_RUN_ID-u1 $PPID > {fifo}"
      sleep 0.1; echo three
    replay: unsafe
  - id: p2
    depends_on: [i1, u1]
    bash: |
      timeout 5 sh -c "echo $BATON_RUN_ID-p2 $PPID > {fifo}"
      sleep 0.1; echo "{{{{ nodes.i1.output }}}} {{{{ nodes.u1.output }}}}"
    replay: pure
"""


@dataclass
class Cluster:
    url: str
    root: Path
    replicas: list[Node] = field(default_factory=list)
    workers: list[Node] = field(default_factory=list)
    spawned: int = 0
    pending: set[asyncio.Task[None]] = field(default_factory=set)

    def options(self, role: str) -> dict:
        self.spawned += 1
        name = f"{role[0]}{self.spawned}"
        if role == "replica":
            return replica_options(
                self.url, self.root, name, executor="procrastinate", lease=1.0, heartbeat=0.25
            )
        return worker_options(self.url, self.root, name, heartbeat=0.25, grace=1.0)

    def replace(self, node: Node) -> None:
        """Start a successor of a killed node in the background."""
        pool = self.replicas if node in self.replicas else self.workers
        pool.remove(node)
        role = "replica" if pool is self.replicas else "worker"

        async def respawn() -> None:
            successor = await Node.start(self.options(role))
            pool.append(successor)

        task = asyncio.create_task(respawn())
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def live(self, pool: list[Node]) -> Node:
        while not [n for n in pool if n.alive]:  # only when every one was killed: wait for a successor
            await asyncio.wait(self.pending, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        return next(n for n in pool if n.alive)


@pytest.fixture
async def cluster(tmp_path: Path, migrated_queue_postgres_url: str) -> AsyncIterator[Cluster]:
    postgres_url = migrated_queue_postgres_url  # the test's `postgres_url`, with both schemas
    (tmp_path / "workflows").mkdir()
    (tmp_path / "out").mkdir()
    c = Cluster(postgres_url, tmp_path)
    nodes = [await Node.spawn(c.options(r)) for r in ("replica",) * 3 + ("worker",) * 3]
    await asyncio.gather(*(n.wait_ready() for n in nodes))
    c.replicas, c.workers = nodes[:3], nodes[3:]
    try:
        yield c
    finally:
        await asyncio.gather(*c.pending, return_exceptions=True)
        await asyncio.gather(*(n.close() for n in c.replicas + c.workers), return_exceptions=True)


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


async def test_kill_trials_at_every_step_and_target(cluster: Cluster) -> None:
    signals = StepSignals(cluster.root / "steps.fifo")
    (cluster.root / "workflows" / "mixed.yaml").write_text(
        MIXED.format(out=cluster.root / "out", fifo=signals.path)
    )
    store = SqlStore(cluster.url)  # not `postgres_url`: released first, it ends the nodes' connections
    outcomes: dict[str, str] = {}
    kills = {"replica": 0, "worker": 0}
    chat = asyncio.Lock()

    async def rest(run_id: str) -> dict:
        while True:  # ask a live replica; another lane may kill it while it waits
            judge = await cluster.live(cluster.replicas)
            with contextlib.suppress(ConnectionError):
                return await judge.request("wait", run=run_id, timeout=60)

    async def kill(run_id: str, target: str, step_parent: str) -> None:
        async with chat:  # pick and kill under the lock: two lanes never kill one node twice
            victims: list[Node] = []
            if target in ("replica", "both"):
                owner = store.runs.get_run(run_id).lease_owner
                victims += [n for n in cluster.replicas if n.ready == owner and n.alive]
            if target in ("worker", "both"):
                victims += [n for n in cluster.workers if str(n.proc.pid) == step_parent and n.alive]
            for victim in victims:
                kills["replica" if victim in cluster.replicas else "worker"] += 1
                victim.kill()
                cluster.replace(victim)
        for victim in victims:
            with contextlib.suppress(TimeoutError):
                await victim.exited(10)

    async def trial(seed: int) -> None:
        node_id, target, twice = CASES[seed]
        event, text = f"trial-{seed}", "run mixed"
        async with chat:  # see the module docstring: no kill lands while an event is handled
            entry = await cluster.live(cluster.replicas)
            answer = await entry.request("say", text=text, event=event, conversation=f"t{seed}")
            [run_id] = {run for _, run in answer["replies"] if run}
            if twice:  # the platform retries: a replica gets the same event again
                other = await cluster.live(cluster.replicas)
                again = await other.request("say", text=text, event=event, conversation=f"t{seed}")
                assert again["replies"] == [], again

        rested = asyncio.create_task(rest(run_id))
        signal = asyncio.create_task(signals.wait_for(f"{run_id}-{node_id}", timeout=60))
        await asyncio.wait({rested, signal}, return_when=asyncio.FIRST_COMPLETED)
        if signal.done():
            await kill(run_id, target, signal.result())
        else:  # another lane's kill already brought this run to rest before `node_id`
            signal.cancel()
        result = await rested
        outcomes[run_id] = result.get("status", result.get("error", "?"))
        _check_trial(store, cluster.root / "out", run_id, outcomes[run_id], seed)

    async def lane(first: int) -> None:
        for seed in range(first, TRIALS, LANES):
            await trial(seed)

    try:
        await asyncio.gather(*(lane(n) for n in range(LANES)))
    finally:
        signals.close()

    assert len(outcomes) == TRIALS
    assert set(outcomes.values()) <= {"completed", "needs_attention"}, outcomes
    runs = store.runs.recent_runs(limit=TRIALS * 2)
    assert sorted(r.id for r in runs) == sorted(outcomes)  # no run lost, none doubled
    assert kills["replica"] + kills["worker"] >= TRIALS, kills  # "both" trials kill two
    assert min(kills.values()) >= TRIALS // 4, kills
    print(f"\nkill trials: {len(outcomes)} runs, kills {kills}, outcomes {Counter(outcomes.values())}")
    store.close()


def _check_trial(store: SqlStore, out: Path, run_id: str, status: str, seed: int) -> None:
    where = f"trial {seed} run {run_id}"
    assert status in ("completed", "needs_attention"), f"{where}: {status}"
    assert len(_lines(out / f"{run_id}.u1")) <= 1, f"{where}: the unsafe step ran twice"
    keys = _lines(out / f"{run_id}.i1")
    assert len(set(keys)) <= 1, f"{where}: idempotent step ran under different keys {keys}"
    run = store.runs.get_run(run_id)
    entries = [e for e in store.steps.journal([run_id]) if e.cache_key]
    completed = [e.node_id for e in entries if e.status is NodeStatus.COMPLETED]
    assert len(completed) == len(set(completed)), f"{where}: a step completed twice {completed}"
    if run.status is RunStatus.COMPLETED:
        assert sorted(completed) == sorted(NODES), f"{where}: {completed}"
    else:
        assert run.status is RunStatus.NEEDS_ATTENTION
        assert "`u1` may have run" in (run.reason or ""), f"{where}: {run.reason}"
        assert [e.status for e in entries if e.node_id == "u1"][-1] is NodeStatus.STARTED
