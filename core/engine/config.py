"""`EngineConfig`: the engine's settings, built by the runtime (`bot/runtime.py`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.engine.step_env import StepEnvironment
from core.workflows.render_budget import RenderLimits


@dataclass(frozen=True)
class EngineConfig:
    data_dir: Path
    #: what steps see in their environment, the source of declared secrets, and the runtime's
    #: redactor (stderr tails and errors); built by the runtime (`bot/runtime.py`)
    environment: StepEnvironment
    max_parallel: int = 4
    lease_seconds: float = 15.0
    replica_id: str = "local"
    group_commit: float = 0.01  # seconds a pure step's result may wait for its commit (0: none)
    render: RenderLimits = field(default_factory=RenderLimits)  # each template render's budget
    max_output: int = 1_000_000  # bytes of a step's output kept; the rest stays in a file
    max_output_file: int = 100_000_000  # bytes of that file kept (BATON_MAX_OUTPUT_FILE_BYTES)
    max_artifacts: int = 100_000_000  # bytes of one step's artifacts kept (BATON_MAX_ARTIFACT_BYTES)
    #: seconds a pure step's cached result stays served unused (`BATON_CACHE_RETENTION_DAYS`,
    #: `core/engine/cache_expiry.py`); None: always
    cache_retention: float | None = None
    #: whether a principal may run a workflow (`authz.may_run` over `BATON_ACCESS`): a child run
    #: of a `workflow:` step runs as its parent's requester, who must be allowed to run the
    #: child's workflow (None: no access control, everyone may run everything)
    may_run: Callable[[str, str], bool] | None = None
