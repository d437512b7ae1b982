"""What the schedule replies show of a schedule's arguments (pure)."""

from __future__ import annotations

from core.commands.resolution import PREVIEW_LIMIT
from core.commands.schedule_replies import added, shown_args
from core.redaction import MASK, Redactor
from tests.unit.commands.samples import make_schedule

SECRET = "tok-0123456789abcdef"


def test_the_arguments_but_the_message_are_compact_json() -> None:
    s = make_schedule("nightly", args={"message": "nightly", "version": "1.10", "env": {"name": "prod"}})
    assert shown_args(s, lambda t: t) == '{"env":{"name":"prod"},"version":"1.10"}'
    assert shown_args(make_schedule("only a message"), lambda t: t) is None
    reply = added(s, 1_700_000_000.0, shown_args(s, lambda t: t))
    assert reply.data["args"] == '{"env":{"name":"prod"},"version":"1.10"}'


def test_a_secret_is_hidden_before_long_arguments_are_cut() -> None:
    """Cut first, a secret across the cut would be a prefix no redactor recognises."""
    pad = "x" * (PREVIEW_LIMIT - len('{"a":"') - 5)
    s = make_schedule(args={"a": pad + SECRET})
    text = shown_args(s, Redactor([SECRET]).redact)
    assert text is not None and SECRET[:5] not in text and MASK in text
