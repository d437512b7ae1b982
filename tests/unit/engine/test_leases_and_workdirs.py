"""Lease owner ids, liveness of local owners, and the artifact paths of a run directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.engine.leases import new_owner, owner_pid, pid_alive
from core.engine.workdirs import (
    ArtifactOutside,
    capture_artifacts,
    missing_artifacts,
    restore_artifacts,
    run_dirs,
)


def test_owner_ids_name_replica_pid_and_a_nonce() -> None:
    one, two = new_owner("host-a"), new_owner("host-a")
    assert one != two
    replica, pid, nonce = one.split(":")
    assert (replica, int(pid)) == ("host-a", os.getpid()) and len(nonce) == 8
    assert owner_pid(one) == os.getpid()
    assert owner_pid("console:ana") is None
    assert owner_pid(None) is None


def test_a_finished_process_is_not_alive() -> None:
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True
    )
    assert pid_alive(os.getpid())
    assert not pid_alive(int(child.stdout))


def test_artifacts_round_trip_and_never_leave_the_run_directory(tmp_path: Path) -> None:
    dirs = run_dirs(tmp_path, "run1")
    assert dirs.artifacts.is_dir() and dirs.artifacts.parent == dirs.root
    (dirs.root / "dist").mkdir()
    (dirs.root / "dist" / "a.whl").write_bytes(b"A")
    (dirs.root / "dist" / "notes.txt").write_bytes(b"N")

    captured = capture_artifacts(dirs.root, ["dist/*.whl"])
    assert captured == {"dist/a.whl": b"A"}

    other = run_dirs(tmp_path, "run2")
    assert missing_artifacts(other.root, {"dist/a.whl": "d1"}) == {"dist/a.whl": "d1"}
    restore_artifacts(other.root, captured)
    assert (other.root / "dist" / "a.whl").read_bytes() == b"A"
    assert missing_artifacts(other.root, {"dist/a.whl": "d1"}) == {}

    for bad in ("../escape", "/etc/passwd"):
        with pytest.raises(ValueError, match="leaves the run directory"):
            restore_artifacts(other.root, {bad: b"x"})
        with pytest.raises(ValueError, match="leaves the run directory"):
            capture_artifacts(other.root, [bad])


def test_an_artifact_that_is_a_symlink_out_of_the_run_directory_is_refused(tmp_path: Path) -> None:
    dirs = run_dirs(tmp_path / "data", "r1")
    secret = tmp_path / "outside.txt"
    secret.write_text("not yours")
    (dirs.root / "dist").mkdir()
    os.symlink(secret, dirs.root / "dist" / "leak.whl")
    with pytest.raises(ArtifactOutside, match="leads out of the run directory"):
        capture_artifacts(dirs.root, ["dist/*.whl"])


def test_restoring_never_writes_through_a_symlinked_directory(tmp_path: Path) -> None:
    dirs = run_dirs(tmp_path / "data", "r1")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, dirs.root / "dist")
    with pytest.raises(ArtifactOutside):
        restore_artifacts(dirs.root, {"dist/x.whl": b"data"})
    assert list(outside.iterdir()) == []
