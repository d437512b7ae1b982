"""What the scheduler (`executor.RunExecutor`) hands a `StepRunner`, and what it gets back.

    RunExecutor ── decides what runs, in which order, from the journal and the cache
        │  runner.adopt(node, entry)             at recovery: an open entry of this run
        │  runner.run(step, rendered, attempt)   one attempt -> Completed | Failed | Attention
        ▼
    StepRunner ── LocalStepRunner (`local_runner.py`): journals `started`, runs the step here
               └─ QueueStepRunner (`distributed/queue_runner.py`): hands it to `baton worker`s

Each runner is complete on its own: it runs a step (journaling it its way) and adopts an
entry a dead process left open. Both share `Execution`, the one execution's context: its
setup, its `JournalWriter`, its event emitter, the note of a person's cancel, and the one
rule for an entry nobody will finish (`Execution.orphaned`: unsafe -> needs attention,
otherwise marked interrupted and run again).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from core.engine import replay
from core.engine.events import EngineEvent, EventKind
from core.engine.journal_writer import JournalWriter
from core.engine.nodes import RenderedNode
from core.engine.prepared import PreparedNode
from core.errors import ReplayUnsafe
from core.store.records import NO_NOTES, JournalEntry, KeyNotes

if TYPE_CHECKING:
    from core.engine.executor import Setup
    from core.engine.warm import WarmSandboxes


@dataclass(frozen=True, slots=True)
class Step:
    """A node about to run: its cache key, key components and idempotency key, and what its
    journal entries note beside them (why it runs, why it was skipped, its child run…)."""

    node: PreparedNode
    key: str
    components: dict[str, Any]
    idempotency_key: str
    notes: KeyNotes = NO_NOTES


@dataclass(slots=True)  # one per step: not frozen, so it costs a plain __init__
class Completed:
    digest: str  # the output blob's
    value: Any  # the output as templates see it
    seconds: float
    tokens: int
    artifacts: Mapping[str, str] = field(default_factory=dict)  # path -> blob digest


@dataclass(slots=True)
class Failed:
    error: str  # journaled already; the scheduler retries or fails the run


@dataclass(frozen=True, slots=True)
class Attention:
    """The step may have run and must not run again blindly: the run needs attention."""

    error: ReplayUnsafe


@dataclass(frozen=True, slots=True)
class Waiting:
    """A `workflow:` step whose child run rests without a result (a gate waits in it, or a
    step of it needs attention): the parent pauses until the child goes on (`subruns.py`)."""

    child: str  # the child run's id
    reason: str  # "waiting on child c0ffee at `review`"


Attempt = Completed | Failed | Attention | Waiting


class StepRunner(Protocol):
    def adopt(self, node: PreparedNode, entry: JournalEntry) -> ReplayUnsafe | None:
        """At recovery, `entry` of this run is open (no result): a process running it
        stopped. None: go on deciding the node (it runs again, or the runner waits for the
        entry when asked to run it); a `ReplayUnsafe`: the run needs attention."""

    async def run(self, step: Step, rendered: RenderedNode, attempt: int) -> Attempt:
        """One attempt of `step` (its failure journaled, its result committed as the
        runner's rules say)."""


@dataclass(slots=True)
class Execution:
    """One execution's context, shared by the scheduler and its step runner."""

    setup: Setup
    journal: JournalWriter
    workflow_dir: Path  # BATON_WORKFLOW_DIR of its steps
    #: set by the engine before it cancels a person's cancelled run: in-flight steps are
    #: settled `failed` with it (a stop without it leaves them open for a new owner)
    cancel_note: str | None = None
    artifacts: dict[str, str] = field(default_factory=dict)  # of the steps done so far: path -> digest
    #: sandboxes set up ahead of its steps while it executes (`core/engine/warm.py`)
    warm: WarmSandboxes | None = None
    run_id: str = field(init=False)

    def __post_init__(self) -> None:
        self.run_id = self.setup.run.id

    async def emit(self, kind: EventKind, node_id: str | None, **detail: Any) -> None:
        bus = self.setup.bus
        if bus:
            await bus.emit(EngineEvent(kind, self.run_id, node_id, detail=detail))

    def orphaned(self, node: PreparedNode, entry: JournalEntry) -> ReplayUnsafe | None:
        """`entry` started and nobody will finish it. The replay rules: an unsafe step may
        have happened (the error; the entry stays as it is); any other is marked interrupted
        and runs again (None)."""
        if replay.recovery_for(node.replay) is replay.Recovery.ATTENTION:
            return replay.replay_unsafe(self.run_id, entry)
        self.journal.interrupted(entry, str(node.replay))
        return None
