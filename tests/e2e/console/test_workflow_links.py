"""A workflow file is read only from the directories Baton was given, symlinks included.

A workflow author (a branch under review) may commit a symlink into `workflows/`. Baton reads
its workflow files as itself, perhaps as root, so a link to a file the author cannot read
(another service's configuration, a key) once had Baton read it and show what it held: as a
runnable workflow, or in the load error of a broken one. A link to a file inside the directory
(here: in a folder below it, which the catalog does not scan) still works.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.e2e.console.cli import BatonCli, final_status, run_ids

MARKER = "outside-3e7c91"


def _plant(baton: BatonCli, tmp_path: Path) -> None:
    elsewhere = tmp_path / "not-a-workflow-dir"
    elsewhere.mkdir()
    private = elsewhere / "service.yaml"  # valid YAML whose values the author wants shown
    private.write_text(f"name: {MARKER}\nnodes:\n  - id: a\n    bash: echo {MARKER}-value\n")
    private.chmod(0o600)
    broken = elsewhere / "config.yaml"  # and one whose load error would quote it
    broken.write_text(f"name: 'bad {MARKER}!'\nnodes: []\n")
    broken.chmod(0o600)
    os.symlink(private, baton.workflows / "stolen.yaml")
    os.symlink(broken, baton.workflows / "stolen-broken.yaml")
    versions = baton.workflows / "versions"  # not scanned: reached only through the link
    versions.mkdir()
    (versions / "linked-v2.yaml").write_text(
        "name: linked\nnodes:\n  - id: a\n    bash: echo linked-ok\n    replay: pure\n"
    )
    os.symlink(Path("versions") / "linked-v2.yaml", baton.workflows / "linked.yaml")


def test_a_symlink_out_of_the_workflow_directory_is_refused_unread(baton: BatonCli, tmp_path: Path) -> None:
    _plant(baton, tmp_path)

    listed = baton.say("list")
    shown = "\n".join(str(reply["text"]) for reply in listed)
    assert MARKER not in shown, shown
    for name in ("stolen.yaml", "stolen-broken.yaml"):
        assert f"workflows/{name}: the file is a symlink out of its workflow directory" in shown, shown
    assert "• linked" in shown, shown

    cli_list = baton.run("list")
    assert MARKER not in cli_list.stdout + cli_list.stderr
    assert "symlink out of its workflow directory" in cli_list.stdout + cli_list.stderr

    refused = baton.say(f"run {MARKER}")
    assert MARKER + "-value" not in str(refused)
    assert not run_ids(refused)
    assert baton.runs() == []

    linked = baton.say("run linked")
    assert final_status(linked) == "completed"
    assert "linked-ok" in str(linked)
