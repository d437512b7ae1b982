"""Cache retention (`BATON_CACHE_RETENTION_DAYS`): which cached results may expire.

A result whose cache key was last used (computed, or copied into a run that re-used it)
longer ago than the retention is no longer served: the step runs again and says why, "cache
entry expired" (`JournalIndex.expire`). Only results that are safe to compute again expire:

- a `pure` step's result expires: running it again has no effect outside its output;
- an `unsafe` step's result never expires: running it again could fire its side effect twice;
- an `idempotent` step's result never expires either: it would run again with the same
  idempotency key, but the receiver remembers a key for a limited time (a payment API keeps it
  a day), so after days it may not recognise the repeat;
- an approval's decision never expires: a person decided it (a decision is not re-used by
  another run anyway);
- a pure result that a kept result downstream was computed from (an unsafe or idempotent step,
  or a decision, with an entry in the run or its lineage) never expires either: computed again
  it could come out different (a time stamp, a listing), change that step's key, and run it
  again, which is what the rules above forbid.

The entries themselves stay in their runs' history (`status` still shows them) until the run is
pruned (`bot/retention.py`); expiry only decides what a later execution or `plan` re-uses.
"""

from __future__ import annotations

from collections.abc import Callable

from core.engine.journal_index import JournalIndex
from core.engine.mapping import item_id, split_item_id
from core.engine.prepared import PreparedNode, PreparedWorkflow
from core.store.records import ReplayClass

DAY = 86_400.0


def _kept(pn: PreparedNode) -> bool:
    """A node whose own result never expires."""
    return pn.kind == "approval" or pn.replay is not ReplayClass.PURE


def _ran(index: JournalIndex, pn: PreparedNode) -> bool:
    """The node (or, for a map node, its first item) has an entry in the run or its lineage."""
    return index.latest(pn.id) is not None or (
        pn.node.map is not None and index.latest(item_id(pn.id, 0)) is not None
    )


def expiring(prepared: PreparedWorkflow, index: JournalIndex) -> Callable[[str], bool]:
    """Whether a journal node id (a node, or an item `deploy[3]` of a map node) may expire."""
    protected: set[str] = set()
    stack = [pn.id for pn in prepared.nodes.values() if _kept(pn) and _ran(index, pn)]
    while stack:  # every ancestor of a kept result that exists
        for dep in prepared.nodes[stack.pop()].deps:
            if dep not in protected:
                protected.add(dep)
                stack.append(dep)
    may = frozenset(n for n, pn in prepared.nodes.items() if not _kept(pn) and n not in protected)

    def expires(node_id: str) -> bool:
        split = split_item_id(node_id)
        return (split[0] if split is not None else node_id) in may

    return expires


def apply_retention(
    index: JournalIndex, prepared: PreparedWorkflow, retention: float | None, now: float
) -> JournalIndex:
    """`index` serving no result that expired under `retention` (seconds; None: keep all)."""
    if retention is not None:
        index.expire(now - retention, expiring(prepared, index))
    return index
