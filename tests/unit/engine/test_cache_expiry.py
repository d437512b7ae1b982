"""Cache retention (`BATON_CACHE_RETENTION_DAYS`): which results expire and how a miss says so.

A pure step's result last used before the cut-off is no longer served and misses with "cache
entry expired"; an unsafe or idempotent step's result, an approval's decision, and a pure
result such a kept step was computed from are served whatever their age."""

from __future__ import annotations

from typing import Any

from core.engine.cache_expiry import apply_retention, expiring
from core.engine.cache_key import CACHE_EXPIRED, NO_EARLIER_RESULT
from core.engine.journal_index import JournalIndex
from core.engine.prepared import prepare
from core.engine.tools import ToolRegistry
from core.store.records import JournalEntry, NodeStatus
from core.workflows.loader import load_workflow_text

DAY = 86_400.0
NOW = 1_000 * DAY

WORKFLOW = """\
name: w
nodes:
  - id: listing
    bash: ls
    replay: pure
  - id: send
    depends_on: [listing]
    bash: send-mail
    replay: unsafe
  - id: charge
    bash: charge-card
    replay: idempotent
  - id: fetch
    bash: curl -s example.org
    replay: pure
  - id: digest
    depends_on: [fetch]
    bash: sha256sum
    replay: pure
  - id: review
    depends_on: [digest]
    approval: ok?
  - id: each
    map: {items: [1, 2], as: n}
    bash: echo {{ n }}
    replay: pure
"""


def _done(entry_id: int, run: str, node: str, at: float, **kw: Any) -> JournalEntry:
    return JournalEntry(
        id=entry_id, run_id=run, node_id=node, attempt=1, cache_key="k-" + node,
        components={"definition": "d", "node": node}, status=NodeStatus.COMPLETED,
        started_at=at, finished_at=at, output_digest="o-" + node, **kw,
    )  # fmt: skip


def _prepared(text: str = WORKFLOW) -> Any:
    return prepare(load_workflow_text(text), ToolRegistry())


def test_a_pure_result_unused_for_longer_than_the_retention_misses_and_says_why() -> None:
    old = NOW - 40 * DAY
    index = JournalIndex("r", [_done(1, "r", "each[0]", old), _done(2, "r", "each[1]", NOW - DAY)])
    apply_retention(index, _prepared(), 30 * DAY, NOW)
    assert index.lookup("k-each[0]") is None
    assert index.miss_reason("each[0]", "k-each[0]", {"definition": "d", "node": "each[0]"},
                             memoize=True) == CACHE_EXPIRED  # fmt: skip
    served = index.lookup("k-each[1]")  # used yesterday
    assert served is not None and served.id == 2
    assert index.miss_reason("other", "k-other", {}, memoize=True) == NO_EARLIER_RESULT


def test_a_copy_into_a_run_that_re_used_it_counts_as_a_use() -> None:
    entries = [
        _done(1, "parent", "fetch", NOW - 90 * DAY),
        _done(2, "middle", "fetch", NOW - 2 * DAY, cached_from="parent"),  # re-used two days ago
    ]
    index = apply_retention(JournalIndex("child", entries), _prepared(), 30 * DAY, NOW)
    served = index.lookup("k-fetch")
    assert served is not None and served.cached_from == "parent"
    alone = apply_retention(JournalIndex("child", entries[:1]), _prepared(), 30 * DAY, NOW)
    assert alone.lookup("k-fetch") is None


def test_unsafe_idempotent_and_approval_results_and_what_they_were_computed_from_never_expire() -> None:
    ancient = NOW - 400 * DAY
    nodes = ["listing", "send", "charge", "fetch", "digest", "review"]
    entries = [_done(i, "r", node, ancient) for i, node in enumerate(nodes, start=1)]
    index = apply_retention(JournalIndex("r", entries), _prepared(), 30 * DAY, NOW)
    for kept in ("send", "charge", "review", "listing", "fetch", "digest"):
        assert index.lookup("k-" + kept) is not None, kept
    # without the unsafe step's result, nothing protects the listing: it expires
    alone = [e for e in entries if e.node_id not in ("send", "review")]
    index = apply_retention(JournalIndex("r", alone), _prepared(), 30 * DAY, NOW)
    assert index.lookup("k-listing") is None and index.lookup("k-fetch") is None
    assert index.lookup("k-digest") is None and index.lookup("k-charge") is not None


def test_which_nodes_may_expire() -> None:
    index = JournalIndex("r", [_done(1, "r", "send", NOW), _done(2, "r", "review", NOW)])
    expires = expiring(_prepared(), index)
    assert [n for n in ("listing", "send", "charge", "fetch", "digest", "review") if expires(n)] == []
    assert expires("each") and expires("each[1]")
    nothing_ran = expiring(_prepared(), JournalIndex("r", []))
    assert {n for n in ("listing", "fetch", "digest", "each[0]") if nothing_ran(n)} == {
        "listing", "fetch", "digest", "each[0]"
    }
    assert not nothing_ran("send") and not nothing_ran("charge") and not nothing_ran("review")


def test_without_a_retention_nothing_expires() -> None:
    index = apply_retention(JournalIndex("r", [_done(1, "r", "fetch", 0.0)]), _prepared(), None, NOW)
    assert index.lookup("k-fetch") is not None
