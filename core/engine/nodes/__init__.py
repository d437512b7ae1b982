"""Executing one step whose templates are already rendered: `execute_node`.

The executor (`core/engine/executor.py`) decides *whether* a step runs (cache, replay
rules, journal); this package only *runs* it, one module per kind:

    bash.py     `bash -c <command>` in its own process group
    script.py   Python in a subprocess, inputs as JSON on stdin
    prompt.py   a call through a `Provider` (`core/engine/providers.py`)
    tool.py     a registered Python callable (`core/engine/tools.py`)
    process.py  the subprocess runner the others share (pipes, timeouts, process groups)

`approval` steps never reach this package: the executor pauses the run instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.engine.workdirs import ArtifactOutside, write_in
from core.errors import NodeFailed

if TYPE_CHECKING:
    from core.engine.providers import ProviderRegistry
    from core.engine.step_env import StepEnvironment
    from core.engine.tools import ToolRegistry
    from core.engine.warm import WarmSandboxes
    from core.redaction import Redactor

__all__ = ["NodeContext", "NodeResult", "RenderedNode", "execute_node"]


@dataclass(frozen=True, slots=True)
class NodeContext:
    """Where and how one attempt of one step runs."""

    run_id: str
    node_id: str
    workdir: Path
    artifacts_dir: Path
    idempotency_key: str | None
    timeout: float  # seconds
    #: builds the step's process environment (`core/engine/step_env.py`); its redactor hides
    #: secrets in stderr tails and error messages. Step *output* is never redacted (later steps
    #: consume it); people see it through redacting renderers.
    environment: StepEnvironment
    attempt: int = 1
    env: Mapping[str, str] = field(default_factory=dict)  # the node's `env:` values (workflow's, node's)
    secrets: tuple[str, ...] = ()  # the names of the secrets the node declares (workflow's, node's)
    #: the directory of the workflow file (absolute), exported as `BATON_WORKFLOW_DIR` so a step
    #: can read its `files:` and scripts; the step itself runs in `workdir` (the run directory)
    workflow_dir: Path | None = None
    #: bytes of output kept as the step's result; the whole of a longer output is written to
    #: `output_file` and the result says so (`BATON_MAX_OUTPUT_BYTES`)
    max_output: int = 1_000_000
    #: bytes of that file kept: a step that never stops printing does not fill Baton's disk
    #: (`BATON_MAX_OUTPUT_FILE_BYTES`); what it prints past them is read and dropped
    max_output_file: int = 100_000_000
    #: False: the step's sandbox has no network but its own loopback (`network: false`)
    network: bool = True
    #: the run's sandboxes set up ahead of its steps (`core/engine/warm.py`); None: cold only
    warm: WarmSandboxes | None = None

    @property
    def output_file(self) -> Path:
        return self.workdir / ".outputs" / f"{self.node_id}.{self.attempt}.log"

    @property
    def redactor(self) -> Redactor:
        return self.environment.redactor


@dataclass(frozen=True, slots=True)
class RenderedNode:
    """A step's resolved inputs, after templating."""

    kind: str  # bash | script | prompt | tool   (approval never reaches execute_node)
    command: str | None = None  # bash: the rendered command; values only as $BATON_ARG_n references
    #: bash: the values those references hold, added to the step's environment
    variables: Mapping[str, str] = field(default_factory=dict)
    script_source: str | None = None  # script: the Python source
    stdin: bytes | None = None  # script: inputs as JSON on stdin
    prompt: str | None = None  # prompt: the rendered prompt
    provider: str | None = None  # prompt: provider name, or None for the default
    tool: str | None = None  # tool: registered name
    workflow: str | None = None  # workflow: the child run's workflow (its args: `kwargs`)
    kwargs: Mapping[str, Any] = field(default_factory=dict)  # tool, workflow: rendered `with:` values
    #: prompt: set when the step's `output:` is JSON: its schema, or `{}` when it has none.
    #: Providers use it to ask for (the fake: to produce) JSON of that shape.
    output_schema: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class NodeResult:
    output: str  # stdout / provider text / tool result (str as is, else canonical JSON)
    tokens_in: int = 0
    tokens_out: int = 0
    stderr_tail: str = ""  # last ~2 KB of stderr, secrets redacted
    truncated: bool = False  # the output was cut at `max_output`; all of it is in a file


def truncation_note(kept: int, total: int, path: Path, in_file: int | None = None) -> str:
    """The line that ends a cut output: how much was kept and where the whole is (`in_file`:
    how much of it, when the file was cut too)."""
    if in_file is not None and in_file < total:
        return (f"\n[output truncated: {kept:,} of {total:,} bytes kept; the first {in_file:,} are in {path} "
                "(BATON_MAX_OUTPUT_FILE_BYTES)]\n")
    return f"\n[output truncated: {kept:,} of {total:,} bytes kept; all of it is in {path}]\n"


def output_refused(ctx: NodeContext, what: str, exc: Exception) -> NodeFailed:
    """The step's whole output could not be written or read back where it goes: a step of
    the run left something else at that name (`core/engine/workdirs.py`)."""
    return NodeFailed(
        f"{what} `{ctx.node_id}`: its output is too long to keep, and its file cannot be written: {exc}",
        node_id=ctx.node_id,
        hint="Leave `.outputs/` of the run directory to Baton (no link, no directory there), then resume.",
    )


def cap_output(result: NodeResult, ctx: NodeContext) -> NodeResult:
    """An in-process result (tool, provider) longer than `max_output`: the whole to a file."""
    if result.truncated:
        return result
    data = result.output.encode("utf-8", errors="surrogatepass")
    if len(data) <= ctx.max_output:
        return result
    path = ctx.output_file
    try:
        with write_in(ctx.workdir, path) as file:  # never through a link a step left there
            file.write(data)
    except ArtifactOutside as exc:
        raise output_refused(ctx, "step", exc) from None
    kept = ctx.redactor.cut_before(data, ctx.max_output)  # never a part of a secret at the cut
    head = data[:kept].decode("utf-8", errors="ignore")
    output = head + truncation_note(kept, len(data), path)
    return NodeResult(output, result.tokens_in, result.tokens_out, result.stderr_tail, truncated=True)


async def execute_node(
    node: RenderedNode, ctx: NodeContext, *, providers: ProviderRegistry, tools: ToolRegistry
) -> NodeResult:
    """Run one step and return its result.

    Raises `NodeFailed` (exit code + stderr tail, timeout, tool exception, provider error,
    unknown tool or provider). On cancellation it stops the step's whole process group and
    re-raises `asyncio.CancelledError`. Secrets in stderr and error messages are hidden with
    `ctx.redactor`.
    """
    kind = node.kind
    if kind == "tool":
        return cap_output(await tool.run(node, ctx, tools), ctx)
    if kind == "bash":
        return await bash.run(node, ctx)
    if kind == "prompt":
        return cap_output(await prompt.run(node, ctx, providers), ctx)
    if kind == "script":
        return await script.run(node, ctx)
    raise NodeFailed(
        f"step `{ctx.node_id}` has kind `{kind}`, which cannot be executed directly",
        node_id=ctx.node_id,
        hint="Only bash, script, prompt and tool steps execute; approval steps pause the run.",
    )


# The kind modules use the records above, so they are imported after them.
from core.engine.nodes import bash, prompt, script, tool  # noqa: E402
