"""`NodeJob`: what a replica hands a worker to execute one step, as JSON job arguments.

Everything the leaf code (`core.engine.nodes.execute_node`) needs is resolved by the
replica before the hand-off: templates rendered, script source read, upstream outputs on
stdin. The worker adds only what is local to its machine (working directory, providers,
tools, the values of declared secrets). Pure: building and parsing a job touches nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.engine.nodes import RenderedNode
from core.workflows.model import OutputContract

#: The Procrastinate task every node job runs as, and its default queue.
TASK_NAME = "baton.execute_node"
DEFAULT_QUEUE = "baton"


def queueing_lock(entry_id: int) -> str:
    """At most one waiting job per journal entry (Procrastinate's `queueing_lock`)."""
    return f"baton-entry-{entry_id}"


@dataclass(frozen=True, slots=True)
class NodeJob:
    entry_id: int  # the `queued` journal entry the worker claims, runs and settles
    run_id: str
    node_id: str
    attempt: int
    idempotency_key: str | None
    timeout: float
    rendered: RenderedNode
    output: OutputContract
    artifact_globs: tuple[str, ...] = ()
    #: artifacts of steps done earlier in the run (relative path -> blob digest), written into
    #: the worker's run directory first: the step sees the files it would see in-process
    restore: Mapping[str, str] = field(default_factory=dict)
    #: the replica's absolute directory of the workflow file, exported as `BATON_WORKFLOW_DIR`
    #: (workers are deployed with the same workflow directories as the replicas)
    workflow_dir: str | None = None
    #: the `tool` / `provider` components of the step's cache key: the worker runs the step
    #: only if its own tool code and provider are the ones the key names
    identity: Mapping[str, Any] = field(default_factory=dict)
    #: the node's `env:` values, and the *names* of its secrets: a secret's value never travels
    #: through the queue; each worker reads it from its own operator-provided source
    env: Mapping[str, str] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    #: False: the step runs without network (`network: false`)
    network: bool = True

    def to_args(self) -> dict[str, Any]:
        """JSON job arguments. Values that are empty or None are left out (`from_args`
        reads them back as their defaults): the arguments are written with the hand-off,
        read by the worker and logged by the queue, so every byte is paid several times."""
        r = self.rendered
        rendered = _compact(
            {
                "kind": r.kind,
                "command": r.command,
                "variables": dict(r.variables),
                "script_source": r.script_source,
                "stdin": r.stdin.decode("utf-8") if r.stdin is not None else None,
                "prompt": r.prompt,
                "provider": r.provider,
                "tool": r.tool,
                "kwargs": dict(r.kwargs),
                "output_schema": dict(r.output_schema) if r.output_schema is not None else None,
            },
            keep=("kind",),
        )
        return _compact(
            {
                "entry_id": self.entry_id,
                "run_id": self.run_id,
                "node_id": self.node_id,
                "attempt": self.attempt,
                "idempotency_key": self.idempotency_key,
                "timeout": self.timeout,
                "rendered": rendered,
                "output": self.output.model_dump(by_alias=True, exclude_defaults=True),
                "artifact_globs": list(self.artifact_globs),
                "restore": dict(self.restore),
                "workflow_dir": self.workflow_dir,
                "identity": dict(self.identity),
                "env": dict(self.env),
                "secrets": list(self.secrets),
                "network": None if self.network else False,
            },
            keep=_REQUIRED,
        )

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> NodeJob:
        r = args["rendered"]
        stdin = r.get("stdin")
        rendered = RenderedNode(
            kind=r["kind"],
            command=r.get("command"),
            variables={str(k): str(v) for k, v in (r.get("variables") or {}).items()},
            script_source=r.get("script_source"),
            stdin=stdin.encode("utf-8") if stdin is not None else None,
            prompt=r.get("prompt"),
            provider=r.get("provider"),
            tool=r.get("tool"),
            kwargs=r.get("kwargs") or {},
            output_schema=r.get("output_schema"),
        )
        return cls(
            entry_id=int(args["entry_id"]),
            run_id=str(args["run_id"]),
            node_id=str(args["node_id"]),
            attempt=int(args["attempt"]),
            idempotency_key=args.get("idempotency_key"),
            timeout=float(args["timeout"]),
            rendered=rendered,
            output=_output_contract(args.get("output")),
            artifact_globs=tuple(args.get("artifact_globs") or ()),
            restore=dict(args.get("restore") or {}),
            workflow_dir=args.get("workflow_dir"),
            identity=dict(args.get("identity") or {}),
            env={str(k): str(v) for k, v in (args.get("env") or {}).items()},
            secrets=tuple(str(n) for n in args.get("secrets") or ()),
            network=args.get("network") is not False,
        )


#: the contract of a job whose arguments name none (every node's default): frozen, shared
_TEXT_OUTPUT = OutputContract()


def _output_contract(value: Any) -> OutputContract:
    """The job's output contract: validated when its arguments name one (most name none:
    `to_args` leaves a default contract out, and a worker parses one job per step)."""
    return OutputContract.model_validate(value) if value else _TEXT_OUTPUT


#: arguments `from_args` reads without a default
_REQUIRED = ("entry_id", "run_id", "node_id", "attempt", "timeout", "rendered")


def _compact(values: dict[str, Any], *, keep: tuple[str, ...]) -> dict[str, Any]:
    """`values` without the None and empty ones, except those named in `keep`."""
    return {k: v for k, v in values.items() if k in keep or (v is not None and v != {} and v != [])}
