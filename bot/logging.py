"""Structured logs: one `key=value` line per record, secrets redacted.

    ts=2024-05-01T12:00:00.123Z level=INFO logger=baton.engine action=run_started run_id=r_1 msg="started"

`action`, `run_id` and `node_id` come from `extra=` and appear when given. Every secret
the redactor knows is replaced in the message, the extras and tracebacks before anything is
written: at first the settings' secrets, then, once the runtime is assembled
(`bot/runtime.py`), its one redactor (`redact_logs_with`), which also knows the step secrets.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from typing import IO, Any

from core.redaction import Redactor

#: Extras printed first, in this order, when a record carries them.
STRUCTURED_KEYS: tuple[str, ...] = ("action", "run_id", "node_id")
_HANDLER_NAME = "baton"
# attributes every LogRecord has; anything else came from `extra=`
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


#: what a terminal would obey in a log line (C0 and C1 controls, DEL, bidi overrides): a
#: step's stderr or a chat message in a log line never moves an operator's cursor, clears
#: the screen or writes their clipboard (`tail -f`), nor forges a line with a `\r`
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NEEDS_QUOTES = re.compile('[ ="\n\t\\\\\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]')


def _quote(value: object) -> str:
    text = value if type(value) is str else str(value)
    if text and _NEEDS_QUOTES.search(text) is None:
        return text
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    escaped = _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                            else f"\\u{ord(m.group()):04x}", escaped)
    return f'"{escaped}"'


class KeyValueFormatter(logging.Formatter):
    """`ts=… level=… logger=… action=… run_id=… node_id=… <other extras> msg="…"`."""

    _second: tuple[int, str] = (-1, "")  # the last record's whole second and its text: one
    # attribute, swapped whole, so a thread never pairs one second with another's text

    def format(self, record: logging.LogRecord) -> str:
        second, text = self._second
        if int(record.created) != second:  # one strftime per second of logs, not one per line
            second = int(record.created)
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, text)
        fields: list[tuple[str, object]] = [
            ("ts", f"{text}.{int(record.msecs):03d}Z"),
            ("level", record.levelname),
            ("logger", record.name),
        ]
        extras = {k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")}
        fields += [(k, extras.pop(k)) for k in STRUCTURED_KEYS if extras.get(k) is not None]
        fields += sorted(extras.items())
        fields.append(("msg", record.getMessage()))
        if record.exc_info:
            fields.append(("exc", self.formatException(record.exc_info)))
        return " ".join([f"{key}={_quote(value)}" for key, value in fields])


class RedactingFilter(logging.Filter):
    """Replaces every secret in the message, its arguments and the extras."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def _clean(self, value: Any) -> Any:
        if isinstance(value, str | list | tuple | dict):
            return self.redactor.redact_value(value)
        return value

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.redactor.redact(record.getMessage())
        record.args = None
        for key, value in list(record.__dict__.items()):
            if key not in _STANDARD:
                setattr(record, key, self._clean(value))
        if record.exc_info:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
            record.exc_text = None
            record.__dict__["exc"] = self.redactor.redact(text)
        return True


def setup_logging(level: str, redactor: Redactor, stream: IO[str] | None = None) -> logging.Handler:
    """Install Baton's handler on the root logger (idempotent: replaces an earlier one).

    Logs go to stderr so that `baton say --json` keeps stdout machine-readable.
    """
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(KeyValueFormatter())
    handler.addFilter(RedactingFilter(redactor))
    root.addHandler(handler)
    root.setLevel(level)
    # the lines never show where a call was made: skip looking it up (the stack walk the
    # logging HOWTO's "Optimization" section turns off this way) on every record
    logging._srcfile = None
    # procrastinate: its INFO line per job repeats `baton worker`'s own per-step lines and
    # carries the job's whole arguments (the rendered step, upstream outputs on stdin)
    for noisy in ("sqlalchemy", "alembic", "asyncio", "httpx", "slack_bolt", "discord", "procrastinate"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    return handler


def _filters() -> list[RedactingFilter]:
    return [
        found
        for handler in logging.getLogger().handlers
        if handler.get_name() == _HANDLER_NAME
        for found in handler.filters
        if isinstance(found, RedactingFilter)
    ]


def redact_logs_with(redactor: Redactor) -> None:
    """From now on Baton's log handler (if installed) hides what `redactor` hides."""
    for found in _filters():
        found.redactor = redactor


def active_redactor() -> Redactor | None:
    """The redactor Baton's log handler hides secrets with now (the runtime's, once it is
    assembled): what the command line's own error lines go through too."""
    filters = _filters()
    return filters[0].redactor if filters else None
