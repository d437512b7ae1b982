"""`audit --since 7d [--format jsonl|csv]`: the command's words, the window and the file's rows."""

from __future__ import annotations

import csv
import io
import json

import pytest

from core.commands.audit_export import export, filename, window
from core.commands.model import AuditCommand
from core.commands.parser import parse
from core.errors import UsageError
from core.redaction import Redactor
from core.store.records import AuditEvent

AT = 1_790_000_000.0  # 2026-09-21T…Z


def test_the_time_window_form_parses_with_its_format() -> None:
    assert parse("audit --since 7d") == AuditCommand(since="7d", format="jsonl")
    assert parse("audit --since 12h --format csv") == AuditCommand(since="12h", format="csv")
    assert parse("audit 3f9a") == AuditCommand("3f9a")


@pytest.mark.parametrize("text, says", [
    ("audit --since 7d --format xml", "`--format` is one of jsonl, csv"),
    ("audit 3f9a --since 7d", "give no run id"),
    ("audit 3f9a --format csv", "`--format` goes only with `--since`"),
    ("audit", "run"),
])
def test_mistakes_get_one_line_with_the_usage(text: str, says: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse(text)
    assert says in caught.value.message


def test_the_window_reads_the_durations_gates_use() -> None:
    assert window("30m") == 1800 and window("12h") == 43200 and window("7d") == 7 * 86400
    with pytest.raises(UsageError) as caught:
        window("a week")
    assert "30m, 4h" in caught.value.message


TRICKY = {"text": 'deploy "v1, final"\nnow', "token": "hunter2-secret"}
EVENTS = [
    AuditEvent(id=1, at=AT, actor="slack:U1", action="command", run_id="r1", details=TRICKY),
    AuditEvent(id=2, at=AT + 61, actor="baton", action="remind", run_id=None, details={}),
]


def test_csv_quotes_commas_quotes_and_newlines_and_redacts() -> None:
    data = export(EVENTS, "csv", Redactor(["hunter2-secret"])).decode("utf-8")
    rows = list(csv.DictReader(io.StringIO(data, newline="")))
    assert data.splitlines()[0] == "at,actor,action,run_id,details"
    assert [r["action"] for r in rows] == ["command", "remind"]
    assert rows[0]["at"] == "2026-09-21T14:13:20Z" and rows[0]["run_id"] == "r1" and rows[1]["run_id"] == ""
    details = json.loads(rows[0]["details"])
    assert details["text"] == 'deploy "v1, final"\nnow'  # round-trips whole through the quoting
    assert details["token"] == "•••" and "hunter2" not in data


def test_jsonl_is_one_object_a_line_with_details_as_an_object() -> None:
    lines = export(EVENTS, "jsonl", Redactor(["hunter2-secret"])).decode("utf-8").splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["details"] == {"text": 'deploy "v1, final"\nnow', "token": "•••"}
    assert (second["actor"], second["run_id"], second["details"]) == ("baton", None, {})
    assert filename("csv", AT) == "baton-audit-20260921T141320Z.csv"
