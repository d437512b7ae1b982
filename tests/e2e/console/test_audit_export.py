"""`baton say "audit --since 7d --format csv"` (the console): an admin's export is written to a
file whose path the reply prints; anyone else gets a one-line refusal and no file."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from tests.e2e.console.cli import BatonCli, final_status, run_ids


def test_an_admin_gets_the_audit_as_a_csv_file_and_others_are_refused(
    baton: BatonCli, tmp_path: Path
) -> None:
    exports = tmp_path / "tmp"
    exports.mkdir()
    baton.env_extra["TMPDIR"] = str(exports)
    baton.env_extra["BATON_ACCESS"] = '{"admins": ["console:root"], "run": {"*": ["*"]}}'
    said = baton.say('run flaky "ok, \\"quoted\\""', user="bob")
    (run_id,) = run_ids(said)
    assert final_status(said) == "completed"

    (refusal,) = baton.say("audit --since 7d --format csv", user="bob")
    assert refusal["is_error"] and "admin" in str(refusal["text"]) and refusal["file"] is None
    assert not list(exports.rglob("baton-audit-*"))

    (export,) = baton.say("audit --since 7d --format csv", user="root")
    path = Path(str(export["file"]))
    assert not export["is_error"] and f"Saved to {path}" in str(export["text"])
    assert path.parent.parent == exports and path.name.endswith(".csv")
    rows = list(csv.DictReader(io.StringIO(path.read_text("utf-8"), newline="")))
    started = [r for r in rows if r["action"] == "start"]
    assert [(r["actor"], r["run_id"]) for r in started] == [("console:bob", run_id)]
    assert any(r["action"] == "refused" and r["actor"] == "console:bob" for r in rows)
