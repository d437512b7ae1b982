"""`baton say "audit --since 7d --format csv"` (the console): an admin's export is written to a
file whose path the reply prints; anyone else gets a one-line refusal and no file."""

from __future__ import annotations

import csv
import io
import os
import stat
import time
from pathlib import Path

from core.commands.audit_export import filename
from tests.e2e.console.cli import CALL_TIMEOUT, BatonCli, final_status, run_ids


def test_an_admin_gets_the_audit_as_a_csv_file_and_others_are_refused(
    baton: BatonCli, tmp_path: Path
) -> None:
    exports = baton.home / ".baton" / "exports"  # in Baton's data directory
    baton.env_extra["BATON_ACCESS"] = '{"admins": ["console:root"], "run": {"*": ["*"]}}'
    said = baton.say('run flaky "ok, \\"quoted\\""', user="bob")
    (run_id,) = run_ids(said)
    assert final_status(said) == "completed"

    (refusal,) = baton.say("audit --since 7d --format csv", user="bob")
    assert refusal["is_error"] and "admin" in str(refusal["text"]) and refusal["file"] is None
    assert not exports.exists() or not list(exports.rglob("baton-audit-*"))

    (export,) = baton.say("audit --since 7d --format csv", user="root")
    path = Path(str(export["file"]))
    assert not export["is_error"] and f"Saved to {path}" in str(export["text"])
    assert path.parent == exports and path.name.endswith(".csv")
    assert stat.S_IMODE(exports.stat().st_mode) == 0o700 and stat.S_IMODE(path.stat().st_mode) == 0o600
    rows = list(csv.DictReader(io.StringIO(path.read_text("utf-8"), newline="")))
    started = [r for r in rows if r["action"] == "start"]
    assert [(r["actor"], r["run_id"]) for r in started] == [("console:bob", run_id)]
    assert any(r["action"] == "refused" and r["actor"] == "console:bob" for r in rows)


def test_a_symlink_planted_where_the_export_goes_is_replaced_never_followed(
    baton: BatonCli, tmp_path: Path
) -> None:
    baton.env_extra["BATON_ACCESS"] = '{"admins": ["console:root"], "run": {"*": ["*"]}}'
    baton.env_extra["TMPDIR"] = str(tmp_path)  # the old shared place: a symlink waits there too
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "baton-exports").mkdir()
    exports = baton.home / ".baton" / "exports"
    exports.mkdir(parents=True)
    now = time.time()  # the export's name holds the second it is made: plant a link for each
    planted = {filename("csv", now + s) for s in range(-2, int(CALL_TIMEOUT))}
    for folder in (exports, tmp_path / "baton-exports"):
        for name in planted:
            os.symlink(victim, folder / name)

    (export,) = baton.say("audit --since 7d --format csv", user="root")

    path = Path(str(export["file"]))
    assert path.parent == exports and path.name in planted
    assert not path.is_symlink() and "action" in path.read_text()
    assert victim.read_text() == "precious\n"  # the planted link was replaced, never followed
    assert not [p for p in exports.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_an_exports_directory_that_is_a_symlink_is_refused(baton: BatonCli, tmp_path: Path) -> None:
    baton.env_extra["BATON_ACCESS"] = '{"admins": ["console:root"], "run": {"*": ["*"]}}'
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (baton.home / ".baton").mkdir(parents=True)
    os.symlink(elsewhere, baton.home / ".baton" / "exports")

    done = baton.run("say", "--user", "root", "--", "audit --since 7d --format csv")

    assert done.returncode != 0 and "not a plain directory" in done.stderr, done.stderr
    assert list(elsewhere.iterdir()) == []
