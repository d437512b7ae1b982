"""Load a workflow file: YAML -> pydantic models -> checks, every error with file:line and fix.

    load_workflow_file(path)  -> Workflow          raises WorkflowDefinitionError
    read_workflow_file(path)  -> bytes             the file, never from outside its directory
    load_workflow_text(text, file=…)               the same for text (tests, previews)
    script_source(workflow, node) -> str           the code a `script:` node runs
    files_content(workflow, node) -> {path: sha256} the declared `files:` (cache identity)

Relative paths (`script: scripts/x.py`, `files:`) resolve against the workflow file's
directory and must stay inside it once symlinks are resolved (checked at load and again
whenever the file is read), and so must a workflow file itself: a symlink in a workflow
directory may name another file of that directory (`deploy.yaml -> versions/deploy-v2.yaml`), never one
elsewhere, which Baton (perhaps root) would read for an author who cannot. `artifacts:`
globs are relative to the run directory and may not leave it. `LoadLimits` bounds the
file's size, its YAML alias expansion and its timeouts.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from core.errors import WorkflowDefinitionError
from core.store.records import ReplayClass
from core.workflows.limits import RACY_NS, LoadLimits, gc_paused
from core.workflows.model import Node, Workflow, is_script_path
from core.workflows.pydantic_errors import translate
from core.workflows.validation import Problem, problems
from core.workflows.yaml_source import SourceMap, parse_yaml


def load_workflow_file(path: Path, *, limits: LoadLimits | None = None) -> Workflow:
    """Read, parse, validate and check one workflow file."""
    limits = limits or LoadLimits()
    return load_workflow_bytes(read_workflow_file(path, limits), file=str(path), limits=limits)


def read_workflow_file(path: Path, limits: LoadLimits | None = None) -> bytes:
    """The bytes of the workflow file `path`: a regular file in `path`'s own directory once
    symlinks are resolved, opened without following a link put there since (`O_NOFOLLOW`) and
    without waiting on a FIFO (`O_NONBLOCK`). `WorkflowDefinitionError` otherwise, naming no
    target (the link's target may be what its author may not see)."""
    limits = limits or LoadLimits()
    real = contained(path.parent, path.name)
    if real is None:
        raise WorkflowDefinitionError(
            "the file is a symlink out of its workflow directory; Baton reads workflows only from "
            "the directories it was given",
            file=str(path),
            hint="Point the link at a file in the same directory, copy the file in, or add its "
            "directory to BATON_WORKFLOW_DIRS.",
        )
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise WorkflowDefinitionError(
                    "not a regular file", file=str(path), hint="Keep workflows in plain files."
                )
            if info.st_size > limits.max_file_bytes:
                raise too_large(str(path), info.st_size, limits)
            data = file.read(limits.max_file_bytes + 1)
    except OSError as exc:
        raise WorkflowDefinitionError(
            f"cannot read the file ({exc.strerror or exc})",
            file=str(path),
            hint="Check that the file exists and is readable.",
        ) from exc
    if len(data) > limits.max_file_bytes:  # it grew while it was read
        raise too_large(str(path), len(data), limits)
    return data


def too_large(file: str, size: int, limits: LoadLimits) -> WorkflowDefinitionError:
    return WorkflowDefinitionError(
        f"the file is {size:,} bytes, over the limit of {limits.max_file_bytes:,}",
        file=file,
        line=1,
        hint="Split it into smaller workflows, or raise BATON_WORKFLOW_MAX_BYTES.",
    )


@dataclass
class NodeReuse:
    """The validated nodes of a file's last good version, by the text of their item in the
    `nodes:` list (`SourceMap.node_texts`: its column and its exact text). Loading the next
    version re-uses the node object of every item whose text did not change, so an edit
    re-validates and re-prepares only the nodes it touched."""

    by_text: dict[tuple[int, str], Node] = field(default_factory=dict)
    replay_default: ReplayClass | None = None  # the `defaults.replay` they were checked under


def load_workflow_bytes(
    data: bytes, *, file: str, limits: LoadLimits | None = None, reuse: NodeReuse | None = None
) -> Workflow:
    """Decode UTF-8 and load; `file` names it in errors and anchors relative paths."""
    limits = limits or LoadLimits()
    if len(data) > limits.max_file_bytes:
        raise too_large(file, len(data), limits)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkflowDefinitionError(
            f"file is not UTF-8 text ({exc.reason} at byte {exc.start})",
            file=file,
            hint="Save the workflow file as UTF-8.",
        ) from exc
    return load_workflow_text(text, file=file, limits=limits, reuse=reuse)


def load_workflow_text(
    text: str, *, file: str = "<workflow>", limits: LoadLimits | None = None, reuse: NodeReuse | None = None
) -> Workflow:
    """Parse and check workflow YAML; `file` names it in errors and anchors relative paths.
    With `reuse` (the file's previous version), unchanged nodes are not validated again, and
    `reuse` is updated to this version when it loads."""
    limits = limits or LoadLimits()
    with gc_paused():
        return _load_text(text, file, limits, reuse)


def _load_text(text: str, file: str, limits: LoadLimits, reuse: NodeReuse | None) -> Workflow:
    data, source = parse_yaml(text, file=file, max_alias_nodes=limits.max_alias_nodes)
    if not isinstance(data, dict):
        raise WorkflowDefinitionError(
            "a workflow file must be a YAML mapping with `name:` and `nodes:`",
            file=file,
            line=source.line_of(()) or 1,
            hint="Start the file with `name: <workflow-name>` and list the steps under `nodes:`.",
        )
    if "source" in data:  # a model field the loader sets; not part of the format
        raise WorkflowDefinitionError(
            "unknown key `source` in the workflow",
            file=file,
            line=source.line_of(("source",)),
            hint="Remove it; the loader records where a workflow came from.",
        )
    raw_nodes = data.get("nodes")
    texts = source.node_texts
    known: set[int] = set()  # ids of re-used nodes (alive in `workflow` below)
    if reuse is not None and reuse.by_text and isinstance(raw_nodes, list) and len(texts) == len(raw_nodes):
        fresh = list(raw_nodes)
        for index, key in enumerate(texts):
            node = reuse.by_text.get(key)
            if node is not None:
                fresh[index] = node  # a validated model: pydantic takes it as it is
                known.add(id(node))
        data = {**data, "nodes": fresh}
    try:  # `source` given with the file's keys: a copy to set it cost a big file ~1.5 ms
        workflow = Workflow.model_validate({**data, "source": file})
    except ValidationError as exc:
        if known:  # errors are reported against the file's own data
            return _load_text(text, file, limits, None)
        raise _first_error(exc.errors(), data, source, file) from exc
    same_rules = reuse is not None and reuse.replay_default == workflow.defaults.replay
    found = problems(workflow, checked=known if same_rules else set()) or list(
        _limit_problems(workflow, limits)
    )
    if found:
        raise _as_error(found[0], source, file)
    missing = files_error(workflow, source, file)
    if missing is not None:
        raise missing
    if reuse is not None and len(texts) == len(workflow.nodes):
        reuse.by_text = dict(zip(texts, workflow.nodes, strict=True))
        reuse.replay_default = workflow.defaults.replay
    return workflow


class FilesProblem(WorkflowDefinitionError):
    """A workflow whose YAML is fine but whose `script:`/`files:` are missing or outside its
    directory: `recheck()` looks at the files again without parsing the YAML."""

    def __init__(self, problem: Problem, workflow: Workflow, source: SourceMap, file: str) -> None:
        base = _as_error(problem, source, file)
        super().__init__(problem.message, file=file, line=base.line, hint=problem.hint)
        self.workflow = workflow
        self._source = source

    def recheck(self) -> FilesProblem | None:
        return files_error(self.workflow, self._source, self.file)


def files_error(workflow: Workflow, source: SourceMap, file: str) -> FilesProblem | None:
    found = next(_file_problems(workflow), None)
    return None if found is None else FilesProblem(found, workflow, source, file)


def _first_error(
    errors: list[ErrorDetails], data: dict[str, Any], source: SourceMap, file: str
) -> WorkflowDefinitionError:
    """The error nearest the top of the file, translated."""

    def where(error: ErrorDetails) -> tuple[int, int]:
        line = source.line_of(_pointer(error))
        return (line if line is not None else 10**9, 0)

    error = min(errors, key=where)
    message, hint = translate(error, data)
    return WorkflowDefinitionError(message, file=file, line=source.line_of(_pointer(error)), hint=hint)


def _pointer(error: ErrorDetails) -> tuple[str | int, ...]:
    """The path to point at: for custom errors, the key named in `ctx["key"]`, or the path
    below the error's location in `ctx["path"]` (a workflow's check about one of its items)."""
    loc = tuple(error["loc"])
    ctx = error.get("ctx") or {}
    key, path = ctx.get("key"), ctx.get("path")
    if isinstance(path, tuple):
        return (*loc, *path)
    return (*loc, key) if isinstance(key, str) else loc


def _as_error(problem: Problem, source: SourceMap, file: str) -> WorkflowDefinitionError:
    if problem.line_in_text is not None:
        line = source.text_line(problem.loc, problem.line_in_text)
    else:
        line = source.line_of(problem.loc)
    return WorkflowDefinitionError(problem.message, file=file, line=line, hint=problem.hint)


# -- script and declared files --------------------------------------------------------------


def base_dir(workflow: Workflow) -> Path:
    """The directory relative paths of `workflow` resolve against."""
    return Path(workflow.source).parent if workflow.source else Path.cwd()


def script_path(workflow: Workflow, node: Node) -> Path | None:
    """The file a `script:` node names, or None for inline code (or a non-script node)."""
    if node.script is None or not is_script_path(node.script):
        return None
    return base_dir(workflow) / node.script.strip()


def contained(root: Path, name: str) -> Path | None:
    """`name` (relative) resolved under `root`, symlinks included; None when it leaves `root`."""
    if PurePosixPath(name).is_absolute() or Path(name).is_absolute():
        return None
    real_root = root.resolve()
    resolved = (real_root / name).resolve()
    return resolved if resolved.is_relative_to(real_root) else None


def _inside(workflow: Workflow, node: Node, name: str, what: str) -> Path:
    path = contained(base_dir(workflow), name)
    if path is None:
        raise WorkflowDefinitionError(
            f"{what} `{name}` of node `{node.id}` is outside the workflow's directory",
            file=workflow.source,
            hint=f"Keep it under {base_dir(workflow)}; paths and symlinks may not lead out of it.",
        )
    return path


def script_source(workflow: Workflow, node: Node) -> str:
    """The Python code a `script:` node runs (the file's content, or the inline code)."""
    if node.script is None:
        raise ValueError(f"node `{node.id}` is a {node.kind} node, not a script")
    if script_path(workflow, node) is None:
        return node.script
    path = _inside(workflow, node, node.script.strip(), "script")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkflowDefinitionError(
            f"script `{node.script.strip()}` of node `{node.id}` cannot be read ({_why(exc)})",
            file=workflow.source,
            hint=f"Create {path} or fix `script:`.",
        ) from exc


#: a script of the workflow's directory a bash step runs by a fixed path: `$BATON_WORKFLOW_DIR/<path>`
#: (or `${BATON_WORKFLOW_DIR}`, quoted or not) where a command goes, or as the file an interpreter runs
_RUN_FILE = re.compile(
    r"""(?:^|[;&|(){}]|\b(?:then|do|else|exec)\b                  # where a command goes
         |\b(?:bash|sh|zsh|dash|ksh|python3?|node|ruby|perl|source)\b
          (?:[ \t]+-[A-Za-z-]+)*                                  # the file an interpreter runs
         |(?:^|[;&|(])[ \t]*\.)                                   # `. file`
        [ \t]*["']?\$(?:\{BATON_WORKFLOW_DIR\}|BATON_WORKFLOW_DIR(?![A-Za-z0-9_]))["']?
        /([A-Za-z0-9_.@%+=:,/-]+)""",
    re.VERBOSE | re.MULTILINE,
)


def names_workflow_files(node: Node) -> bool:
    """Whether a bash step's text runs a script by a path under `$BATON_WORKFLOW_DIR` (no I/O)."""
    text = node.bash
    return text is not None and "BATON_WORKFLOW_DIR" in text and _RUN_FILE.search(text) is not None


def named_files(workflow: Workflow, node: Node) -> list[str]:
    """The scripts of the workflow's directory a bash step runs by a fixed path
    (`"$BATON_WORKFLOW_DIR/scripts/deploy.sh" {{ host }}`, `python3 "$BATON_WORKFLOW_DIR/x.py"`)
    that its `files:` does not list: they count as listed, so editing the script re-runs the
    step instead of resuming past it with a result of the old script. A file the step only
    reads or tests (`cat`, `test -f`, `grep … file`: data, a switch) is not its code: it counts
    only when listed. A path that is not a file of the directory is left out."""
    if not names_workflow_files(node):
        return []
    root = base_dir(workflow)
    found: list[str] = []
    for match in _RUN_FILE.finditer(node.bash or ""):
        name = match.group(1)
        path = contained(root, name)
        if name not in node.files and name not in found and path is not None and path.is_file():
            found.append(name)
    return found


def files_content(workflow: Workflow, node: Node) -> dict[str, str]:
    """sha256 (hex) of each declared `files:` entry, and of each file of the workflow's
    directory a bash step names (`named_files`), keyed by the path as written."""
    digests: dict[str, str] = {}
    for name in (*node.files, *named_files(workflow, node)):
        path = _inside(workflow, node, name, "file")
        try:
            digests[name] = file_sha256(path)
        except OSError as exc:
            raise WorkflowDefinitionError(
                f"file `{name}` declared by node `{node.id}` cannot be read ({_why(exc)})",
                file=workflow.source,
                hint=f"Create {path} or remove it from `files:`.",
            ) from exc
    return digests


#: sha256 of files read before, by what `stat` says of them (`file_sha256`)
_DIGESTS: dict[tuple[str, int, int, int, int, int], str] = {}
_DIGESTS_KEPT = 4096


def file_sha256(path: Path) -> str:
    """The sha256 (hex) of the file at `path`, read a block at a time (a `files:` entry may be
    a dataset of gigabytes: it was read whole into memory, on the event loop, at every run's
    start), and kept by its `stat` (device, inode, size, mtime and ctime: any write moves the
    ctime), like git's index: an unchanged file is not read again. `OSError` as `open`'s."""
    with open(path, "rb") as file:
        info = os.fstat(file.fileno())
        key = (str(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        if (known := _DIGESTS.get(key)) is not None:
            return known
        digest = hashlib.file_digest(file, "sha256").hexdigest()
    if time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) >= RACY_NS:
        if len(_DIGESTS) >= _DIGESTS_KEPT:
            _DIGESTS.clear()
        _DIGESTS[key] = digest
    return digest


def _why(exc: Exception) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)


def _limit_problems(workflow: Workflow, limits: LoadLimits) -> Iterator[Problem]:
    cap = limits.max_timeout
    hint = f"Use at most {cap:g} seconds, or raise BATON_MAX_STEP_TIMEOUT."
    if workflow.defaults.timeout > cap:
        yield Problem(
            ("defaults", "timeout"),
            f"`timeout: {workflow.defaults.timeout:g}` is over the limit of {cap:g} s",
            hint,
        )
    for index, node in enumerate(workflow.nodes):
        if node.timeout is not None and node.timeout > cap:
            yield Problem(
                ("nodes", index, "timeout"),
                f"`timeout: {node.timeout:g}` of node `{node.id}` is over the limit of {cap:g} s",
                hint,
            )


def _file_problems(workflow: Workflow) -> Iterator[Problem]:
    root = base_dir(workflow)
    outside = "Keep it under the workflow's directory; paths and symlinks may not lead out of it."
    for index, node in enumerate(workflow.nodes):
        at = ("nodes", index)
        if node.script is not None:
            name = node.script.strip()
            path = script_path(workflow, node)
            if path is None:
                yield from _syntax_problem(node.script, (*at, "script"), f"inline script of `{node.id}`")
            elif contained(root, name) is None:
                yield Problem(
                    (*at, "script"),
                    f"script `{name}` of node `{node.id}` is outside the workflow's directory",
                    outside,
                )
            elif not path.is_file():
                yield Problem(
                    (*at, "script"),
                    f"script `{name}` of node `{node.id}` does not exist ({path})",
                    "Fix the path (relative to the workflow file) or put the code inline.",
                )
            else:
                try:
                    code = path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    yield Problem(
                        (*at, "script"),
                        f"script `{name}` of node `{node.id}` cannot be read ({_why(exc)})",
                        "Save the script as readable UTF-8 text.",
                    )
                    continue
                problem = next(_syntax_problem(code, (*at, "script"), ""), None)
                if problem is not None:
                    yield Problem(
                        problem.loc,
                        f"script `{name}` of node `{node.id}` has a Python syntax error "
                        f"at its line {problem.line_in_text}: {problem.message}",
                        problem.hint,
                    )
        for file_index, name in enumerate(node.files):
            if contained(root, name) is None:
                yield Problem(
                    (*at, "files", file_index),
                    f"file `{name}` declared by node `{node.id}` is outside the workflow's directory",
                    outside,
                )
            elif not (root / name).is_file():
                yield Problem(
                    (*at, "files", file_index),
                    f"file `{name}` declared by node `{node.id}` does not exist ({root / name})",
                    "Fix the path (relative to the workflow file) or remove it from `files:`.",
                )
        for glob_index, pattern in enumerate(node.artifacts):
            if not artifact_glob_ok(pattern):
                yield Problem(
                    (*at, "artifacts", glob_index),
                    f"artifact pattern `{pattern}` of node `{node.id}` leaves the run directory",
                    "Use a relative pattern without `..` (e.g. `dist/*.whl`): artifacts live in the run "
                    "directory.",
                )


def artifact_glob_ok(pattern: str) -> bool:
    """A glob relative to the run directory that cannot climb out of it."""
    rel = PurePosixPath(pattern)
    return bool(pattern.strip()) and not rel.is_absolute() and ".." not in rel.parts and "\x00" not in pattern


def _syntax_problem(code: str, loc: tuple[str | int, ...], what: str) -> Iterator[Problem]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. SyntaxWarning for "\d"; not our concern here
            compile(code, what or "<script>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        message = exc.msg if not what else f"{what} has a Python syntax error: {exc.msg}"
        yield Problem(loc, message, "Fix the Python code.", exc.lineno or 1)
