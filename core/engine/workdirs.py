"""Per-run working directories and the artifacts nodes leave in them.

Layout: `<data_dir>/runs/<run_id>/` is the working directory of every node of the run;
`artifacts/` inside it is exported as `BATON_ARTIFACTS_DIR`. A node's `artifacts:` globs
are relative to the run directory; matching files are captured after the node completes
and written back on a cache hit, so a run that re-uses a result also has its files.

The run directory belongs to its steps: any of them may leave a symlink, a FIFO or a hard
link at any name, and may swap a directory for a symlink while Baton works (a parallel step
of the same run). Baton itself, outside the sandbox and often with more rights than its
steps, therefore reads and writes there only through `read_in` and `write_in`: every
directory on the way is opened without following a symlink (`O_NOFOLLOW`, relative to the
one before), a file written is a new one (whatever stood at its name is removed, never
followed or truncated), and a file read must be a regular one. A step that plants
`.outputs/<node>.1.log -> /etc/passwd` gets an error, not Baton writing its output there.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO


@dataclass(frozen=True, slots=True)
class RunDirs:
    root: Path
    artifacts: Path


def run_dirs(data_dir: Path, run_id: str) -> RunDirs:
    """Create (if needed) and return the run's working and artifacts directories. (A tick
    launches hundreds of runs: `runs/` is resolved once, and a new run's directories cost two
    `mkdir`s, not a failed one first and a walk up the path.)"""
    root = (_runs(data_dir) if data_dir.is_absolute() else (data_dir / "runs").resolve()) / run_id
    artifacts = root / "artifacts"
    try:
        root.mkdir()
    except FileExistsError:
        pass
    except FileNotFoundError:  # `runs/` itself is new
        root.mkdir(parents=True, exist_ok=True)
    try:
        artifacts.mkdir()
    except FileExistsError:
        if not stat.S_ISDIR(artifacts.lstat().st_mode):  # a link or a file a step left there:
            artifacts.unlink()  # the name is Baton's again (the link itself goes, never its target)
            artifacts.mkdir()
    return RunDirs(root=root, artifacts=artifacts)


@functools.lru_cache(maxsize=16)
def _runs(data_dir: Path) -> Path:
    """`<data_dir>/runs`, resolved (an absolute `data_dir`: the answer does not depend on the
    working directory)."""
    return (data_dir / "runs").resolve()


#: files one step's `artifacts:` may keep (each is a row of the store)
MAX_ARTIFACT_FILES = 10_000


class ArtifactOutside(ValueError):
    """An artifact path or glob that leads out of the run directory (`..`, absolute, a symlink)."""


class ArtifactsTooLarge(ValueError):
    """A step's artifacts are more than Baton keeps: they are read into its memory and stored
    in its database, so a build's whole output matched by a glob is refused, not kept."""


def _safe_relative(path: str) -> PurePosixPath:
    rel = PurePosixPath(path)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise ArtifactOutside(f"artifact path `{path}` leaves the run directory")
    return rel


def _inside(root: Path, path: Path, shown: str) -> Path:
    """`path` with symlinks resolved, or `ArtifactOutside` when that leaves `root`."""
    resolved = path.resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise ArtifactOutside(f"artifact `{shown}` leads out of the run directory (to {resolved})")
    return resolved


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO never blocks


def _directory(root: Path, parts: Sequence[str], shown: str, *, create: bool) -> int:
    """A descriptor of `root`/`parts`, each part a real directory (made when `create`), never
    a symlink: `ArtifactOutside` otherwise."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                inner = os.open(part, _DIRECTORY, dir_fd=fd)
            except OSError as exc:  # ELOOP: a symlink; ENOTDIR: a file; ENOENT
                why = f"`{shown}` is not reached through directories of the run: {exc.strerror}"
                raise ArtifactOutside(why) from exc
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _parts(root: Path, path: Path | str) -> tuple[str, ...]:
    try:
        rel = Path(path).relative_to(root) if Path(path).is_absolute() else Path(path)
    except ValueError:
        raise ArtifactOutside(f"`{path}` is not in the run directory {root}") from None
    return _safe_relative(PurePosixPath(rel).as_posix()).parts


def write_in(root: Path, path: Path | str) -> BinaryIO:
    """A new file at `path` (under `root`, or relative to it), open for writing: its
    directories made or reached without following a symlink, whatever stood at its name
    removed first (a symlink, a hard link: never followed, never truncated)."""
    *dirs, name = _parts(root, path)
    fd = _directory(root, dirs, str(path), create=True)
    try:
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass  # (nothing there: the usual case)
        except OSError as exc:  # a directory (EISDIR, EPERM): not ours to remove
            raise ArtifactOutside(f"`{path}` is taken by a directory of the run") from exc
        try:
            return os.fdopen(os.open(name, _NEW_FILE, 0o644, dir_fd=fd), "wb")
        except FileExistsError:  # put there again since (a step racing Baton)
            raise ArtifactOutside(f"`{path}` was put back by a step while Baton wrote it") from None
    finally:
        os.close(fd)


def read_in(root: Path, path: Path | str, offset: int = 0, size: int = -1) -> bytes:
    """The content of the regular file at `path` under `root` (`size` bytes from `offset`;
    all of it by default), reached without following a symlink: `ArtifactOutside` when it is
    not one (a symlink, a FIFO, a device)."""
    *dirs, name = _parts(root, path)
    fd = _directory(root, dirs, str(path), create=False)
    try:
        try:
            file_fd = os.open(name, _READ_FILE, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise
            raise ArtifactOutside(f"`{path}` is not a file of the run: {exc.strerror}") from exc
    finally:
        os.close(fd)
    with os.fdopen(file_fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file_fd).st_mode):
            raise ArtifactOutside(f"`{path}` is not a regular file")
        os.set_blocking(file_fd, True)
        file.seek(offset)
        return file.read(size)


def capture_artifacts(root: Path, globs: Iterable[str], limit: int) -> dict[str, bytes]:
    """Files under `root` matching any glob: relative POSIX path -> content. A match that is
    (or lies under) a symlink out of `root` raises `ArtifactOutside`; what a match resolves to
    is read through `read_in` (a directory swapped for a symlink since is refused). More than
    `limit` bytes in all, or `MAX_ARTIFACT_FILES` files, raise `ArtifactsTooLarge` (no more
    of a file is read than would fit)."""
    found: dict[str, bytes] = {}
    room = limit
    resolved_root = root.resolve()
    for pattern in globs:
        _safe_relative(pattern)
        for path in sorted(root.glob(pattern)):
            rel = path.relative_to(root).as_posix()
            real = _inside(root, path, rel)
            if rel in found or not real.is_file():
                continue
            if len(found) == MAX_ARTIFACT_FILES:
                raise ArtifactsTooLarge(f"they are more than {MAX_ARTIFACT_FILES:,} files")
            data = read_in(resolved_root, real, size=room + 1)
            if len(data) > room:
                raise ArtifactsTooLarge(
                    f"`{rel}` takes them over {limit:,} bytes (BATON_MAX_ARTIFACT_BYTES)"
                )
            found[rel] = data
            room -= len(data)
    return found


def remove_run_dir(data_dir: Path, run_id: str) -> bool:
    """Delete the run's directory and everything its steps left in it (a pruned run's, whose
    steps are all over): without following a link they planted (`shutil.rmtree`'s
    descriptor-based walk), and through a directory they made unreadable or unwritable (made
    its owner's again, then tried once more). False when there was none; `OSError` when it
    cannot be deleted."""
    if not run_id or run_id in (".", "..") or "/" in run_id or "\0" in run_id:
        raise ValueError(f"not a run id: {run_id!r}")
    root = (data_dir / "runs" / run_id).absolute()
    if not os.path.lexists(root):
        return False
    try:
        shutil.rmtree(root)
    except PermissionError:  # (Baton as root is never refused)
        _unlock(str(root))
        shutil.rmtree(root)
    return True


def _unlock(path: str) -> None:
    """Every directory under `path` (itself included) searchable and writable by its owner,
    top down; links are neither followed nor changed."""
    with contextlib.suppress(OSError):
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return
        os.chmod(path, 0o700)
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    _unlock(entry.path)


def missing_artifacts(root: Path, artifacts: Mapping[str, str]) -> dict[str, str]:
    """The entries of `artifacts` (path -> digest) whose file is absent under `root`."""
    return {rel: digest for rel, digest in artifacts.items() if not (root / _safe_relative(rel)).is_file()}


def restore_artifacts(root: Path, files: Mapping[str, bytes]) -> None:
    """Write captured files back under `root` (atomically per file: a new file renamed over
    the name, in a directory reached without following a symlink)."""
    for rel, data in files.items():
        *dirs, name = _safe_relative(rel).parts
        tmp = PurePosixPath(*dirs, f".{name}.baton-tmp")
        with write_in(root, tmp.as_posix()) as file:
            file.write(data)
        fd = _directory(root, dirs, rel, create=False)
        try:
            os.replace(tmp.name, name, src_dir_fd=fd, dst_dir_fd=fd)  # a symlink there is replaced
        finally:
            os.close(fd)
