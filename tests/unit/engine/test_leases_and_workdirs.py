"""Lease owner ids, liveness of local owners, and the artifact paths of a run directory."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from core.engine import workdirs
from core.engine.leases import new_owner, owner_pid, pid_alive
from core.engine.workdirs import (
    ArtifactOutside,
    ArtifactsTooLarge,
    capture_artifacts,
    missing_artifacts,
    read_in,
    remove_run_dir,
    restore_artifacts,
    run_dirs,
    write_in,
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


LIMIT = 1_000_000


def test_artifacts_round_trip_and_never_leave_the_run_directory(tmp_path: Path) -> None:
    dirs = run_dirs(tmp_path, "run1")
    assert dirs.artifacts.is_dir() and dirs.artifacts.parent == dirs.root
    (dirs.root / "dist").mkdir()
    (dirs.root / "dist" / "a.whl").write_bytes(b"A")
    (dirs.root / "dist" / "notes.txt").write_bytes(b"N")

    captured = capture_artifacts(dirs.root, ["dist/*.whl"], LIMIT)
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
            capture_artifacts(other.root, [bad], LIMIT)


def test_an_artifact_that_is_a_symlink_out_of_the_run_directory_is_refused(tmp_path: Path) -> None:
    dirs = run_dirs(tmp_path / "data", "r1")
    secret = tmp_path / "outside.txt"
    secret.write_text("not yours")
    (dirs.root / "dist").mkdir()
    os.symlink(secret, dirs.root / "dist" / "leak.whl")
    with pytest.raises(ArtifactOutside, match="leads out of the run directory"):
        capture_artifacts(dirs.root, ["dist/*.whl"], LIMIT)


def test_artifacts_over_the_limit_are_refused_without_reading_past_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = run_dirs(tmp_path / "data", "r1")
    (dirs.root / "dist").mkdir()
    (dirs.root / "dist" / "a.whl").write_bytes(b"A" * 600)
    (dirs.root / "dist" / "b.whl").write_bytes(b"B" * 600)
    assert capture_artifacts(dirs.root, ["dist/*.whl", "dist/a.*"], 1200) == {
        "dist/a.whl": b"A" * 600, "dist/b.whl": b"B" * 600,  # a file two globs match counts once
    }
    asked: list[int] = []
    real_read_in = workdirs.read_in

    def read_in(root: Path, path: Path | str, offset: int = 0, size: int = -1) -> bytes:
        asked.append(size)
        return real_read_in(root, path, offset, size)

    monkeypatch.setattr(workdirs, "read_in", read_in)
    with pytest.raises(ArtifactsTooLarge, match=r"`dist/b.whl` takes them over 1,000 bytes"):
        capture_artifacts(dirs.root, ["dist/*.whl"], 1000)
    assert asked == [1001, 401]  # never more of a file than would fit, and one byte
    monkeypatch.setattr(workdirs, "MAX_ARTIFACT_FILES", 1)
    with pytest.raises(ArtifactsTooLarge, match="more than 1 files"):
        capture_artifacts(dirs.root, ["dist/*.whl"], 10_000)


def test_restoring_never_writes_through_a_symlinked_directory(tmp_path: Path) -> None:
    dirs = run_dirs(tmp_path / "data", "r1")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, dirs.root / "dist")
    with pytest.raises(ArtifactOutside):
        restore_artifacts(dirs.root, {"dist/x.whl": b"data"})
    assert list(outside.iterdir()) == []


def test_writing_in_a_run_directory_replaces_a_link_a_step_left_and_never_follows_it(tmp_path: Path) -> None:
    """`.outputs/<node>.1.log -> /etc/passwd` planted by a step: Baton writes a new file at the
    name; the file the link pointed to, and a file hard-linked there, stay as they were."""
    dirs = run_dirs(tmp_path / "data", "r1")
    victim = tmp_path / "victim.txt"
    victim.write_text("ORIGINAL")
    (dirs.root / ".outputs").mkdir()
    os.symlink(victim, dirs.root / ".outputs" / "big.1.log")
    os.link(victim, dirs.root / ".outputs" / "tool.1.log")
    for name in ("big.1.log", "tool.1.log"):
        with write_in(dirs.root, dirs.root / ".outputs" / name) as file:
            file.write(b"the whole output")
        written = dirs.root / ".outputs" / name
        assert not written.is_symlink() and written.stat().st_nlink == 1
        assert read_in(dirs.root, written) == b"the whole output"
    assert victim.read_text() == "ORIGINAL"


def test_a_directory_of_the_run_swapped_for_a_link_leads_nowhere(tmp_path: Path) -> None:
    """A parallel step swaps `.outputs` (or an artifact's directory) for a link out of the run
    after Baton looked: neither a write nor a read goes through it."""
    dirs = run_dirs(tmp_path / "data", "r1")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "big.1.log").write_text("outside")
    os.symlink(outside, dirs.root / ".outputs")
    with pytest.raises(ArtifactOutside, match="not reached through directories of the run"):
        write_in(dirs.root, ".outputs/big.1.log")
    with pytest.raises(ArtifactOutside, match="not reached through directories of the run"):
        read_in(dirs.root, ".outputs/big.1.log")
    assert [p.name for p in outside.iterdir()] == ["big.1.log"]
    assert (outside / "big.1.log").read_text() == "outside"


def test_reading_in_a_run_directory_takes_regular_files_only(tmp_path: Path) -> None:
    dirs = run_dirs(tmp_path / "data", "r1")
    os.mkfifo(dirs.root / "pipe")  # opening it for reading would wait for a writer forever
    os.symlink("/etc/hostname", dirs.root / "link")
    for name in ("pipe", "link"):
        with pytest.raises(ArtifactOutside):
            read_in(dirs.root, name)
    (dirs.root / "a").mkdir()
    (dirs.root / "a" / "b.txt").write_bytes(b"0123456789")
    assert read_in(dirs.root, "a/b.txt", 2, 3) == b"234"
    with pytest.raises(ArtifactOutside):
        read_in(dirs.root, "../r1/a/b.txt")
    with pytest.raises(ArtifactOutside, match="not in the run directory"):
        write_in(dirs.root, tmp_path / "elsewhere.txt")


def test_a_run_directory_is_removed_without_following_links_or_stopping_at_locked_directories(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    dirs = run_dirs(data, "r1")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("kept")
    os.symlink(outside, dirs.root / "to-dir")
    os.symlink(outside / "keep", dirs.root / "to-file")
    locked = dirs.root / "locked" / "inner"
    locked.mkdir(parents=True)
    (locked / "f").write_text("x")
    locked.chmod(0)
    locked.parent.chmod(0)

    workdirs._unlock(str(dirs.root))  # what a refused delete does first (root is never refused)
    assert {stat.S_IMODE(d.stat().st_mode) for d in (locked, locked.parent)} == {0o700}
    locked.chmod(0)
    assert remove_run_dir(data, "r1") is True

    assert not dirs.root.exists() and (data / "runs").is_dir()
    assert (outside / "keep").read_text() == "kept"
    assert remove_run_dir(data, "r1") is False  # gone already
    for bad in ("", "..", "a/b"):
        with pytest.raises(ValueError, match="not a run id"):
            remove_run_dir(data, bad)
