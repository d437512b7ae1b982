"""Running one step's subprocess: its own process group, both pipes read at once, bounded time.

Used by the `bash` and `script` node kinds and by the `command` prompt provider.

- The child starts a new session (`start_new_session=True`), so its pid is the id of a
  process group that holds everything it spawns.
- stdout keeps its first `ctx.max_output` bytes (the rest goes on to `ctx.output_file`, with
  the head, so the whole output stays available) and stderr keeps only its last
  `STDERR_KEEP` bytes, both read at the same time as stdin is written: tens of MB on either
  pipe neither deadlock nor sit in memory. Neither cut splits a secret the redactor knows:
  the kept head ends before, and the kept tail starts after, any secret the cut would split
  (`Redactor.cut_before` / `cut_after`), so no part of one is left for people to see.
- When the main process exits, whatever it left running in its group (`sleep 99 &`) is stopped
  too: a step's processes end with the step, and a background child that still holds stdout
  cannot keep the step waiting.
- On timeout or cancellation the group gets SIGTERM, then SIGKILL after `KILL_GRACE` seconds.
- Then whatever the step left outside its group (`setsid -f`, a double fork) is killed and
  reaped (`reaper.py`): no process a step started outlives it.
- In the sandbox (`core/engine/sandbox.py`, the default where bubblewrap works) the process
  is `bwrap`, whose PID namespace holds every process the step starts: when the step's main
  process ends, or bwrap is stopped, the kernel kills them all, however they detached
  (`env -i setsid -f …` included). Stopping the group stops bwrap, which ends the namespace.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import errno
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from core.engine import warm
from core.engine.nodes import NodeResult, children, output_refused, reaper, truncation_note
from core.engine.workdirs import ArtifactOutside, read_in, write_in
from core.errors import MissingSecret, NodeFailed

if TYPE_CHECKING:
    from core.engine.nodes import NodeContext

KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
PIPES_CLOSE = 0.05  # seconds for the pipes to close once the main process exited
STDERR_KEEP = 16 * 1024  # bytes of stderr kept while reading
TAIL_CHARS = 2048  # characters of stderr shown (after redaction)
_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    returncode: int
    stdout: bytes  # at most ctx.max_output bytes
    stderr_tail: str  # last TAIL_CHARS characters of stderr, redacted
    stdout_total: int = 0  # bytes the process wrote to stdout
    stdout_file: Path | None = None  # where all of them are, when stdout was cut
    stdout_in_file: int = 0  # how many of them that file holds (at most ctx.max_output_file)


def node_env(ctx: NodeContext) -> dict[str, str]:
    """The step's whole environment: the allowlisted operator variables, its `env:` values and
    declared secrets (`core/engine/step_env.py`), then the BATON_* variables of this step.
    Nothing else of Baton's environment (its tokens, its database URL) reaches a step."""
    try:
        env = ctx.environment.variables(ctx.env, ctx.secrets, node_id=ctx.node_id)
    except MissingSecret as exc:
        raise NodeFailed(exc.message, node_id=ctx.node_id, hint=exc.hint) from None
    env["BATON_RUN_ID"] = ctx.run_id
    env["BATON_NODE_ID"] = ctx.node_id
    env["BATON_ARTIFACTS_DIR"] = str(ctx.artifacts_dir)
    env["BATON_IDEMPOTENCY_KEY"] = ctx.idempotency_key or ""
    env["BATON_ATTEMPT"] = str(ctx.attempt)
    if ctx.workflow_dir is not None:
        env["BATON_WORKFLOW_DIR"] = str(ctx.workflow_dir)
    return env


def timed_out(ctx: NodeContext, what: str = "step") -> NodeFailed:
    return NodeFailed(
        f"{what} `{ctx.node_id}` timed out after {ctx.timeout:g} s",
        node_id=ctx.node_id,
        hint="Raise the node's `timeout:` or make it faster, then resume the run.",
    )


async def run_process(
    argv: Sequence[str],
    ctx: NodeContext,
    *,
    stdin: bytes | None = None,
    variables: Mapping[str, str] | None = None,
    what: str = "step",
    files: Mapping[Path, Path] | None = None,
    readable: Sequence[Path] = (),
) -> ProcessOutcome:
    """Run `argv` in `ctx.workdir` within `ctx.timeout` seconds, in the step's environment
    and its sandbox.

    Raises `NodeFailed` on timeout (and when the program does not exist); kills the process
    group and re-raises on cancellation. A non-zero exit is *not* an error here: callers
    decide what it means. `variables` are added to the step's environment (a bash step's
    `BATON_ARG_n` values); `files` maps host files to where the sandboxed step reads them, and
    `readable` directories are shown to it read-only.
    """
    sandbox = ctx.environment.sandbox
    program = argv[0]
    where = None
    if sandbox.enabled:
        sandbox.prepare(ctx.workdir)
        where = warm.layout(ctx.workdir, ctx.workflow_dir, ctx.network, files, readable)
    marker = (ctx.run_id, ctx.node_id, str(ctx.attempt))
    reaper.adopt_orphans()
    reaper.running(marker)
    pids: list[int] = []
    try:
        outcome = await _run_process(argv, ctx, stdin, variables, what, marker, pids, where)
        if sandbox.enabled and outcome.returncode != 0:
            _check_started(outcome, program, ctx, what)
        return outcome
    except ArtifactOutside as exc:  # the whole output's file: a step left a link at its name
        raise output_refused(ctx, what, exc) from None
    finally:
        await asyncio.shield(reaper.sweep(marker))
        reaper.stopped(marker)
        for pid in pids:
            reaper.finished(pid)


async def _run_process(
    argv: Sequence[str],
    ctx: NodeContext,
    stdin: bytes | None,
    variables: Mapping[str, str] | None,
    what: str,
    marker: reaper.Marker,
    pids: list[int],
    where: warm.Layout | None,
) -> ProcessOutcome:
    environment = node_env(ctx)
    if variables:
        environment.update(variables)
    sandbox = ctx.environment.sandbox
    sandbox.environment(environment)
    proc = None
    if where is not None and ctx.warm is not None:  # a sandbox set up before, if one is ready
        proc = await ctx.warm.take(where, argv, environment, stdin=stdin is not None)
        if proc is not None:
            pids.append(proc.pid)  # registered with the reaper when it was started
            if stdin is None and proc.stdin is not None:
                proc.stdin.close()  # the stub gave the step /dev/null
                proc.stdin = None
    if proc is None:
        if where is not None:
            workdir, workflow_dir, network, files, readable = where
            argv = sandbox.command(
                argv, workdir=workdir, workflow_dir=workflow_dir, network=network, files=dict(files),
                readable=readable, own_session=True,  # started below with start_new_session
            )
        proc = await _start(argv, ctx, stdin, environment, what)
        pids.append(proc.pid)
    assert proc.stdout is not None and proc.stderr is not None  # both are PIPE
    stdout = _Head(ctx.max_output, lambda: ctx.output_file, ctx.workdir, ctx.max_output_file)
    readers = [
        asyncio.ensure_future(stdout.read(proc.stdout)),
        asyncio.ensure_future(_read_tail(proc.stderr)),
    ]
    feeder = asyncio.ensure_future(_feed(proc.stdin, stdin)) if proc.stdin is not None else None
    exited = _exit_waiter(proc)
    timer = asyncio.timeout(ctx.timeout)
    try:
        async with timer:
            await asyncio.shield(exited)
            await _stop_leftovers(proc.pid, readers, marker)
            if not all(r.done() for r in readers):  # usually they are: no gather (≈ 7 µs)
                await asyncio.gather(*readers)
            for reader in readers:
                reader.result()  # its error, if it failed, as gather would raise it
            returncode = await proc.wait()
    except BaseException as exc:
        try:
            await _stop_group(proc, exited)
            await _settle(proc, readers, feeder)
        finally:
            _signal_group(proc.pid, signal.SIGKILL)
        if isinstance(exc, TimeoutError) and timer.expired():
            raise timed_out(ctx, what) from None
        raise
    finally:
        _close_exit_waiter(exited)
        stdout.close()
    if feeder is not None:
        await feeder
    kept = readers[1].result()
    start = ctx.redactor.cut_after(kept, max(0, len(kept) - STDERR_KEEP))  # no secret's tail first
    tail = ctx.redactor.redact(kept[start:].decode("utf-8", errors="replace"))
    return ProcessOutcome(
        returncode=returncode,
        stdout=bytes(stdout.head),
        stderr_tail=tail[-TAIL_CHARS:],
        stdout_total=stdout.total,
        stdout_file=stdout.path,
        stdout_in_file=stdout.in_file,
    )


async def _start(
    argv: Sequence[str], ctx: NodeContext, stdin: bytes | None, environment: dict[str, str], what: str
) -> asyncio.subprocess.Process:
    """Start the step's process (cold: bwrap, when sandboxed, sets its sandbox up now)."""
    children.use_pidfds()
    reaper.spawning()
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=ctx.workdir,
            env=environment,
            start_new_session=True,
        )
    )
    try:
        # Shielded: a cancel that lands while asyncio is still wiring the pipes would make it
        # kill only the main process, leaving the rest of the group (`sleep &`) running.
        proc = await asyncio.shield(starting)
    except asyncio.CancelledError:
        await _kill_started(starting)
        reaper.spawn_failed()
        raise
    except (OSError, ValueError) as exc:
        reaper.spawn_failed()
        failure = _start_failure(exc, argv, ctx, what)
        if failure is exc:
            raise
        raise failure from exc
    except BaseException:
        reaper.spawn_failed()
        raise
    reaper.started(proc.pid)
    return proc


def _start_failure(exc: OSError | ValueError, argv: Sequence[str], ctx: NodeContext, what: str) -> Exception:
    """Why the program could not start, as the step's failure (other errors pass through)."""
    if isinstance(exc, FileNotFoundError | PermissionError | NotADirectoryError):
        return NodeFailed(
            f"{what} `{ctx.node_id}` could not start `{argv[0]}`: {exc.strerror or exc}",
            node_id=ctx.node_id,
            hint="Check that the program is installed and the working directory exists.",
        )
    too_long = isinstance(exc, OSError) and exc.errno == errno.E2BIG
    if not too_long and not isinstance(exc, ValueError):
        return exc
    because = (
        "its command and values are too long for a program's arguments and environment"
        if too_long
        else "a value holds a NUL byte, which a program's environment cannot hold"
    )
    return NodeFailed(
        f"{what} `{ctx.node_id}` could not start: {because}",
        node_id=ctx.node_id,
        hint="Pass large or binary data through a file (artifacts) or a script step's stdin.",
    )


def _check_started(outcome: ProcessOutcome, program: str, ctx: NodeContext, what: str) -> None:
    """bwrap ran, but the program did not start in the sandbox: the same failure as outside."""
    line = outcome.stderr_tail.strip()
    said: tuple[str, ...] = (f"bwrap: execvp {program}: ", f"setpriv: failed to execute {program}: ")
    if ctx.environment.sandbox.can_warm:  # a warmed sandbox's stub `exec`s it (`core/engine/warm.py`)
        said += (f"baton-stub: 1: exec: {program}: ",)
    prefix = next((p for p in said if line.startswith(p)), None)
    if prefix is not None and "\n" not in line:
        why = line[len(prefix):]
        raise NodeFailed(
            f"{what} `{ctx.node_id}` could not start `{program}`: "
            + ("No such file or directory" if why == "not found" else why),  # dash's words for it
            node_id=ctx.node_id,
            hint="Check that the program is installed and the working directory exists.",
        )


def step_result(outcome: ProcessOutcome, ctx: NodeContext, *, what: str = "step") -> NodeResult:
    """stdout as the step's output, or `NodeFailed` naming the exit code and the stderr tail."""
    if outcome.returncode != 0:
        raise exit_failure(outcome, ctx, what=what)
    if outcome.stdout_file is None:
        return NodeResult(
            output=outcome.stdout.decode("utf-8", errors="replace"), stderr_tail=outcome.stderr_tail
        )
    kept = ctx.redactor.cut_before(
        outcome.stdout + _peek(ctx.workdir, outcome.stdout_file, len(outcome.stdout), ctx.redactor.longest()),
        len(outcome.stdout),
    )  # never a part of a secret at the cut
    head = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(outcome.stdout[:kept], final=False)
    note = truncation_note(kept, outcome.stdout_total, outcome.stdout_file, outcome.stdout_in_file)
    return NodeResult(output=head + note, stderr_tail=outcome.stderr_tail, truncated=True)


def _peek(root: Path, path: Path, offset: int, size: int) -> bytes:
    """`size` bytes of the whole output past the kept head (where a secret cut by it ends)."""
    if size <= 0:
        return b""
    try:
        return read_in(root, path, offset, size)
    except (OSError, ArtifactOutside):
        return b""


def exit_failure(outcome: ProcessOutcome, ctx: NodeContext, *, what: str = "step") -> NodeFailed:
    code = outcome.returncode
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    tail = outcome.stderr_tail.strip()
    message = f"{what} `{ctx.node_id}` {how}" + (f"; stderr ends with:\n{tail}" if tail else " (no stderr)")
    if ctx.environment.sandbox.enabled and (bound := _sandbox_bound(tail)) is not None:
        message += f"\n{bound}"  # (the message is what the failure's reply and `status` show)
    return NodeFailed(
        message, node_id=ctx.node_id, hint="Fix the step, then resume the run."
    )


#: what a sandboxed step's stderr says when it met one of the sandbox's bounds, and that bound
_BOUNDS = (
    ("Read-only file system", "In its sandbox a step writes only its run directory, /tmp, /dev/shm and $HOME "
     "(docs/workflows.md, \"What a step sees\")."),
    ("No space left on device", "If it wrote to /tmp, /dev/shm or $HOME: each holds at most "
     "BATON_STEP_TMP_BYTES (they are memory); write large files in the run directory "
     "(`export TMPDIR=$PWD/tmp`)."),
    ("Resource temporarily unavailable", "A step may have at most BATON_STEP_MAX_PROCESSES processes "
     "(threads included)."),
)


def _sandbox_bound(stderr: str) -> str | None:
    """The sandbox's bound a failed step's stderr tail shows it met, said with its setting."""
    return next((said for sign, said in _BOUNDS if sign in stderr), None)


class _Head:
    """Keeps the first `limit` bytes of a stream; once it is longer, writes it to `path`,
    which `where()` names then (most outputs never need one: no Path built per step), a new
    file under `root` (`write_in`: never through a link a step left there), up to
    `file_limit` bytes: past them a stream that never ends (`yes`, a log in a loop) is read
    and dropped, so it neither blocks its step nor fills the disk Baton's database is on."""

    def __init__(self, limit: int, where: Callable[[], Path], root: Path, file_limit: int) -> None:
        self.limit, self._where, self._root, self._file_limit = limit, where, root, file_limit
        self.path: Path | None = None  # set once the stream is longer than `limit`
        self.head = bytearray()
        self.total = 0
        self.in_file = 0  # bytes written to `path`
        self._file: BinaryIO | None = None

    async def read(self, stream: asyncio.StreamReader) -> bytes:
        while chunk := await stream.read(_CHUNK):
            self.total += len(chunk)
            if self._file is None and len(self.head) + len(chunk) <= self.limit:
                self.head += chunk
                continue
            if self._file is None:
                self.path = path = self._where()
                self._file = write_in(self._root, path)
                self._write(bytes(self.head))
                self.head += chunk[: self.limit - len(self.head)]
            if self.in_file < self._file_limit:
                self._write(chunk)
        return b""

    def _write(self, data: bytes) -> None:
        assert self._file is not None
        data = data[: self._file_limit - self.in_file]
        self._file.write(data)
        self.in_file += len(data)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


async def _read_tail(stream: asyncio.StreamReader) -> bytes:
    """The end of the stream: `STDERR_KEEP` bytes and up to as many before them (where the
    caller looks for a secret the cut would split)."""
    tail = bytearray()
    while chunk := await stream.read(_CHUNK):
        tail += chunk
        if len(tail) > 2 * STDERR_KEEP:
            del tail[: -2 * STDERR_KEEP]
    return bytes(tail)


async def _feed(writer: asyncio.StreamWriter | None, data: bytes | None) -> None:
    if writer is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        if data:
            writer.write(data)
            await writer.drain()
        writer.close()
        await writer.wait_closed()


def _exit_waiter(proc: asyncio.subprocess.Process) -> asyncio.Future[None]:
    """A future set when the main process exits (not when its pipes close).

    `Process.wait()` only returns once stdout/stderr are closed, which a background grandchild
    can delay forever; a pidfd tells us about the main process alone: the one asyncio's child
    watcher already has (`children.exit_of`), else one of our own. Cancel the future to
    release that pidfd early.
    """
    watched = children.exit_of(proc.pid)
    if watched is not None:
        return watched
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:  # already exited and reaped
        future.set_result(None)
        return future
    except (AttributeError, OSError):  # no pidfd on this system: pipes-closed is the best we get
        fallback = asyncio.ensure_future(proc.wait())

        def done(_: object) -> None:
            if not future.done():
                future.set_result(None)

        fallback.add_done_callback(done)
        return future
    open_fd = [fd]

    def release(_: object = None) -> None:
        if open_fd:
            loop.remove_reader(open_fd[0])
            os.close(open_fd.pop())

    def ready() -> None:
        release()
        if not future.done():
            future.set_result(None)

    loop.add_reader(fd, ready)
    future.add_done_callback(release)
    return future


def _close_exit_waiter(exited: asyncio.Future[None]) -> None:
    if not exited.done():
        exited.cancel()


async def _kill_started(starting: asyncio.Future[asyncio.subprocess.Process]) -> None:
    """Cancelled while the process was starting: let it start, then kill its whole group."""
    try:
        proc = await starting
    except Exception:  # it never started: nothing to kill
        return
    _signal_group(proc.pid, signal.SIGKILL)
    await proc.wait()


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def _stop_leftovers(pgid: int, readers: Sequence[asyncio.Future[bytes]], marker: reaper.Marker) -> None:
    """The main process exited: stop whatever it left running, in its group or out of it
    (something that left the group may still hold the pipes)."""
    in_group = _signal_group(pgid, signal.SIGTERM)
    if all(r.done() for r in readers):
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(PIPES_CLOSE):  # usually the pipes are closing already
            await asyncio.wait(readers)
            return
    await reaper.sweep(marker)
    if not in_group or all(r.done() for r in readers):
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(KILL_GRACE):
            await asyncio.wait(readers)
            return
    _signal_group(pgid, signal.SIGKILL)


async def _stop_group(proc: asyncio.subprocess.Process, exited: asyncio.Future[None]) -> None:
    """SIGTERM the whole group, wait up to KILL_GRACE for the main process, then SIGKILL."""
    if not _signal_group(proc.pid, signal.SIGTERM):
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(KILL_GRACE):
            await asyncio.shield(exited)
    _signal_group(proc.pid, signal.SIGKILL)


async def _settle(
    proc: asyncio.subprocess.Process,
    readers: Sequence[asyncio.Future[bytes]],
    feeder: asyncio.Future[None] | None,
) -> None:
    """Let the pipe tasks finish and the process be reaped (bounded); never leak a task."""
    pending = [t for t in (*readers, feeder) if t is not None]
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(KILL_GRACE):
            await asyncio.gather(*pending, return_exceptions=True)
            await proc.wait()
    for task in pending:
        if not task.done():
            task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
