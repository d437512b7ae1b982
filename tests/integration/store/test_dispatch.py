"""The `Dispatch` role of `SqlStore` on PostgreSQL and the worker's `WorkerJournal`: the writes a
`baton worker` makes per step (the claim, then its result in one statement) and the replica's
read of settled entries."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from core.errors import InvalidTransition
from core.store.port import StepEntry
from core.store.records import NodeStatus
from core.store.repository import SqlStore
from core.store.settled_reads import SettledReads
from core.store.worker_journal import WorkerJournal
from tests.integration.store.conftest import Clock, run_factory

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_store(postgres_url: str, clock: Clock) -> Iterator[SqlStore]:
    with SqlStore(postgres_url, clock=clock) as opened:
        opened.migrate()
        yield opened


@pytest.fixture
async def journal(postgres_url: str, clock: Clock) -> AsyncIterator[WorkerJournal]:
    async with WorkerJournal(postgres_url, size=2, clock=clock) as opened:
        yield opened


def _queued(store: SqlStore, run_id: str, *nodes: str) -> list[int]:
    """`queued` entries for `nodes` (no job queue: the defer writes nothing)."""
    handoffs = [
        StepEntry(
            run_id=run_id, node_id=n, cache_key=f"k-{n}", components={"n": n}, attempt=1, idempotency_key=None
        )
        for n in nodes
    ]

    def no_jobs(_connection: Any, entry_ids: list[int]) -> list[int]:
        return [-entry_id for entry_id in entry_ids]

    return [entry_id for entry_id, _ in store.dispatch.journal_queue_many(handoffs, no_jobs)]


async def test_a_claim_is_a_compare_and_swap_from_queued(pg_store: SqlStore, journal: WorkerJournal) -> None:
    run = run_factory(pg_store)()
    [entry_id] = _queued(pg_store, run.id, "a")

    assert await journal.claim(entry_id) is True
    assert await journal.claim(entry_id) is False  # a redelivered job: not ours any more
    assert pg_store.dispatch.journal_unqueue(entry_id, "gone") is False  # the replica loses to the claim
    assert pg_store.dispatch.journal_entries([entry_id])[entry_id].status is NodeStatus.STARTED


async def test_a_result_writes_its_blobs_and_settles_the_entry_once(
    pg_store: SqlStore, journal: WorkerJournal
) -> None:
    run = run_factory(pg_store)()
    [entry_id] = _queued(pg_store, run.id, "a")
    await journal.claim(entry_id)

    digest = await journal.settle(
        entry_id,
        status=NodeStatus.COMPLETED,
        output=b"out\n",
        tokens_in=3,
        tokens_out=4,
        artifacts={"files/a.txt": b"A", "files/b.txt": b"out\n"},  # one blob shared with the output
    )

    entry = pg_store.dispatch.journal_entries([entry_id])[entry_id]
    assert entry.status is NodeStatus.COMPLETED
    assert digest is not None and entry.output_digest == digest
    assert (entry.tokens_in, entry.tokens_out) == (3, 4)
    assert pg_store.blobs.get_blob(digest) == b"out\n"
    assert {p: pg_store.blobs.get_blob(d) for p, d in entry.artifacts.items()} == {
        "files/a.txt": b"A",
        "files/b.txt": b"out\n",
    }
    with pytest.raises(InvalidTransition):  # settled once: a second result is refused
        await journal.settle(entry_id, status=NodeStatus.FAILED, error="late")
    assert pg_store.dispatch.journal_entries([entry_id])[entry_id].status is NodeStatus.COMPLETED


@pytest.mark.parametrize(
    ("output", "artifacts"),
    [
        (b"only an output", {}),
        (None, {"files/only.txt": b"only an artifact"}),
        (b"same bytes", {"files/same.txt": b"same bytes"}),  # one blob, twice
        (None, {}),
    ],
    ids=["output", "artifact", "shared", "none"],
)
async def test_a_result_of_one_blob_or_none_writes_it_once(
    pg_store: SqlStore, journal: WorkerJournal, output: bytes | None, artifacts: dict[str, bytes]
) -> None:
    """A result of one blob sends it as plain parameters (`_SETTLE_ONE_BLOB`), other results as
    arrays: the entry, the blob and the refusal of a second result are the same either way (with
    a job finished too: `test_worker_round_trips.py`)."""
    run = run_factory(pg_store)()
    [entry_id] = _queued(pg_store, run.id, "a")
    await journal.claim(entry_id)
    status = NodeStatus.COMPLETED if output is not None else NodeStatus.FAILED

    digest = await journal.settle(entry_id, status=status, output=output, artifacts=artifacts)

    entry = pg_store.dispatch.journal_entries([entry_id])[entry_id]
    assert (entry.status, entry.output_digest) == (status, digest)
    if output is not None:
        assert digest == hashlib.sha256(output).hexdigest()
        assert pg_store.blobs.get_blob(digest) == output
    assert {p: pg_store.blobs.get_blob(d) for p, d in entry.artifacts.items()} == artifacts
    with pytest.raises(InvalidTransition):
        await journal.settle(entry_id, status=NodeStatus.FAILED, output=b"late")
    assert pg_store.blobs.get_blobs([hashlib.sha256(b"late").hexdigest()]) == {}


async def test_a_result_for_an_entry_never_claimed_is_refused_and_writes_nothing(
    pg_store: SqlStore, journal: WorkerJournal
) -> None:
    run = run_factory(pg_store)()
    [entry_id] = _queued(pg_store, run.id, "a")

    with pytest.raises(InvalidTransition):
        await journal.settle(entry_id, status=NodeStatus.COMPLETED, output=b"never claimed")

    entry = pg_store.dispatch.journal_entries([entry_id])[entry_id]
    assert entry.status is NodeStatus.QUEUED
    assert entry.output_digest is None
    assert pg_store.blobs.get_blobs([hashlib.sha256(b"never claimed").hexdigest()]) == {}
    with pytest.raises(ValueError):
        await journal.settle(entry_id, status=NodeStatus.STARTED)


async def test_the_replica_reads_only_settled_entries_with_their_outputs(
    pg_store: SqlStore, journal: WorkerJournal
) -> None:
    run = run_factory(pg_store)()
    queued, started, done, failed = _queued(pg_store, run.id, "q", "s", "d", "f")
    for entry_id in (started, done, failed):
        await journal.claim(entry_id)
    await journal.settle(done, status=NodeStatus.COMPLETED, output=b"result")
    await journal.settle(failed, status=NodeStatus.FAILED, error="exit 1")

    found = pg_store.dispatch.journal_settled([queued, started, done, failed, 999_999])

    assert sorted(found) == [done, failed]
    entry, output = found[done]
    assert (entry.node_id, entry.status, output) == ("d", NodeStatus.COMPLETED, b"result")
    assert entry.components == {"n": "d"}
    entry, output = found[failed]
    assert (entry.status, entry.error, output) == (NodeStatus.FAILED, "exit 1", None)
    assert pg_store.dispatch.journal_settled([]) == {}


async def test_settled_reads_on_the_event_loop_read_what_journal_settled_reads(
    pg_store: SqlStore, journal: WorkerJournal, postgres_url: str
) -> None:
    """`SettledReads` (the replica's reads on its event loop) is `journal_settled` without the
    thread: the same entries (notes, components, artifacts, errors) with the same outputs."""
    run = run_factory(pg_store)()
    queued, started, done, failed, with_files = _queued(pg_store, run.id, "q", "s", "d", "f", "a")
    for entry_id in (started, done, failed, with_files):
        await journal.claim(entry_id)
    await journal.settle(done, status=NodeStatus.COMPLETED, output=b"result \x00\xff", tokens_in=2)
    await journal.settle(failed, status=NodeStatus.FAILED, error="exit 1")
    await journal.settle(with_files, status=NodeStatus.COMPLETED, output=b"o", artifacts={"x/y.txt": b"Y"})
    ids = [queued, started, done, failed, with_files, 999_999]

    async with SettledReads(postgres_url) as reads:
        found = await reads.settled(ids)
        assert await reads.settled([]) == {}

    assert found == pg_store.dispatch.journal_settled(ids)
    assert sorted(found) == [done, failed, with_files]
    assert found[done][1] == b"result \x00\xff" and found[failed][1] is None
    assert found[with_files][0].artifacts == {"x/y.txt": hashlib.sha256(b"Y").hexdigest()}


def test_a_hand_off_batch_returns_each_steps_entry_in_order_and_is_all_or_nothing(pg_store: SqlStore) -> None:
    first, second = run_factory(pg_store)(), run_factory(pg_store)()
    handoffs = [
        StepEntry(run_id=run.id, node_id=node, cache_key=f"k-{node}", components={"c": [1]}, attempt=1,
                idempotency_key="key" if node == "b" else None)
        for node in ("b", "a") for run in (first, second)
    ]  # fmt: skip
    deferred: list[list[int]] = []

    def defer(_connection: Any, entry_ids: list[int]) -> list[int]:
        deferred.append(entry_ids)
        return [1000 + i for i in range(len(entry_ids))]

    written = pg_store.dispatch.journal_queue_many(handoffs, defer)

    assert [job for _, job in written] == [1000, 1001, 1002, 1003]
    assert deferred == [[entry for entry, _ in written]]
    entries = pg_store.dispatch.journal_entries([entry for entry, _ in written])
    for handoff, (entry_id, _) in zip(handoffs, written, strict=True):
        entry = entries[entry_id]
        assert (entry.run_id, entry.node_id) == (handoff.run_id, handoff.node_id)
        assert entry.status is NodeStatus.QUEUED
        assert (entry.components, entry.idempotency_key) == ({"c": [1]}, handoff.idempotency_key)

    def failing(_connection: Any, entry_ids: list[int]) -> list[int]:
        raise RuntimeError("the queue refused the jobs")

    late = StepEntry(
        run_id=first.id, node_id="late", cache_key="k", components={}, attempt=1, idempotency_key=None
    )
    with pytest.raises(RuntimeError):
        pg_store.dispatch.journal_queue_many([late], failing)
    assert [e.node_id for e in pg_store.steps.journal([first.id])] == ["b", "a"]  # no `late` entry
