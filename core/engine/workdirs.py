"""Per-run working directories and the artifacts nodes leave in them.

Layout: `<data_dir>/runs/<run_id>/` is the working directory of every node of the run;
`artifacts/` inside it is exported as `BATON_ARTIFACTS_DIR`. A node's `artifacts:` globs
are relative to the run directory; matching files are captured after the node completes
and written back on a cache hit, so a run that re-uses a result also has its files.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


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
    artifacts.mkdir(exist_ok=True)
    return RunDirs(root=root, artifacts=artifacts)


@functools.lru_cache(maxsize=16)
def _runs(data_dir: Path) -> Path:
    """`<data_dir>/runs`, resolved (an absolute `data_dir`: the answer does not depend on the
    working directory)."""
    return (data_dir / "runs").resolve()


class ArtifactOutside(ValueError):
    """An artifact path or glob that leads out of the run directory (`..`, absolute, a symlink)."""


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


def capture_artifacts(root: Path, globs: Iterable[str]) -> dict[str, bytes]:
    """Files under `root` matching any glob: relative POSIX path -> content. A match that is
    (or lies under) a symlink out of `root` raises `ArtifactOutside`."""
    found: dict[str, bytes] = {}
    for pattern in globs:
        _safe_relative(pattern)
        for path in sorted(root.glob(pattern)):
            rel = path.relative_to(root).as_posix()
            real = _inside(root, path, rel)
            if real.is_file():
                found[rel] = real.read_bytes()
    return found


def missing_artifacts(root: Path, artifacts: Mapping[str, str]) -> dict[str, str]:
    """The entries of `artifacts` (path -> digest) whose file is absent under `root`."""
    return {rel: digest for rel, digest in artifacts.items() if not (root / _safe_relative(rel)).is_file()}


def restore_artifacts(root: Path, files: Mapping[str, bytes]) -> None:
    """Write captured files back under `root` (atomically per file)."""
    for rel, data in files.items():
        target = root / _safe_relative(rel)
        _inside(root, target.parent, rel)  # no symlinked directory leads the write elsewhere
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.baton-tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
