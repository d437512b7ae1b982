"""`map:`: one node run once per item, each item its own step.

    - id: deploy
      map: {items: "{{ nodes.hosts.output }}", as: host, max_parallel: 4, on_failure: continue}
      bash: ./deploy.sh {{ host }}

The executor (`executor.py`) decides a map node like any other (its own cache key, `when:`,
the cache hit of the whole node), then renders its items (`items_of`): none -> the node is
skipped with the reason; more than `max_items` -> it fails with one line. Otherwise
`MapRun` runs the items:

- item `i` is the step `deploy[i]`: its own journal row (`item_id`), its cache key (the node's
  components plus the digest of the item's canonical JSON value, `cache_key.item_components`;
  never its position, so an item added before it leaves it cached), its idempotency key (from
  that key) and the node's replay class; an unsafe item left open by a process that stopped
  needs attention alone;
- at most `max_parallel` items of the node run at once, and at most the run's
  `BATON_MAX_PARALLEL` items of all its map nodes together; `on_failure: fail_fast` starts no
  item after a failure; `continue` runs them all;
- the node's output is the list of the item outputs in item order, a failed item standing as
  `{failed: true, error}`; any failed item fails the node once all (started) items ended.

Progress and the node table show one row per map node, counted from the item rows
(`item_counts`), never one row per item.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from core.engine import replay
from core.engine.cache_key import cache_key, item_components
from core.engine.events import EventKind
from core.engine.journal_index import JournalIndex
from core.engine.node_values import decode_item
from core.engine.prepared import PreparedNode
from core.engine.steps import Attempt, Attention, Completed, Execution, Step, StepRunner, Waiting
from core.errors import ReplayUnsafe
from core.store.records import JournalEntry, NodeStatus
from core.workflows.args import canonical_json
from core.workflows.model import Node
from core.workflows.templating import References, template_references, templated_fields

_NAMED = 5  # failed items a node's error names (the rest are counted)
_DETAIL = 160  # characters of the first failed item's error in the node's
_ITEM_ID = re.compile(r"^(?P<node>[A-Za-z_][A-Za-z0-9_-]*)\[(?P<index>\d+)\]$")


def item_id(node_id: str, index: int) -> str:
    """The journal node id of item `index` of a map node: `deploy[3]`."""
    return f"{node_id}[{index}]"


def split_item_id(node_id: str) -> tuple[str, int] | None:
    """`("deploy", 3)` for `deploy[3]`; None for a node id that names no item."""
    match = _ITEM_ID.match(node_id)
    return (match["node"], int(match["index"])) if match else None


class ItemsError(ValueError):
    """The items of a map node cannot be run (not a list, too many); the message is one line."""


def items_of(node_id: str, rendered: Any, max_items: int) -> list[Any]:
    """The items a map node's `items:` rendered to, checked: a list of at most `max_items`."""
    if not isinstance(rendered, list | tuple):
        shown = type(rendered).__name__ if rendered is not None else "nothing"
        raise ItemsError(f"`map.items` of `{node_id}` gave {shown}, not a list")
    if len(rendered) > max_items:
        raise ItemsError(
            f"`map.items` of `{node_id}` gave {len(rendered)} items, more than max_items {max_items}"
        )
    return list(rendered)


@dataclass(frozen=True, slots=True)
class ItemCounts:
    """How far a map node's items are, from the item rows of the node table."""

    total: int
    ok: int = 0
    failed: int = 0
    running: int = 0

    @property
    def done(self) -> int:
        return self.ok + self.failed

    def text(self, started: str = "running") -> str:
        """`37/50 · 2 failed · 4 running` (the parts that are not zero); `started`: what an
        item started without a result is (`may have run` when the run is not running)."""
        parts = [f"{self.done}/{self.total}"]
        if self.failed:
            parts.append(f"{self.failed} failed")
        if self.running:
            parts.append(f"{self.running} {started}")
        return " · ".join(parts)


def item_counts(entries: Iterable[JournalEntry]) -> ItemCounts:
    """The counts of one map node from the latest row of each of its items."""
    total = ok = failed = running = 0
    for entry in entries:
        total = max(total, entry.notes.items or 0)
        if entry.status is NodeStatus.COMPLETED:
            ok += 1
        elif entry.status is NodeStatus.FAILED:
            failed += 1
        elif entry.status in (NodeStatus.STARTED, NodeStatus.QUEUED):
            running += 1
    return ItemCounts(total=max(total, ok + failed + running), ok=ok, failed=failed, running=running)


def only_items(node: Node) -> tuple[frozenset[str], frozenset[str]]:
    """The dependencies and inputs that only the node's `map.items` reads (none for a script
    step, which sees every input and dependency): left out of its items' keys."""
    spec = node.map
    if spec is None or not isinstance(spec.items, str) or node.kind == "script":
        return frozenset(), frozenset()
    listed = template_references(spec.items)
    used = References()
    for path, source in templated_fields(node):
        if path != ("map", "items"):
            used = used | template_references(source)
    if used.whole_inputs or used.whole_nodes:
        return frozenset(listed.nodes - used.nodes), frozenset()
    return frozenset(listed.nodes - used.nodes), frozenset(listed.inputs - used.inputs)


def failed_output(error: str) -> dict[str, Any]:
    """A failed item in the node's output (`on_failure: continue`)."""
    return {"failed": True, "error": error}


#: runs one item's attempts (the executor's retry loop): (step, item value) -> final attempt
RunItem = Callable[[Step, Any], Awaitable[Attempt]]


@dataclass(slots=True)
class MapResult:
    """What became of a map node's items."""

    outputs: list[Any]  # in item order; None for an item never started (fail_fast)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (item id, error)
    attention: list[ReplayUnsafe] = field(default_factory=list)
    waiting: list[Waiting] = field(default_factory=list)  # `workflow:` items whose child waits
    not_started: int = 0

    def error(self, node_id: str) -> str:
        """The node's one-line failure."""
        count = len(self.failed)
        first_id, first = self.failed[0]
        detail = " ".join(line.strip() for line in first.splitlines() if line.strip()) or "failed"
        detail = detail.removeprefix(f"step `{first_id}` ")
        if len(detail) > _DETAIL:
            detail = detail[: _DETAIL - 1] + "…"
        named = ", ".join(f"`{item}`" for item, _ in self.failed[:_NAMED])
        more = f" and {count - _NAMED} more" if count > _NAMED else ""
        text = f"{count} of {len(self.outputs)} items of `{node_id}` failed: {named}{more}"
        text += f" ({first_id}: {detail})"
        if self.not_started:
            text += f"; {self.not_started} not started (on_failure: fail_fast)"
        return text


class MapRun:
    """Runs the items of one map node (see the module docstring)."""

    def __init__(
        self,
        execution: Execution,
        runner: StepRunner,
        index: JournalIndex,
        lineage_root: str,
        run_item: RunItem,
        stopping: Callable[[], bool],
        slots: asyncio.Semaphore,
    ) -> None:
        self.x = execution
        self.runner = runner
        self.index = index
        self.root = lineage_root
        self.run_item = run_item
        self.stopping = stopping  # another node failed: nothing new starts
        self.slots = slots  # the run's steps at once (`BATON_MAX_PARALLEL`), shared by its maps
        self.scope: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
        self.total = 0  # items of the node being run

    async def run(self, step: Step, items: Sequence[Any]) -> MapResult:
        pn = step.node
        spec = pn.node.map
        assert spec is not None
        result = MapResult(outputs=[None] * len(items))
        self.total = len(items)
        self.scope = only_items(pn.node)
        keyed = [item_components(step.components, item, only_items=self.scope) for item in items]
        keys = [cache_key(components) for components in keyed]
        hits = self._hits(step, keys)
        cached = self.x.setup.store.blobs.get_blobs(
            {e.output_digest for e in hits.values() if e.output_digest}
        )
        todo: list[int] = []
        for i in range(len(items)):
            entry = hits.get(i)
            if entry is not None and entry.output_digest is not None:
                result.outputs[i] = decode_item(pn, cached[entry.output_digest].decode())
                await self._use(pn, i, entry)
            else:
                todo.append(i)
        queue = iter(todo)
        halted = False

        async def worker() -> None:
            nonlocal halted
            for i in queue:
                if halted or self.stopping():
                    result.not_started += 1
                    continue
                async with self.slots:
                    outcome = await self._item(step, i, items[i], keyed[i], keys[i])
                if isinstance(outcome, Completed):
                    result.outputs[i] = outcome.value
                    continue
                if isinstance(outcome, Waiting):
                    result.waiting.append(outcome)
                    continue
                if isinstance(outcome, ReplayUnsafe):
                    result.attention.append(outcome)
                else:
                    result.failed.append((item_id(pn.id, i), outcome))
                    result.outputs[i] = failed_output(outcome)
                if spec.on_failure == "fail_fast":
                    halted = True

        await asyncio.gather(*(worker() for _ in range(min(spec.max_parallel, len(todo)))))
        result.failed.sort(key=lambda f: split_item_id(f[0]) or (f[0], 0))
        return result

    def _hits(self, step: Step, keys: Sequence[str]) -> dict[int, JournalEntry]:
        """Items whose result is served from the cache (this run's or its lineage's)."""
        if not step.node.memoize:
            return {}
        found = {}
        for i, key in enumerate(keys):
            if self.index.dangling(item_id(step.node.id, i)) is not None:
                continue  # decided by the runner's adoption rules when the item comes up
            entry = self.index.lookup(key)
            if entry is not None and entry.output_digest is not None:
                found[i] = entry
        return found

    async def _use(self, pn: PreparedNode, index: int, entry: JournalEntry) -> None:
        own_id = item_id(pn.id, index)
        if entry.run_id == self.x.run_id and entry.node_id == own_id:
            return  # done by this run already (an approval or resume of the same run)
        if entry.node_id == own_id:
            self.x.journal.cached(entry)
            await self.x.emit(EventKind.NODE_CACHED, own_id, cached_from=entry.cached_from or entry.run_id)
            return
        # the same item at another position: its result, recorded under this position
        key = entry.idempotency_key or replay.idempotency_key(self.root, pn.id, entry.cache_key)
        step = Step(pn._replace(id=own_id), entry.cache_key, dict(entry.components), key, entry.notes)
        entry_id = self.x.journal.start(step, self.index.next_attempt(own_id))
        self.x.journal.finish(entry_id, status=NodeStatus.COMPLETED, output_digest=entry.output_digest)

    async def _item(
        self, step: Step, index: int, item: Any, components: dict[str, Any], key: str
    ) -> Completed | str | ReplayUnsafe | Waiting:
        """Run one item: its output (`Completed`), its error (text), its need for attention,
        or its child run waiting (`Waiting`, a `workflow:` item)."""
        pn = step.node
        own_id = item_id(pn.id, index)
        item_pn = pn._replace(id=own_id)
        dangling = self.index.dangling(own_id)
        if dangling is not None:
            unsafe = self.runner.adopt(item_pn, dangling)
            if unsafe is not None:
                await self.x.emit(EventKind.NODE_ATTENTION, own_id, reason=unsafe.message)
                return unsafe
        # noted on the item's row: why it runs, and how many items its node has (progress counts)
        reason = self.index.miss_reason(own_id, key, components, memoize=pn.memoize)
        notes = replace(step.notes, reason=reason, items=self.total)
        item_step = Step(item_pn, key, components, replay.idempotency_key(self.root, pn.id, key), notes)
        outcome = await self.run_item(item_step, item)
        if isinstance(outcome, Completed | Waiting):
            return outcome
        if isinstance(outcome, Attention):
            await self.x.emit(EventKind.NODE_ATTENTION, own_id, reason=outcome.error.message)
            return outcome.error
        return outcome.error


def node_output(outputs: Sequence[Any]) -> bytes:
    """The stored output of a map node: its item outputs as one JSON list."""
    return canonical_json(list(outputs))


def counts_of(node_id: str, latest: Mapping[str, JournalEntry]) -> ItemCounts | None:
    """The counts of map node `node_id` from a node table's latest entries (None: no item yet)."""
    rows = [e for n, e in latest.items() if (split_item_id(n) or ("", 0))[0] == node_id]
    return item_counts(rows) if rows else None
