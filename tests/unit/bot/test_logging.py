"""Structured key=value logs with secrets redacted."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from bot.logging import setup_logging
from core.redaction import Redactor

SECRET = "xoxb-0000-very-secret-token"


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    buffer = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = setup_logging("INFO", Redactor([SECRET, "discord-secret-value"]), stream=buffer)
    yield buffer
    root.removeHandler(handler)
    root.setLevel(level)


def test_a_record_is_one_line_of_key_value_pairs(stream: io.StringIO) -> None:
    logging.getLogger("baton.engine").info(
        "node %s finished", "build", extra={"action": "node_completed", "run_id": "r_1", "node_id": "build"}
    )
    line = stream.getvalue().strip()
    assert "\n" not in line
    assert line.startswith("ts=")
    assert " level=INFO logger=baton.engine action=node_completed run_id=r_1 node_id=build " in line
    assert line.endswith('msg="node build finished"')


def test_structured_keys_are_left_out_when_not_given(stream: io.StringIO) -> None:
    logging.getLogger("baton.app").warning("plain", extra={"owner": "host:1"})
    line = stream.getvalue().strip()
    assert "action=" not in line and "run_id=" not in line
    assert "owner=host:1 msg=plain" in line


def test_secrets_are_redacted_from_message_arguments_and_extras(stream: io.StringIO) -> None:
    logging.getLogger("baton.slack").error(
        "token %s rejected", SECRET, extra={"action": "auth", "detail": f"Bearer {SECRET}"}
    )
    line = stream.getvalue()
    assert SECRET not in line
    assert "token ••• rejected" in line
    assert 'detail="Bearer •••"' in line


def test_secrets_are_redacted_from_tracebacks(stream: io.StringIO) -> None:
    try:
        raise RuntimeError("connect failed with discord-secret-value")
    except RuntimeError:
        logging.getLogger("baton.discord").exception("adapter crashed", extra={"action": "adapter_failed"})
    text = stream.getvalue()
    assert "discord-secret-value" not in text
    assert "RuntimeError: connect failed with •••" in text
    assert len(text.strip().splitlines()) == 1  # the traceback is one quoted field


def test_values_with_spaces_and_quotes_are_quoted(stream: io.StringIO) -> None:
    logging.getLogger("baton").info('say "hi"\nthere', extra={"action": "x y"})
    line = stream.getvalue().strip()
    assert 'action="x y"' in line
    assert r'msg="say \"hi\"\nthere"' in line


def test_level_from_settings_filters_records(stream: io.StringIO) -> None:
    logging.getLogger("baton").debug("not shown")
    assert stream.getvalue() == ""


def test_setting_up_twice_keeps_one_handler(stream: io.StringIO) -> None:
    second = io.StringIO()
    handler = setup_logging("INFO", Redactor(()), stream=second)
    try:
        logging.getLogger("baton").info("once")
        assert stream.getvalue() == ""
        assert second.getvalue().count("msg=once") == 1
    finally:
        logging.getLogger().removeHandler(handler)


def test_timestamps_follow_each_record_across_seconds() -> None:
    """The second's text is kept from one record to the next: a record of another second (later,
    or earlier, as a thread's may be) gets its own."""
    from bot.logging import KeyValueFormatter

    formatter = KeyValueFormatter()

    def ts(created: float) -> str:
        record = logging.LogRecord("baton.x", logging.INFO, __file__, 1, "m", None, None)
        record.created, record.msecs = created, (created - int(created)) * 1000
        return formatter.format(record).split(" ", 1)[0]

    assert ts(1_700_000_000.25) == "ts=2023-11-14T22:13:20.250Z"
    assert ts(1_700_000_000.5) == "ts=2023-11-14T22:13:20.500Z"
    assert ts(1_700_000_001.0) == "ts=2023-11-14T22:13:21.000Z"
    assert ts(1_699_999_999.999) == "ts=2023-11-14T22:13:19.999Z"
