"""The journal, lineage, invalidation and content-addressed blobs."""

from __future__ import annotations

import dataclasses
import hashlib
import threading

import pytest

from core.engine.cache_expiry import apply_retention
from core.engine.journal_index import JournalIndex
from core.engine.prepared import prepare
from core.engine.tools import ToolRegistry
from core.errors import InvalidTransition, RunNotFound, StoreError
from core.store.port import StepEntry, StepResult, Store
from core.store.records import MARKER_KEY, KeyNotes, NodeStatus, RunStatus
from core.workflows.loader import load_workflow_text
from tests.factories import invalidate
from tests.integration.store.conftest import Clock, MakeRun


def _start(store: Store, run_id: str, node_id: str, *, attempt: int = 1) -> int:
    return store.steps.journal_start(StepEntry(
        run_id=run_id,
        node_id=node_id,
        cache_key=hashlib.sha256(node_id.encode()).hexdigest(),
        components={"definition": {"bash": "echo hi"}, "inputs": {"version": "1.2"}},
        attempt=attempt,
        idempotency_key=f"{run_id}:{node_id}",
    ))


def test_journal_start_then_finish(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.RUNNING)
    entry_id = _start(store, run.id, "collect")
    (started,) = store.steps.journal([run.id])
    assert (started.id, started.status, started.finished_at, started.artifacts) == (
        entry_id,
        NodeStatus.STARTED,
        None,
        {},
    )
    assert started.components == {"definition": {"bash": "echo hi"}, "inputs": {"version": "1.2"}}
    assert started.idempotency_key == f"{run.id}:collect"

    output = store.blobs.put_blob(b"abc123 fix things\n")
    store.steps.journal_finish(
        entry_id,
        status=NodeStatus.COMPLETED,
        output_digest=output,
        tokens_in=12,
        tokens_out=34,
        artifacts={"dist/x.whl": "d" * 64},
    )
    (done,) = store.steps.journal([run.id])
    assert done.status is NodeStatus.COMPLETED and done.output_digest == output
    assert (done.tokens_in, done.tokens_out, done.artifacts) == (12, 34, {"dist/x.whl": "d" * 64})
    assert done.finished_at is not None and done.finished_at >= done.started_at


def test_finish_stores_the_blobs_it_names_in_the_same_call(store: Store, make_run: MakeRun) -> None:
    """The engine's unsafe steps: output and artifacts stored with the settled entry (one
    transaction); a second settle is refused, the blobs stay (content-addressed)."""
    run = make_run(RunStatus.RUNNING)
    entry_id = _start(store, run.id, "build")
    output, wheel = b"built\n", b"PK\x03\x04 wheel"
    digests = [hashlib.sha256(b).hexdigest() for b in (output, wheel)]
    store.steps.journal_finish(entry_id, status=NodeStatus.COMPLETED, output_digest=digests[0],
                               artifacts={"dist/x.whl": digests[1]},
                               blobs=[output, wheel, output])  # fmt: skip
    (done,) = store.steps.journal([run.id])
    assert done.status is NodeStatus.COMPLETED and done.output_digest == digests[0]
    assert store.blobs.get_blobs(digests) == {digests[0]: output, digests[1]: wheel}
    with pytest.raises(InvalidTransition):
        store.steps.journal_finish(entry_id, status=NodeStatus.FAILED, blobs=[b"late"])


def test_a_step_settles_once(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.RUNNING)
    entry_id = _start(store, run.id, "draft")
    store.steps.journal_finish(entry_id, status=NodeStatus.FAILED, error="exit 1")
    with pytest.raises(InvalidTransition) as info:
        store.steps.journal_finish(entry_id, status=NodeStatus.COMPLETED)
    assert info.value.message == f"step draft of run {run.id} is already failed"
    (entry,) = store.steps.journal([run.id])
    assert (entry.status, entry.error) == (NodeStatus.FAILED, "exit 1")


def test_journal_finish_rejects_non_final_statuses_and_unknown_entries(store: Store) -> None:
    with pytest.raises(ValueError, match="completed or failed"):
        store.steps.journal_finish(1, status=NodeStatus.STARTED)
    with pytest.raises(StoreError, match="Journal entry 999999 does not exist"):
        store.steps.journal_finish(999999, status=NodeStatus.COMPLETED)


def test_journal_start_for_an_unknown_run_is_a_store_error(store: Store) -> None:
    with pytest.raises(StoreError) as info:
        _start(store, "000000000000", "collect")
    assert info.value.message.startswith("The run store could not record a step start (")
    assert "\n" not in info.value.message
    assert info.value.__cause__ is not None
    # the hot path recovers: the next statement works
    assert store.blobs.put_blob(b"after the error")


def test_journal_reads_many_runs_oldest_first(store: Store, make_run: MakeRun) -> None:
    first, second, third = (make_run(RunStatus.RUNNING) for _ in range(3))
    ids = [_start(store, first.id, "a"), _start(store, second.id, "a"), _start(store, first.id, "b")]
    _start(store, third.id, "a")
    entries = store.steps.journal([second.id, first.id, first.id])
    assert [e.id for e in entries] == ids
    assert store.steps.journal([]) == []


def test_journal_record_cached_copies_results_with_their_origin(store: Store, make_run: MakeRun) -> None:
    origin = make_run(RunStatus.RUNNING)
    output = store.blobs.put_blob(b"notes")
    entry_id = _start(store, origin.id, "draft")
    store.steps.journal_finish(entry_id, status=NodeStatus.COMPLETED, output_digest=output, tokens_in=5)
    (source,) = store.steps.journal([origin.id])

    middle = make_run(RunStatus.RUNNING, resumed_from=origin.id)
    store.steps.journal_record_cached(middle.id, [source])
    (copied,) = store.steps.journal([middle.id])
    assert (copied.cached_from, copied.output_digest, copied.cache_key) == (
        origin.id,
        output,
        source.cache_key,
    )
    assert (copied.status, copied.tokens_in, copied.components, copied.notes) == (
        NodeStatus.COMPLETED,
        0,
        source.components,
        KeyNotes(saved_tokens=5),  # what re-using it saved
    )

    latest = make_run(RunStatus.RUNNING, resumed_from=middle.id)
    store.steps.journal_record_cached(latest.id, [copied])
    (again,) = store.steps.journal([latest.id])
    assert again.cached_from == origin.id  # the run that computed it
    # copied as stored
    assert (again.components, again.notes, again.tokens_in) == (copied.components, copied.notes, 0)
    store.steps.journal_record_cached(latest.id, [])


def test_journal_record_cached_copies_many_rows_as_stored_in_order(
    store: Store, make_run: MakeRun
) -> None:
    origin = make_run(RunStatus.RUNNING)
    for i in range(7):
        entry_id = store.steps.journal_start(StepEntry(
            run_id=origin.id,
            node_id=f"n{i}",
            cache_key=f"k{i}",
            components={"inputs": {"v": f"d{i}"}, "text": 'é"\n'},
            attempt=1,
            idempotency_key=f"idem{i}",
            notes=KeyNotes(reason="no earlier result", keyed_identity=True, items=7),
        ))
        store.steps.journal_finish(
            entry_id,
            status=NodeStatus.COMPLETED,
            output_digest=store.blobs.put_blob(f"out{i}".encode()),
            artifacts={f"dist/{i}.whl": "d" * 64} if i % 2 else None,
        )
    sources = store.steps.journal([origin.id])
    copy = make_run(RunStatus.RUNNING, resumed_from=origin.id)

    store.steps.journal_record_cached(copy.id, sources)

    copies = store.steps.journal([copy.id])
    fields = ("node_id", "attempt", "cache_key", "components", "notes", "output_digest", "idempotency_key",
              "artifacts")
    assert [tuple(getattr(c, f) for f in fields) for c in copies] == [
        tuple(getattr(s, f) for f in fields) for s in sources
    ]
    assert {(c.status, c.cached_from, c.tokens_in, c.error) for c in copies} == {
        (NodeStatus.COMPLETED, origin.id, 0, None)
    }
    assert all(c.run_id == copy.id and c.finished_at is not None for c in copies)


def test_journal_outline_is_the_journal_without_key_components(store: Store, make_run: MakeRun) -> None:
    run, other = make_run(RunStatus.RUNNING), make_run(RunStatus.RUNNING)
    notes = KeyNotes(reason="no earlier result", skipped="`ship` is false", keyed_identity=True,
                     child="r_child", items=3)
    noted = store.steps.journal_start(StepEntry(run_id=run.id, node_id="a", cache_key="k-a", attempt=1,
                                      idempotency_key="i-a", notes=notes,
                                      components={"definition": {"bash": "echo hi"}, "text": 'é"\n'}))
    store.steps.journal_finish(noted, status=NodeStatus.COMPLETED, output_digest=store.blobs.put_blob(b"a"),
                               tokens_in=4, tokens_out=2, artifacts={"dist/a.whl": "d" * 64})
    store.steps.journal_finish(_start(store, run.id, "b"), status=NodeStatus.FAILED, error="boom")
    _start(store, other.id, "b")
    (source,) = store.steps.journal([run.id])[:1]
    copy = make_run(RunStatus.RUNNING, resumed_from=run.id)
    store.steps.journal_record_cached(copy.id, [source])  # notes.saved_tokens = 6, written by the database
    marker = {"marker": "rejected", "by": "ana", "node": "c", "reason": "not now", "_reason": "noted"}
    with store.transaction() as tx:
        tx.journal_note(run_id=run.id, node_id="c", cache_key=MARKER_KEY, components=marker, error="rejected")

    full = store.steps.journal([copy.id, run.id])
    outline = store.steps.journal_outline([copy.id, run.id, run.id])

    # every entry as `journal` reads it, notes included, with its key components left out but a
    # marker's (its decision)
    assert outline == [dataclasses.replace(e, components=e.components if e.cache_key == MARKER_KEY else {})
                       for e in full]
    copied_notes = dataclasses.replace(notes, saved_tokens=6)
    assert [e.notes for e in outline if e.node_id == "a"] == [notes, copied_notes]
    assert outline[-1].components == {"marker": "rejected", "by": "ana", "node": "c", "reason": "not now"}
    assert outline[-1].notes == KeyNotes(reason="noted")
    assert store.steps.journal_outline([]) == []


def test_lineage_follows_resumed_from(store: Store, make_run: MakeRun) -> None:
    root = make_run()
    child = make_run(resumed_from=root.id)
    grandchild = make_run(resumed_from=child.id)
    assert store.steps.lineage(grandchild.id) == [grandchild.id, child.id, root.id]
    assert store.steps.lineage(root.id) == [root.id]
    with pytest.raises(RunNotFound):
        store.steps.lineage("000000000000")


def test_invalidate_marks_completed_entries_of_those_nodes(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.RUNNING)
    other = make_run(RunStatus.RUNNING)
    for run_id in (run.id, other.id):
        for node in ("collect", "draft", "review"):
            store.steps.journal_finish(_start(store, run_id, node), status=NodeStatus.COMPLETED)
    store.steps.journal_finish(_start(store, run.id, "draft", attempt=2), status=NodeStatus.FAILED)
    _start(store, run.id, "draft", attempt=3)

    assert invalidate(store, run.id, ["draft", "review"], actor="slack:U9") == 2
    by_node = {(e.node_id, e.attempt): e for e in store.steps.journal([run.id])}
    assert by_node[("draft", 1)].status is NodeStatus.INVALIDATED
    assert by_node[("draft", 1)].invalidated_by == "slack:U9"
    assert by_node[("review", 1)].status is NodeStatus.INVALIDATED
    assert by_node[("collect", 1)].status is NodeStatus.COMPLETED
    assert by_node[("draft", 2)].status is NodeStatus.FAILED
    assert by_node[("draft", 3)].status is NodeStatus.STARTED
    assert all(e.status is NodeStatus.COMPLETED for e in store.steps.journal([other.id]))
    assert invalidate(store, run.id, ["draft"], actor="slack:U9") == 0
    assert invalidate(store, run.id, [], actor="slack:U9") == 0


def test_blobs_round_trip_and_are_stored_once(store: Store) -> None:
    payloads = [b"", b"\x00\xff binary", "ünïcode ✓".encode(), b"x" * 200_000]
    digests = [store.blobs.put_blob(data) for data in payloads]
    assert digests == [hashlib.sha256(data).hexdigest() for data in payloads]
    assert store.blobs.put_blob(payloads[1]) == digests[1]
    for digest, data in zip(digests, payloads, strict=True):
        assert store.blobs.get_blob(digest) == data
    assert store.blobs.get_blobs(
        [*digests, "f" * 64, digests[0]]
    ) == dict(zip(digests, payloads, strict=True))
    assert store.blobs.get_blobs([]) == {}
    with pytest.raises(KeyError):
        store.blobs.get_blob("f" * 64)


def test_runs_with_args_finds_runs_by_args_prefix_and_never_other_blobs(
    store: Store, make_run: MakeRun
) -> None:
    args = [store.blobs.put_blob(f'{{"n":{n}}}'.encode()) for n in range(3)]
    output = store.blobs.put_blob(b"a step's output, not anyone's args")
    first = make_run(args_digest=args[0], requester="slack:U1")
    again = make_run(args_digest=args[0], requester="slack:U1")  # same args, same requester
    other = make_run(args_digest=args[0], requester="slack:U2")
    second = make_run(args_digest=args[1], workflow="deploy")

    found = store.runs.runs_with_args(f"{args[0][:8].upper()}")
    assert {r.id for r in found} == {min(first.id, again.id), other.id}  # one per (args, workflow, who)
    assert [r.id for r in store.runs.runs_with_args(args[1][:6])] == [second.id]
    assert store.runs.runs_with_args(args[2][:8]) == []  # a blob no run uses as args
    assert store.runs.runs_with_args(output[:8]) == []  # a step's output is never an args handle
    assert store.runs.runs_with_args("xyz") == []
    assert len(store.runs.runs_with_args(args[0][:4], limit=1)) == 1


def test_hot_path_works_from_several_threads(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.RUNNING)
    errors: list[BaseException] = []

    def step(n: int) -> None:
        try:
            for i in range(20):
                entry_id = _start(store, run.id, f"t{n}-{i}")
                store.steps.journal_finish(
                    entry_id, status=NodeStatus.COMPLETED, output_digest=store.blobs.put_blob(b"%d" % n)
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=step, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    entries = store.steps.journal([run.id])
    assert len(entries) == 80 and all(e.status is NodeStatus.COMPLETED for e in entries)


def test_journal_complete_stores_the_output_and_a_completed_entry(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.RUNNING)
    result = StepResult(
        run_id=run.id,
        node_id="lint",
        cache_key="k" * 64,
        components={"definition": {"tool": "lint"}},
        attempt=2,
        idempotency_key=f"{run.id}:lint",
        output=b"clean\n",
        tokens_in=3,
        tokens_out=4,
    )
    store.steps.journal_complete_many([result])
    digest = result.digest
    (done,) = store.steps.journal([run.id])
    assert digest == hashlib.sha256(b"clean\n").hexdigest() and store.blobs.get_blob(digest) == b"clean\n"
    assert (done.node_id, done.status, done.attempt) == ("lint", NodeStatus.COMPLETED, 2)
    assert done.output_digest == digest
    assert (done.tokens_in, done.tokens_out, done.components) == (3, 4, {"definition": {"tool": "lint"}})
    assert done.finished_at is not None and done.finished_at == done.started_at
    with pytest.raises(InvalidTransition):
        store.steps.journal_finish(done.id, status=NodeStatus.FAILED, error="late")  # already settled


def test_journal_complete_is_all_or_nothing(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.RUNNING)
    with pytest.raises(StoreError, match="record step results"):
        store.steps.journal_complete_many([StepResult(
            run_id="nosuchrun01",  # the entry's foreign key fails after the blob was inserted
            node_id="lint",
            cache_key="k" * 64,
            components={},
            attempt=1,
            idempotency_key=None,
            output=b"never kept",
        )])  # fmt: skip
    with pytest.raises(KeyError):
        store.blobs.get_blob(hashlib.sha256(b"never kept").hexdigest())  # rolled back with the entry
    kept = StepResult(  # the hot path's connection is usable again
        run_id=run.id, node_id="lint", cache_key="k" * 64, components={}, attempt=1,
        idempotency_key=None, output=b"kept",
    )  # fmt: skip
    store.steps.journal_complete_many([kept])
    assert [e.output_digest for e in store.steps.journal([run.id])] == [kept.digest]


def test_a_group_commit_keeps_all_of_its_results_or_none(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.RUNNING)
    good = StepResult(run.id, "a", "k" * 64, {}, 1, None, b"first")
    bad = StepResult("nosuchrun01", "b", "k" * 64, {}, 1, None, b"second")  # foreign key fails
    with pytest.raises(StoreError, match="record step results"):
        store.steps.journal_complete_many([good, bad])
    assert store.steps.journal([run.id]) == []
    with pytest.raises(KeyError):
        store.blobs.get_blob(good.digest)  # rolled back with the entries
    same = StepResult(run.id, "c", "k" * 64, {}, 1, None, b"first")  # same output: one blob, two entries
    store.steps.journal_complete_many([good, same])
    assert [(e.node_id, e.output_digest) for e in store.steps.journal([run.id])] == [
        ("a", good.digest),
        ("c", good.digest),
    ]
    assert store.blobs.get_blob(good.digest) == b"first"


def test_a_re_used_result_is_stamped_with_the_time_of_its_re_use(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    """What cache retention (`BATON_CACHE_RETENTION_DAYS`) counts as a result's last use: the
    copy a re-using run records is finished when it is re-used; the original keeps its time."""
    origin = make_run(RunStatus.RUNNING)
    computed_at = clock.now
    plain, spent = _start(store, origin.id, "list"), _start(store, origin.id, "draft")
    store.steps.journal_finish(plain, status=NodeStatus.COMPLETED, output_digest=store.blobs.put_blob(b"a"))
    store.steps.journal_finish(
        spent, status=NodeStatus.COMPLETED, output_digest=store.blobs.put_blob(b"b"), tokens_in=3
    )
    sources = store.steps.journal([origin.id])
    assert [e.finished_at for e in sources] == [pytest.approx(computed_at, abs=1)] * 2

    clock.advance(40 * DAY)
    child = make_run(RunStatus.RUNNING, resumed_from=origin.id)
    store.steps.journal_record_cached(child.id, sources)  # both ways of copying: as stored, and with tokens
    copies = store.steps.journal([child.id])
    now = pytest.approx(clock.now, abs=1)  # the store's clock moves on by a microsecond per write
    stamps = [(e.node_id, e.started_at, e.finished_at) for e in copies]
    assert stamps == [("list", now, now), ("draft", now, now)]
    assert [e.finished_at for e in store.steps.journal([origin.id])] == [e.finished_at for e in sources]

    # read back as a resume of the child reads them: re-used 40 days after they were computed,
    # so a 30-day retention still serves them; the origin's own copy alone would have expired
    lineage = store.steps.lineage(child.id)
    prepared = prepare(load_workflow_text(_PURE), ToolRegistry())
    index = apply_retention(
        JournalIndex(child.id, store.steps.journal(lineage)), prepared, 30 * DAY, clock.now
    )
    assert all(index.lookup(e.cache_key) is not None for e in sources)
    clock.advance(31 * DAY)
    index = apply_retention(
        JournalIndex(child.id, store.steps.journal(lineage)), prepared, 30 * DAY, clock.now
    )
    assert all(index.lookup(e.cache_key) is None for e in sources)


DAY = 86_400.0
_PURE = """\
name: w
nodes:
  - id: list
    bash: ls
    replay: pure
  - id: draft
    bash: echo draft
    replay: pure
"""
