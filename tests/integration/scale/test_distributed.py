"""BATON_EXECUTOR=procrastinate: the engine hands steps to a Procrastinate worker and reads
their results from the journal; the replay rules and the cache work as in-process."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from core.engine.distributed import Settled
from core.engine.distributed.jobs import NodeJob
from core.engine.events import EventKind
from core.store.port import StepEntry
from core.store.records import NodeStatus, RunStatus
from tests.integration.scale.conftest import Cluster
from tests.integration.step_signals import StepSignals

DIAMOND = """
name: diamond
nodes:
  - id: top
    bash: |
      mkdir -p files && echo top > files/top.txt
      echo '{"n": 2}'
    output: {format: json, schema: {type: object, required: [n]}}
    artifacts: [files/*.txt]
    replay: pure
  - id: left
    depends_on: [top]
    bash: echo "left {{ nodes.top.output.n }} $(cat files/top.txt | cut -c1-3) pid=$PPID"
    replay: idempotent
  - id: right
    depends_on: [top]
    bash: echo "right key=$BATON_IDEMPOTENCY_KEY dir=$BATON_WORKFLOW_DIR"
    replay: unsafe
  - id: join
    depends_on: [left, right]
    bash: echo "{{ nodes.left.output }} + {{ nodes.right.output }}"
    replay: pure
"""


async def test_a_diamond_runs_on_the_worker_and_completes(cluster: Cluster) -> None:
    h = cluster.harness
    h.write("diamond.yaml", DIAMOND)

    run = await h.run("diamond")

    assert run.status is RunStatus.COMPLETED, run.reason
    assert h.output(run.id, "left").startswith("left 2 top")
    assert f"pid={os.getpid()}" in h.output(run.id, "left")  # the worker of this test ran it
    assert h.output(run.id, "join").startswith("left 2 top")  # the values travelled with the job
    assert " + right key=" in h.output(run.id, "join")
    assert h.output(run.id, "right").endswith(f" dir={h.workflows.absolute()}\n")  # as in-process
    for node in ("top", "left", "right", "join"):
        [entry] = h.entries(run.id, node)
        assert entry.status is NodeStatus.COMPLETED
    [top] = h.entries(run.id, "top")
    assert list(top.artifacts) == ["files/top.txt"]  # captured on the worker, kept in the journal
    assert sorted(h.kinds(run.id, EventKind.NODE_COMPLETED)) == ["join", "left", "right", "top"]


async def test_a_resume_from_reuses_results_without_dispatching(cluster: Cluster) -> None:
    h = cluster.harness
    h.write("diamond.yaml", DIAMOND)
    first = await h.run("diamond")

    second = await h.run("diamond", resume_from=first.id)

    assert second.status is RunStatus.COMPLETED
    assert all(h.executed(second.id, n) == 0 for n in ("top", "left", "right", "join"))


async def test_a_failing_step_and_a_broken_contract_fail_the_run_with_the_worker_error(
    cluster: Cluster,
) -> None:
    h = cluster.harness
    h.write(
        "bad.yaml",
        """
        name: bad
        nodes:
          - id: produce
            bash: echo 'not json'
            output: {format: json}
            replay: pure
        """,
    )

    run = await h.run("bad")

    assert run.status is RunStatus.FAILED
    assert "not valid JSON" in (run.reason or "")
    [entry] = h.entries(run.id, "produce")
    assert entry.status is NodeStatus.FAILED
    assert entry.output_digest is not None  # the offending output is kept for inspection
    assert h.store.blobs.get_blob(entry.output_digest) == b"not json\n"


@pytest.mark.parametrize("replay", ["pure", "unsafe"])
async def test_retries_apply_to_remote_steps(cluster: Cluster, replay: str, tmp_path) -> None:
    h = cluster.harness
    marker = tmp_path / "tries"
    h.write(
        "flaky.yaml",
        f"""
        name: flaky
        nodes:
          - id: once
            bash: echo x >> {marker}; [ $(wc -l < {marker}) -ge 2 ] && echo ok
            replay: {replay}
            {"retry: {attempts: 3, backoff: 0}" if replay == "pure" else ""}
        """,
    )

    run = await h.run("flaky")

    if replay == "pure":
        assert run.status is RunStatus.COMPLETED
        assert [e.status for e in h.entries(run.id, "once")] == [NodeStatus.FAILED, NodeStatus.COMPLETED]
    else:
        assert run.status is RunStatus.FAILED
        assert len(marker.read_text().split()) == 1


async def test_cancel_stops_the_step_on_the_worker(cluster: Cluster, tmp_path) -> None:
    h = cluster.harness
    signals = StepSignals(tmp_path / "steps.fifo")
    h.write(
        "long.yaml",
        f"""
        name: long
        nodes:
          - id: wait
            bash: echo "wait $$" > {signals.path}; sleep 60; echo never
            replay: pure
        """,
    )
    try:
        run = await h.start("long")
        pid = int(await signals.wait_for("wait", timeout=30))
        gone = _exit_of(pid)

        cancelled = await h.engine.cancel(run.id, actor="console:ana")

        assert cancelled.status is RunStatus.CANCELLED
        async with asyncio.timeout(15):
            await gone  # the worker killed the step's process
        [entry] = h.entries(run.id, "wait")
        assert entry.status is not NodeStatus.COMPLETED
    finally:
        signals.close()


def _exit_of(pid: int) -> asyncio.Future[None]:
    """Resolves when process `pid` (not our child) exits: its pidfd becomes readable."""
    loop = asyncio.get_running_loop()
    fd = os.pidfd_open(pid)
    done: asyncio.Future[None] = loop.create_future()

    def exited() -> None:
        loop.remove_reader(fd)
        os.close(fd)
        if not done.done():
            done.set_result(None)

    loop.add_reader(fd, exited)
    return done


ASK = """
name: ask
nodes:
  - id: q
    prompt: "say hello"
"""


@pytest.mark.parametrize(
    "cluster", [{"prompt_provider": "command", "prompt_command": "sed s/^/worker:/"}], indirect=True
)
async def test_a_worker_whose_provider_is_not_the_one_keyed_refuses_the_step(cluster: Cluster) -> None:
    """The replica keys the prompt by its default provider (`fake`); a worker configured with
    another one must not journal its answer under that key."""
    h = cluster.harness
    h.write("ask.yaml", ASK)

    run = await h.run("ask")

    assert run.status is RunStatus.FAILED
    [entry] = h.entries(run.id, "q")
    assert entry.status is NodeStatus.FAILED and entry.output_digest is None
    assert "differs from the replica in its prompt provider" in (entry.error or "")
    assert entry.components["provider"] == {"name": "fake"}


WORKER_ESCAPE = """
name: escape
network: false
nodes:
  - id: look
    bash: |
      echo "uid=$(id -u)"
      echo "canary=$(cat ../../canary.txt 2>&1 | base64 -w0)"
      echo "runs=$(ls .. 2>&1 | tr '\\n' ' ')"
      echo "cmdlines=$(cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' ' | base64 -w0)"
      env -i setsid -f sh -c 'exec sleep 300 {marker}'
      echo done
"""


@pytest.mark.parametrize("cluster", [{"step_sandbox": "bwrap"}], indirect=True)
async def test_a_worker_runs_its_steps_in_the_sandbox(cluster: Cluster, tmp_path: Path) -> None:
    """`baton worker` sandboxes its steps as `baton run` does: its data directory (another
    run's directory, a file beside them) is hidden, the step sees no process of the worker,
    runs as nobody when the worker is root, and what it detached ends with it."""
    import base64
    import uuid

    canary = f"worker-canary-{uuid.uuid4().hex}"
    (tmp_path / "worker" / "runs" / "someone-elses-run").mkdir(parents=True)
    (tmp_path / "worker" / "canary.txt").write_text(canary)
    marker = f"0.{uuid.uuid4().int % 10**9:09d}"
    h = cluster.harness
    h.write("escape.yaml", WORKER_ESCAPE.format(marker=marker))

    run = await h.run("escape")

    assert run.status is RunStatus.COMPLETED, run.reason
    seen = dict(line.split("=", 1) for line in h.output(run.id, "look").splitlines() if "=" in line)
    assert canary not in base64.b64decode(seen["canary"]).decode(errors="replace")
    assert "someone-elses-run" not in seen["runs"]
    worker = Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").strip()  # this process
    assert worker not in base64.b64decode(seen["cmdlines"])
    assert seen["uid"] == ("65534" if os.geteuid() == 0 else str(os.getuid()))
    survivors = []
    for pid in os.listdir("/proc"):
        try:
            alive = pid.isdigit() and marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
            survivors += [pid] if alive else []
        except OSError:
            continue
    assert survivors == [], "a process the step detached outlived it on the worker"


async def test_a_worker_with_the_keyed_provider_answers(cluster: Cluster) -> None:
    h = cluster.harness
    h.write("ask.yaml", ASK)

    run = await h.run("ask")

    assert run.status is RunStatus.COMPLETED, run.reason
    assert h.output(run.id, "q").startswith("fake answer")


FANOUT = """
name: fanout
nodes:
""" + "".join(f"  - id: s{i}\n    bash: sleep 0.2; echo {i}\n    replay: pure\n" for i in range(6))


class _CountingReads:
    """The replica's reads of settled entries (`SettledReads`, on its event loop) and its
    store's `journal_settled` (in a thread, when it has no `SettledReads`), counted."""

    def __init__(self, reads: object, store: object) -> None:
        self._reads, self._store = reads, store
        self.reads: list[int] = []  # entries asked for, per read on the event loop
        self.threaded: list[int] = []  # the same, per read through the store

    async def settled(self, entry_ids: list[int]) -> dict:
        self.reads.append(len(list(entry_ids)))
        return await self._reads.settled(entry_ids)  # type: ignore[attr-defined,no-any-return]

    async def close(self) -> None:
        await self._reads.close()  # type: ignore[attr-defined]

    def journal_settled(self, entry_ids: list[int]) -> dict:
        self.threaded.append(len(list(entry_ids)))
        return self._store.journal_settled(entry_ids)  # type: ignore[attr-defined,no-any-return]

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)


@pytest.mark.parametrize("on_the_loop", [True, False], ids=["settled_reads", "store_in_a_thread"])
async def test_steps_waiting_on_workers_are_read_from_the_journal_together(
    cluster: Cluster, on_the_loop: bool
) -> None:
    """One journal read per poll serves every step the replica waits for (not one each): on
    the replica's event loop (`SettledReads`, as `bot/app.py` builds the dispatcher), or
    through the store's `journal_settled` in a thread when the dispatcher has no reads."""
    dispatcher = cluster.dispatcher
    reads = dispatcher.reads
    assert reads is not None
    counting = _CountingReads(reads, dispatcher.store)
    dispatcher.store = counting  # type: ignore[assignment]
    dispatcher.reads = counting if on_the_loop else None  # type: ignore[assignment]
    h = cluster.harness
    h.write("fanout.yaml", FANOUT)

    try:
        run = await h.run("fanout")
    finally:
        if not on_the_loop:
            await reads.close()  # the dispatcher no longer knows it

    assert run.status is RunStatus.COMPLETED, run.reason
    assert sorted(h.output(run.id, f"s{i}").strip() for i in range(6)) == [str(i) for i in range(6)]
    if on_the_loop:
        assert max(counting.reads) >= 2  # several waiting steps in one read
        assert set(counting.threaded) <= {1}  # only a step's own check once it waited a while
    else:
        assert max(counting.threaded) >= 2
        assert counting.reads == []


FAN_IN = (
    "name: fanin\nnodes:\n"
    + "".join(f"  - id: s{i}\n    bash: echo {i}\n    replay: pure\n" for i in range(8))
    + "  - id: join\n    depends_on: [" + ", ".join(f"s{i}" for i in range(8)) + "]\n"
    + "    bash: echo joined\n    replay: pure\n"
)


class _CountingHandoffs:
    """The replica's store, with its hand-off transactions counted (all else as is)."""

    def __init__(self, store: object) -> None:
        self._store = store
        self.batches: list[list[str]] = []  # nodes handed off, per transaction

    def journal_queue_many(self, handoffs: list, defer: object) -> list[tuple[int, int]]:
        self.batches.append(sorted(h.node_id for h in handoffs))
        return self._store.journal_queue_many(handoffs, defer)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)


async def test_steps_ready_together_are_handed_off_in_one_transaction(cluster: Cluster) -> None:
    """Eight steps ready at once, four in flight at a time (`max_parallel`): the first four
    are handed off in one transaction (their four `queued` entries and jobs), not four; the
    join that follows them is a transaction of its own."""
    counting = _CountingHandoffs(cluster.dispatcher.store)
    cluster.dispatcher.store = counting  # type: ignore[assignment]
    h = cluster.harness
    h.write("fanin.yaml", FAN_IN)

    run = await h.run("fanin")

    assert run.status is RunStatus.COMPLETED, run.reason
    assert counting.batches[0] == ["s0", "s1", "s2", "s3"]
    assert counting.batches[-1] == ["join"]
    handed = sorted(node for batch in counting.batches for node in batch)
    assert handed == sorted([*(f"s{i}" for i in range(8)), "join"])  # each handed off once
    assert cluster.dispatcher.handoff_batches == len(counting.batches) < 9
    for node in [*(f"s{i}" for i in range(8)), "join"]:
        [entry] = h.entries(run.id, node)  # each step written, claimed and run once
        assert entry.status is NodeStatus.COMPLETED
    assert h.output(run.id, "join").strip() == "joined"


async def test_a_hand_off_stopped_before_its_batch_is_written_is_never_written(cluster: Cluster) -> None:
    h = cluster.harness
    h.write("fanin.yaml", FAN_IN)
    run = await h.run("fanin")
    dispatcher = cluster.dispatcher
    written = dispatcher.handoff_batches

    def never(entry_id: int) -> NodeJob:
        raise AssertionError(f"the stopped hand-off was written (entry {entry_id})")

    late = StepEntry(
        run_id=run.id, node_id="late", cache_key="k", components={}, attempt=1, idempotency_key=None
    )
    ticket = dispatcher.hand_off(late, never, lambda: None)
    ticket.cancel()  # its step was stopped while the batch was still gathering
    await asyncio.sleep(0.05)

    assert dispatcher.handoff_batches == written
    assert h.entries(run.id, "late") == []


async def test_results_are_read_with_their_outputs(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The replica reads a settled step's output with its journal entry (one query for all
    the steps it waits for), not with a read of its own per step."""
    h = cluster.harness
    h.write("fanout.yaml", FANOUT)
    dispatcher = cluster.dispatcher
    settled: list[Settled] = []
    wait = dispatcher.settle

    async def recorded(entry_id: int, job_id: int | None = None) -> Settled:
        result = await wait(entry_id, job_id)
        settled.append(result)
        return result

    monkeypatch.setattr(dispatcher, "settle", recorded)

    run = await h.run("fanout")

    assert run.status is RunStatus.COMPLETED, run.reason
    assert len(settled) == 6
    for result in settled:
        assert result.entry.status is NodeStatus.COMPLETED and result.entry.output_digest is not None
        assert result.output == h.store.blobs.get_blob(result.entry.output_digest)
    assert sorted(h.output(run.id, f"s{i}").strip() for i in range(6)) == [str(i) for i in range(6)]


async def test_a_step_is_claimed_started_and_durable_before_it_runs(cluster: Cluster, tmp_path) -> None:
    """The worker's claim (`queued -> started`) is committed before the step runs: the step
    itself, reading the journal from another connection, sees its entry `started`."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os, sys, psycopg\n"
        "with psycopg.connect(sys.argv[1]) as conn:\n"
        "    row = conn.execute('SELECT status FROM journal WHERE run_id = %s AND node_id = %s',\n"
        "                       (os.environ['BATON_RUN_ID'], os.environ['BATON_NODE_ID'])).fetchone()\n"
        "print(row[0])\n"
    )
    url = cluster.url.replace("postgresql+psycopg://", "postgresql://")
    h = cluster.harness
    h.write(
        "probe.yaml",
        "name: probe\nnodes:\n"
        + "".join(
            f"  - id: {replay}\n    bash: {sys.executable} {probe} {url}\n    replay: {replay}\n"
            for replay in ("unsafe", "idempotent", "pure")
        ),
    )

    run = await h.run("probe")

    assert run.status is RunStatus.COMPLETED, run.reason
    for replay in ("unsafe", "idempotent", "pure"):
        assert h.output(run.id, replay).strip() == "started"


MAPPED = """
name: mapped
nodes:
  - id: each
    map: {items: [1, 2, 3, 4], as: n, max_parallel: 2}
    bash: |
      test "{{ n }}" != 3 || { echo "three fails" >&2; exit 1; }
      echo "item {{ n }} pid=$PPID"
    replay: idempotent
"""


async def test_a_maps_items_run_on_the_worker_each_its_own_step(cluster: Cluster) -> None:
    h = cluster.harness
    h.write("mapped.yaml", MAPPED)

    run = await h.run("mapped")

    assert run.status is RunStatus.FAILED
    assert run.reason is not None and run.reason.startswith("1 of 4 items of `each` failed: `each[2]`")
    for i in (0, 1, 3):
        [entry] = h.entries(run.id, f"each[{i}]")
        assert entry.status is NodeStatus.COMPLETED
        assert h.output(run.id, f"each[{i}]") == f"item {i + 1} pid={os.getpid()}\n"  # the worker ran it
    [failed] = h.entries(run.id, "each[2]")
    assert failed.status is NodeStatus.FAILED and "three fails" in (failed.error or "")


SUB_CHILD = """
name: sub-child
inputs:
  n: {type: integer}
nodes:
  - id: work
    bash: echo "child {{ inputs.n }} pid=$PPID"
    replay: idempotent
"""

SUB_PARENT = """
name: sub-parent
nodes:
  - id: each
    map: {items: [1, 2, 3], as: n, max_parallel: 2}
    workflow: sub-child
    with: {n: "{{ n }}"}
"""


async def test_map_over_a_sub_workflow_runs_each_childs_steps_on_the_worker(cluster: Cluster) -> None:
    h = cluster.harness
    h.write("sub-child.yaml", SUB_CHILD)
    h.write("sub-parent.yaml", SUB_PARENT)

    run = await h.run("sub-parent")

    assert run.status is RunStatus.COMPLETED, run.reason
    children = sorted(h.store.runs.child_runs([run.id]), key=lambda r: r.parent_node or "")
    assert [c.parent_node for c in children] == ["each[0]", "each[1]", "each[2]"]
    for i, child in enumerate(children):
        assert child.status is RunStatus.COMPLETED
        assert h.output(child.id, "work") == f"child {i + 1} pid={os.getpid()}\n"  # the worker ran it
    outputs = json.loads(h.output(run.id, "each"))
    assert [o["outputs"]["work"] for o in outputs] == [f"child {i} pid={os.getpid()}\n" for i in (1, 2, 3)]
