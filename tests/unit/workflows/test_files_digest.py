"""`files:` digests (`loader.files_content`): a declared file may be a dataset of gigabytes.
It is hashed a block at a time (it was read whole into memory, on the event loop, at every
run's start), and an unchanged one is not read again (its `stat` says so, as git's index)."""

from __future__ import annotations

import hashlib
import json
import os
import tracemalloc
from pathlib import Path

import pytest

from core.workflows import loader
from core.workflows.loader import file_sha256, files_content, load_workflow_text

SIZE = 32 << 20


def test_a_declared_file_is_hashed_in_blocks_not_read_whole(tmp_path: Path) -> None:
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(1 << 20) * (SIZE >> 20))
    flow = tmp_path / "flow.yaml"
    flow.write_text("name: flow\nnodes:\n  - id: a\n    files: [data.bin]\n    bash: echo hi\n")
    workflow = load_workflow_text(flow.read_text(), file=str(flow))
    tracemalloc.start()
    try:
        digests = files_content(workflow, workflow.nodes[0])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert digests == {"data.bin": hashlib.sha256(data.read_bytes()).hexdigest()}
    assert peak < SIZE // 8, f"{peak:,} bytes held while hashing a {SIZE:,}-byte file"


def test_an_unchanged_file_is_not_read_again_and_a_changed_one_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"one")
    os.utime(path, (1, 1))  # mtime long ago; ctime is now: still racy
    read: list[str] = []
    real = hashlib.file_digest

    def counting(file: object, name: str) -> object:
        read.append(name)
        return real(file, name)  # type: ignore[arg-type]

    monkeypatch.setattr(hashlib, "file_digest", counting)
    monkeypatch.setattr(loader, "RACY_NS", 0)  # (a test cannot wait out a real timestamp tick)
    first = file_sha256(path)
    assert file_sha256(path) == first == hashlib.sha256(b"one").hexdigest()
    assert len(read) == 1  # the second answer came from its stat
    path.write_bytes(b"two")  # same size; its mtime set back to what it was: its ctime moved
    os.utime(path, (1, 1))
    assert file_sha256(path) == hashlib.sha256(b"two").hexdigest() and len(read) == 2


def test_a_file_written_within_a_timestamp_tick_is_not_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"fresh")
    monkeypatch.setattr(loader, "_DIGESTS", {})
    file_sha256(path)
    assert loader._DIGESTS == {}  # written just now: a write in the same tick would not show


def test_the_files_a_bash_step_names_under_its_workflow_directory_are_part_of_its_digest(
    tmp_path: Path,
) -> None:
    """A script run by `$BATON_WORKFLOW_DIR/<path>` in any spelling (as a command, or the file
    an interpreter runs); a file only read or tested is data, and what is not a file of the
    directory (missing, a directory, out of it, another variable) is left out."""
    (tmp_path / "scripts").mkdir()
    for name in ("a.sh", "b.sh", "c.sh", "d.sh", "e.py", "f.sh", "switch"):
        (tmp_path / "scripts" / name).write_text(name)
    (tmp_path.parent / "outside.sh").write_text("x")
    bash = (
        '"$BATON_WORKFLOW_DIR/scripts/a.sh" && ${BATON_WORKFLOW_DIR}/scripts/b.sh;'
        ' bash -e "$BATON_WORKFLOW_DIR"/scripts/c.sh; cat $BATON_WORKFLOW_DIR/scripts/d.sh\n'
        ' if test -f "$BATON_WORKFLOW_DIR/scripts/switch"; then\n'
        '   python3 -u "$BATON_WORKFLOW_DIR/scripts/e.py"; fi\n'
        " . $BATON_WORKFLOW_DIR/scripts/f.sh; $BATON_WORKFLOW_DIR/missing.sh; $BATON_WORKFLOW_DIR/scripts/\n"
        " $BATON_WORKFLOW_DIR/../outside.sh; $BATON_WORKFLOW_DIRS/scripts/a.sh; $HOME/scripts/b.sh"
    )
    flow = tmp_path / "flow.yaml"
    node_json = json.dumps({"id": "a", "files": ["scripts/a.sh"], "bash": bash})  # JSON is YAML
    flow.write_text(f"name: flow\nnodes:\n  - {node_json}\n")
    workflow = load_workflow_text(flow.read_text(), file=str(flow))
    node = workflow.nodes[0]

    run = ["scripts/b.sh", "scripts/c.sh", "scripts/e.py", "scripts/f.sh"]
    assert loader.named_files(workflow, node) == run
    assert sorted(files_content(workflow, node)) == ["scripts/a.sh", "scripts/b.sh", "scripts/c.sh",
                                                     "scripts/e.py", "scripts/f.sh"]  # fmt: skip
    text = "name: p\nnodes:\n  - {id: a, bash: echo $BATON_WORKFLOW_DIR}\n"
    plain = load_workflow_text(text, file=str(flow))
    assert not loader.names_workflow_files(plain.nodes[0])
