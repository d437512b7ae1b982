"""Replay classes, idempotency keys, retries and the journal index's cache rules."""

from __future__ import annotations

from typing import Any

from core.commands.hints import hint
from core.engine.cache_key import (
    EARLIER_ATTEMPT_FAILED,
    EARLIER_ATTEMPT_INTERRUPTED,
    MEMOIZE_FALSE,
    NO_EARLIER_RESULT,
)
from core.engine.journal_index import INVALIDATED_MARKER, MARKER_KEY, JournalIndex
from core.engine.journal_writer import INTERRUPTED
from core.engine.replay import (
    Recovery,
    attempts_allowed,
    backoff_seconds,
    idempotency_key,
    recovery_for,
    replay_class,
    replay_unsafe,
)
from core.errors import Next
from core.store.records import JournalEntry, NodeStatus, ReplayClass
from core.workflows.loader import load_workflow_text
from core.workflows.model import RetryPolicy

WORKFLOW = load_workflow_text(
    """
name: r
nodes:
  - id: sh
    bash: echo
  - id: ask
    prompt: hi
  - id: post
    tool: post_release
  - id: strict
    tool: cheap
    replay: unsafe
"""
)


def test_kind_defaults_and_tool_declarations() -> None:
    assert replay_class(WORKFLOW, WORKFLOW.node("sh")) is ReplayClass.UNSAFE
    assert replay_class(WORKFLOW, WORKFLOW.node("ask")) is ReplayClass.PURE
    # the tool's own class applies when the YAML says nothing
    assert replay_class(WORKFLOW, WORKFLOW.node("post"), ReplayClass.IDEMPOTENT) is ReplayClass.IDEMPOTENT
    # the YAML may make a tool stricter, never looser
    assert replay_class(WORKFLOW, WORKFLOW.node("strict"), ReplayClass.PURE) is ReplayClass.UNSAFE


def test_recovery_follows_the_table() -> None:
    assert recovery_for(ReplayClass.PURE) is Recovery.RERUN
    assert recovery_for(ReplayClass.IDEMPOTENT) is Recovery.RERUN_SAME_KEY
    assert recovery_for(ReplayClass.UNSAFE) is Recovery.ATTENTION


def test_automatic_retry_never_applies_to_unsafe_steps() -> None:
    policy = RetryPolicy(attempts=4, backoff=0.5)
    assert attempts_allowed(ReplayClass.PURE, policy) == 4
    assert attempts_allowed(ReplayClass.IDEMPOTENT, policy) == 4
    assert attempts_allowed(ReplayClass.UNSAFE, policy) == 1
    assert attempts_allowed(ReplayClass.PURE, None) == 1
    assert [backoff_seconds(policy, n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]


def test_idempotency_key_is_stable_per_lineage_node_and_key() -> None:
    key = idempotency_key("root1", "post", "k" * 64)
    assert key == idempotency_key("root1", "post", "k" * 64)
    assert len(key) == 32
    assert key != idempotency_key("root2", "post", "k" * 64)
    assert key != idempotency_key("root1", "other", "k" * 64)
    assert key != idempotency_key("root1", "post", "j" * 64)


def _entry(entry_id: int, run: str, node: str, key: str, status: NodeStatus, **kw: Any) -> JournalEntry:
    return JournalEntry(
        id=entry_id,
        run_id=run,
        node_id=node,
        attempt=kw.pop("attempt", 1),
        cache_key=key,
        components=kw.pop("components", {"definition": "d", "node": node}),
        status=status,
        started_at=0.0,
        output_digest=kw.pop("output_digest", "o" if status is NodeStatus.COMPLETED else None),
        **kw,
    )


def test_unsafe_error_names_the_step_and_the_next_step() -> None:
    error = replay_unsafe("run1", _entry(3, "run1", "send", "k", NodeStatus.STARTED))
    assert "`send` may have run" in error.message
    assert (error.run_id, error.node_id, error.next_step) == ("run1", "send", Next.RESOLVE)
    assert hint(error) == "Check what happened, then `/workflow resolve run1 send done|retry|fail`."


def test_index_prefers_own_results_and_serves_the_lineage() -> None:
    index = JournalIndex(
        "child",
        [
            _entry(1, "parent", "a", "ka", NodeStatus.COMPLETED),
            _entry(2, "parent", "b", "kb", NodeStatus.COMPLETED),
            _entry(3, "child", "a", "ka", NodeStatus.COMPLETED, cached_from="parent"),
        ],
    )
    own = index.lookup("ka")
    assert own is not None and own.run_id == "child"
    inherited = index.lookup("kb")
    assert inherited is not None and inherited.run_id == "parent"
    assert index.lookup("unknown") is None


def test_failed_and_started_entries_are_never_served() -> None:
    index = JournalIndex(
        "r",
        [
            _entry(1, "r", "bad", "kbad", NodeStatus.FAILED, output_digest="kept"),
            _entry(2, "r", "inflight", "kin", NodeStatus.STARTED, attempt=2),
        ],
    )
    assert index.lookup("kbad") is None
    assert index.miss_reason("bad", "kbad", {}, memoize=True) == EARLIER_ATTEMPT_FAILED
    dangling = index.dangling("inflight")
    assert dangling is not None and dangling.id == 2
    assert index.next_attempt("inflight") == 3
    assert index.miss_reason("new", "k", {}, memoize=True) == NO_EARLIER_RESULT
    assert index.miss_reason("bad", "kbad", {}, memoize=False) == MEMOIZE_FALSE


def test_a_step_re_run_after_a_crash_says_it_was_interrupted_not_failed() -> None:
    interrupted = INTERRUPTED.format(cls="pure")  # what recovery writes on an orphaned entry
    index = JournalIndex("r", [
        _entry(1, "r", "crashed", "kc", NodeStatus.FAILED, error=interrupted),
        _entry(2, "r", "open", "ko", NodeStatus.STARTED),
    ])
    assert index.miss_reason("crashed", "kc", {}, memoize=True) == EARLIER_ATTEMPT_INTERRUPTED
    assert index.miss_reason("open", "ko", {}, memoize=True) == EARLIER_ATTEMPT_INTERRUPTED
    assert "interrupted" in EARLIER_ATTEMPT_INTERRUPTED and "failed" not in EARLIER_ATTEMPT_INTERRUPTED


def test_an_invalidation_hides_earlier_results_in_the_whole_lineage() -> None:
    marker = {"marker": INVALIDATED_MARKER, "by": "console:ana"}
    entries = [
        _entry(1, "parent", "a", "ka", NodeStatus.COMPLETED),
        _entry(
            2, "child", "a", "ka", NodeStatus.INVALIDATED, invalidated_by="console:ana", cached_from="parent"
        ),
        _entry(3, "child", "a", MARKER_KEY, NodeStatus.FAILED, components=marker),
    ]
    index = JournalIndex("child", entries)
    assert index.lookup("ka") is None
    assert index.miss_reason("a", "ka", {}, memoize=True) == "invalidated by console:ana"
    assert index.dangling("a") is None  # markers are decisions, never in-flight steps
    rerun = _entry(4, "child", "a", "ka", NodeStatus.COMPLETED)
    again = JournalIndex("child", [*entries, rerun])
    served = again.lookup("ka")
    assert served is not None and served.id == 4
