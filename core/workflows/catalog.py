"""The workflows Baton knows: discovery over several directories, with precedence.

`Catalog(dirs)` reads every `*.yaml` / `*.yml` in each directory (not recursively). A later
directory overrides an earlier one (logged once, naming both files). A broken file never hides
the others: it is listed by `entries()` with its error, and `get()` raises that error.
`reload()` is called before every command, so it only stats files and re-reads those whose
mtime, size, inode or ctime changed (a write that keeps size and mtime, even one that sets
the mtime back with `utime`, still moves the ctime), and parses them again only when the
content's sha256 differs; a broken file is parsed once per change too (one whose YAML is
fine but whose `script:`/`files:` are missing only has those checked again). Files over
`LoadLimits.max_file_bytes` are refused without being read. Like git's "racily clean" check,
a file modified within
`RACY_NS` of when it was read is re-read (and compared by content) until that window has
passed, so a same-size rewrite within one filesystem timestamp tick is never missed.

`secrets` (the runtime's `StepEnvironment.provided`): the step secrets the operator provides.
A workflow whose `secrets:` names any other variable is listed broken (file, line, where to
provide it), so a workflow can never ask for a variable of Baton's own environment
(`PGPASSWORD`, cloud credentials). The set is asked for at every reload; when it changes (a
name added to the secrets file) the index is rebuilt.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from core.errors import UnknownWorkflow, WorkflowDefinitionError
from core.workflows.limits import RACY_NS, LoadLimits
from core.workflows.loader import FilesProblem, NodeReuse, load_workflow_bytes, read_workflow_file, too_large
from core.workflows.model import Workflow
from core.workflows.subworkflows import call_problems
from core.workflows.validation import did_you_mean
from core.workflows.yaml_source import parse_yaml

log = logging.getLogger("baton.catalog")
_SUFFIXES = (".yaml", ".yml")
#: timestamps of some filesystems are coarse (up to 2 s); files younger than this get re-checked
#: libyaml when available; it stops at 1000 levels where the pure-Python loader overflows the stack
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
Stamp = tuple[int, int, int, int]  # (mtime_ns, size, inode, ctime_ns)


@dataclass(frozen=True)
class CatalogEntry:
    """One workflow name: the file that defines it, and either the workflow or its error."""

    name: str
    path: Path
    workflow: Workflow | None
    error: WorkflowDefinitionError | None
    overrides: Path | None = None  # the file of an earlier directory this one replaces

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class _Loaded:
    stamp: Stamp
    read_ns: int  # wall clock just before the file was read
    digest: str  # sha256 of the bytes read
    name: str
    workflow: Workflow | None
    error: WorkflowDefinitionError | None
    reuse: NodeReuse = dataclasses.field(default_factory=NodeReuse, compare=False)

    @property
    def racy(self) -> bool:
        """Modified so close to when it was read that a later same-size write may share its mtime."""
        return self.read_ns - self.stamp[0] < RACY_NS


class Catalog:
    def __init__(
        self,
        dirs: Sequence[Path],
        *,
        limits: LoadLimits | None = None,
        secrets: Callable[[], Collection[str]] | None = None,
    ) -> None:
        self.dirs = [Path(d) for d in dirs]
        self.limits = limits or LoadLimits()
        self._secrets = secrets  # None: any secret name may be declared (a file checked alone)
        self._provided: frozenset[str] | None = None
        self.parses = 0  # files read and parsed so far (each change of a file counts once)
        # keyed by path text: Path objects cost more than the stat calls in a warm reload
        self._files: dict[str, _Loaded] = {}
        self._layout: list[list[str]] = []  # the workflow files of each directory, sorted
        self._entries: dict[str, CatalogEntry] = {}
        self._warned: set[tuple[Path, ...]] = set()
        self.reload()

    def reload(self) -> None:
        """Stat every workflow file; re-read only new or changed ones; rebuild the index."""
        seen: dict[str, Stamp] = {}
        layout: list[list[str]] = []
        for directory in self.dirs:
            found = self._scan(directory)
            layout.append([path for path, _ in found])
            seen.update(found)
        changed = layout != self._layout
        self._layout = layout
        provided = frozenset(self._secrets()) if self._secrets is not None else None
        changed = changed or provided != self._provided
        self._provided = provided
        for path in list(self._files):
            if path not in seen:
                del self._files[path]
                changed = True
        for path, stamp in seen.items():
            cached = self._files.get(path)
            if cached is not None and cached.stamp == stamp and not cached.racy:
                if isinstance(cached.error, FilesProblem):  # the fix may be the script it names
                    loaded = _recheck(cached)
                    changed = changed or loaded is not cached
                    self._files[path] = loaded
                continue
            if cached is None or cached.stamp != stamp or cached.racy:
                if stamp[1] > self.limits.max_file_bytes:
                    loaded = _Loaded(stamp, time.time_ns(), "", Path(path).stem, None,
                                     too_large(path, stamp[1], self.limits))
                else:
                    loaded = _load(Path(path), stamp, cached, self.limits)
                    self.parses += loaded.digest != getattr(cached, "digest", None)
                changed = changed or cached is None or loaded.workflow is not cached.workflow
                changed = changed or str(loaded.error) != str(getattr(cached, "error", None))
                self._files[path] = loaded
        if changed or not self._entries:
            self._entries = self._index()

    def get(self, name: str) -> Workflow:
        entry = self._entries.get(name)
        if entry is None:
            guess = did_you_mean(name, list(self._entries))
            raise UnknownWorkflow(
                f"no workflow named `{name}`" + (f"; did you mean `{guess}`?" if guess else ""),
            )
        if entry.workflow is None:
            raise entry.error or WorkflowDefinitionError("the workflow failed to load", file=str(entry.path))
        return entry.workflow

    def entries(self) -> list[CatalogEntry]:
        """Every workflow name (the winning file for each), broken ones included, by name."""
        return [self._entries[name] for name in sorted(self._entries)]

    def names(self) -> list[str]:
        return sorted(self._entries)

    # -- internals ----------------------------------------------------------------------------

    def _scan(self, directory: Path) -> list[tuple[str, Stamp]]:
        try:
            with os.scandir(directory) as it:
                found = []
                for item in it:
                    if item.name.endswith(_SUFFIXES) and not item.name.startswith("."):
                        info = item.stat()
                        if item.is_file():
                            stamp = (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)
                            found.append((item.path, stamp))
        except FileNotFoundError:
            self._warn_once((directory,), "workflow directory %s does not exist; skipping it", str(directory))
            return []
        except OSError as exc:  # a file named as the directory, no permission to list it
            why = "is not a directory" if isinstance(exc, NotADirectoryError) else f"cannot be read ({exc})"
            self._warn_once((directory,), "workflow directory %s %s; skipping it", str(directory), why)
            return []
        return sorted(found)

    def _index(self) -> dict[str, CatalogEntry]:
        index: dict[str, CatalogEntry] = {}
        for paths in self._layout:
            in_dir: dict[str, Path] = {}
            for text in paths:
                path = Path(text)
                loaded = self._files[text]
                error = loaded.error
                if loaded.name in in_dir:
                    first = in_dir[loaded.name]
                    error = WorkflowDefinitionError(
                        f"workflow name `{loaded.name}` is already used by {first.name} "
                        "in the same directory",
                        file=str(path),
                        line=_name_line(path, self.limits),
                        hint="Give one of the two files a different `name:`.",
                    )
                    index.setdefault(
                        f"{loaded.name} ({path.name})", CatalogEntry(loaded.name, path, None, error)
                    )
                    continue
                in_dir[loaded.name] = path
                workflow = loaded.workflow
                if workflow is not None and self._provided is not None:
                    unknown = secret_error(workflow, path, self._provided, self.limits)
                    if unknown is not None:
                        workflow, error = None, unknown
                earlier = index.get(loaded.name)
                if earlier is not None:
                    self._warn_once(
                        (earlier.path, path),
                        "workflow `%s` from %s overrides %s",
                        loaded.name,
                        str(path),
                        str(earlier.path),
                    )
                index[loaded.name] = CatalogEntry(
                    loaded.name, path, workflow, error, earlier.path if earlier else None
                )
        return _check_calls(index, self.limits)

    def _warn_once(self, key: tuple[Path, ...], message: str, *args: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args, extra={"action": "workflow_catalog"})


def _check_calls(index: dict[str, CatalogEntry], limits: LoadLimits) -> dict[str, CatalogEntry]:
    """`index` with every workflow whose `workflow:` calls loop, nest too deep or name no
    workflow refused (`subworkflows.py`), each with the line of the call."""
    loaded = {name: e.workflow for name, e in index.items() if e.workflow is not None}
    if not any(w.calls() for w in loaded.values()):
        return index
    known = {e.name for e in index.values()}
    for name, problem in call_problems(loaded, known).items():
        entry = index[name]
        error = WorkflowDefinitionError(
            problem.message,
            file=str(entry.path),
            line=_line_of(entry.path, ("nodes", problem.index, "workflow"), limits),
            hint=problem.hint,
        )
        index[name] = dataclasses.replace(entry, workflow=None, error=error)
    return index


def _text(path: Path, limits: LoadLimits | None = None) -> str:
    """The workflow file's text, read as its workflow was (`read_workflow_file`)."""
    return read_workflow_file(path, limits).decode("utf-8")


def _line_of(path: Path, where: tuple[str | int, ...], limits: LoadLimits) -> int:
    """The line of `where` in the file (1 when it cannot be read)."""
    try:
        _, source = parse_yaml(_text(path, limits), file=str(path))
        return source.line_of(where) or 1
    except (UnicodeDecodeError, WorkflowDefinitionError):
        return 1


def secret_error(
    workflow: Workflow, path: Path, provided: Collection[str], limits: LoadLimits | None = None
) -> WorkflowDefinitionError | None:
    """The first secret `workflow` declares that the operator does not provide, as this
    file's error (its line, and where the operator provides step secrets), or None."""
    places: list[tuple[tuple[str | int, ...], str]] = [
        (("secrets", i), n) for i, n in enumerate(workflow.secrets)
    ]
    for j, node in enumerate(workflow.nodes):
        places += [(("nodes", j, "secrets", i), n) for i, n in enumerate(node.secrets)]
    missing = next(((where, name) for where, name in places if name not in provided), None)
    if missing is None:
        return None
    where, name = missing
    line = 1
    try:
        _, source = parse_yaml(_text(path, limits), file=str(path))
        line = source.line_of(where) or 1
    except (UnicodeDecodeError, WorkflowDefinitionError):
        pass  # the file changed under us: its first line will do until the next reload
    return WorkflowDefinitionError(
        f"secret `{name}` is not a step secret the operator provides; a workflow may name only "
        "those (never a variable of Baton's own environment)",
        file=str(path),
        line=line,
        hint=f"Ask the operator to add `{name}=<value>` to the file BATON_SECRETS_FILE names, or to "
        f"list `{name}` in BATON_STEP_SECRETS and set it in Baton's environment.",
    )


def _recheck(cached: _Loaded) -> _Loaded:
    """A file whose YAML is fine but whose script/files were not: look at those again."""
    assert isinstance(cached.error, FilesProblem)
    error = cached.error.recheck()
    if error is None:
        return dataclasses.replace(cached, workflow=cached.error.workflow, error=None)
    return cached if str(error) == str(cached.error) else dataclasses.replace(cached, error=error)


def _load(path: Path, stamp: Stamp, cached: _Loaded | None, limits: LoadLimits) -> _Loaded:
    """Read `path`; when its bytes equal the cached ones, keep the cached workflow object."""
    read_ns = time.time_ns()
    try:
        data = read_workflow_file(path, limits)
    except WorkflowDefinitionError as error:  # unreadable, or a link out of its directory
        return _Loaded(stamp, read_ns, "", path.stem, None, error)
    digest = hashlib.sha256(data).hexdigest()
    if cached is not None and cached.digest == digest:
        same = dataclasses.replace(cached, stamp=stamp, read_ns=read_ns)
        return _recheck(same) if isinstance(same.error, FilesProblem) else same
    reuse = cached.reuse if cached is not None else NodeReuse()
    try:
        workflow = _load_bytes(data, path, limits, reuse)
    except WorkflowDefinitionError as exc:
        if cached is None or str(cached.error) != str(exc):
            log.warning("workflow file %s is broken: %s", path, exc, extra={"action": "workflow_load_failed"})
            return _Loaded(stamp, read_ns, digest, _guess_name(data, path), None, exc, reuse)
        return dataclasses.replace(cached, stamp=stamp, read_ns=read_ns, digest=digest)
    return _Loaded(stamp, read_ns, digest, workflow.name, workflow, None, reuse)


def _load_bytes(data: bytes, path: Path, limits: LoadLimits, reuse: NodeReuse) -> Workflow:
    """`load_workflow_bytes`, with any unexpected failure turned into this file's error."""
    try:
        return load_workflow_bytes(data, file=str(path), limits=limits, reuse=reuse)
    except WorkflowDefinitionError:
        raise
    except Exception as exc:  # one broken file must never take the bot down
        log.exception(
            "loading workflow file %s failed unexpectedly", path, extra={"action": "workflow_load_failed"}
        )
        raise WorkflowDefinitionError(
            f"the file could not be loaded ({type(exc).__name__}: {exc})",
            file=str(path),
            line=1,
            hint="Simplify the file until it loads, and report the failure.",
        ) from exc


def _guess_name(data: bytes, path: Path) -> str:
    """The `name:` of a broken file when it can still be read, else the file's stem."""
    try:
        parsed = yaml.load(data.decode("utf-8"), Loader=_SafeLoader)  # a safe loader
    except Exception:  # any failure (YAML error, RecursionError) means "no name"
        return path.stem
    name = parsed.get("name") if isinstance(parsed, dict) else None
    return name if isinstance(name, str) and name.strip() else path.stem


def _name_line(path: Path, limits: LoadLimits) -> int:
    """The line of the top-level `name:` key (1 when it cannot be found)."""
    try:
        lines = _text(path, limits).splitlines()
    except (UnicodeDecodeError, WorkflowDefinitionError):
        return 1
    return next((i for i, line in enumerate(lines, 1) if line.startswith("name:")), 1)
