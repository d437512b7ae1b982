"""`audit --since 7d [--format jsonl|csv]`: the workspace's audit trail over a window, as a file.

`window(text)` reads the window (the durations gates use: `30m`, `12h`, `7d`); `export(events,
fmt, redactor)` writes the rows (`at`, `actor`, `action`, `run_id`, `details` as JSON), every
secret the runtime's redactor knows hidden, as JSON Lines or CSV (the `csv` module quotes commas,
quotes and newlines). Pure: the action in `actions.py` checks that the asker is an admin.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from core.errors import UsageError
from core.redaction import Redactor
from core.store.records import AuditEvent
from core.workflows.durations import parse_duration

FIELDS = ("at", "actor", "action", "run_id", "details")


def window(text: str) -> float:
    """Seconds of `--since`; a UsageError naming the accepted forms otherwise."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise UsageError(f"`--since {text}`: {exc}",
                         hint="Type e.g. `/workflow audit --since 7d --format csv`.") from None


def _row(event: AuditEvent, redactor: Redactor) -> dict[str, Any]:
    at = datetime.fromtimestamp(event.at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return {
        "at": at,
        "actor": redactor.redact(event.actor),
        "action": redactor.redact(event.action),
        "run_id": event.run_id or "",
        "details": json.dumps(redactor.redact_value(dict(event.details)), sort_keys=True,
                              ensure_ascii=False),
    }


def export(events: Sequence[AuditEvent], fmt: str, redactor: Redactor) -> bytes:
    """The rows as `fmt` (`jsonl`: one object a line, `details` an object; `csv`: a header
    line, then one row an event, `details` as JSON text), UTF-8."""
    rows = [_row(e, redactor) for e in events]
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=FIELDS, lineterminator="\r\n")
        writer.writeheader()
        writer.writerows(rows)
        return out.getvalue().encode("utf-8")
    lines = [json.dumps({**r, "run_id": r["run_id"] or None, "details": json.loads(r["details"])},
                        ensure_ascii=False) for r in rows]
    return "".join(line + "\n" for line in lines).encode("utf-8")


def filename(fmt: str, now: float) -> str:
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"baton-audit-{stamp}.{fmt}"
