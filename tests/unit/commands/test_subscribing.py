"""`subscribe` / `unsubscribe` / `subscriptions` parsed (pure), the classes they stand for, and
a failing step's first error line as a notice shows it."""

from __future__ import annotations

import pytest

from core.commands.model import SubscribeCommand, SubscriptionsCommand, UnsubscribeCommand
from core.commands.notices import first_line
from core.commands.parser import parse
from core.commands.subscribing import events_of
from core.errors import UsageError


@pytest.mark.parametrize(("text", "command"), [
    ("subscribe", SubscribeCommand("*", ())),
    ("subscribe deploy", SubscribeCommand("deploy", ())),
    ("subscribe * all", SubscribeCommand("*", ("all",))),
    ("subscribe gates", SubscribeCommand("*", ("gates",))),
    ("subscribe deploy failed GATES --to slack:C0OPS",
     SubscribeCommand("deploy", ("failed", "gates"), "slack:C0OPS")),
    ("unsubscribe", UnsubscribeCommand(None, ())),
    ("unsubscribe deploy done", UnsubscribeCommand("deploy", ("done",))),
    ("subscriptions --to discord:1130001112223334445", SubscriptionsCommand("discord:1130001112223334445")),
])
def test_parse(text: str, command: object) -> None:
    assert parse(text) == command


def test_an_unknown_class_names_the_closest_and_the_usage() -> None:
    with pytest.raises(UsageError) as info:
        parse("subscribe deploy faild")
    assert "did you mean `failed`?" in info.value.message
    assert info.value.usage.startswith("/workflow subscribe [workflow|*]")
    with pytest.raises(UsageError):
        parse("subscriptions deploy")


def test_classes_stand_for_events_in_order() -> None:
    assert events_of(()) == ["failed", "needs_attention"]
    assert events_of(("gates", "done")) == ["gate_waiting", "completed", "cancelled", "gate_overdue"]
    assert len(events_of(("all",))) == 7


def test_first_line_of_an_error() -> None:
    assert first_line("step `push` exited with code 2; stderr ends with:\nno route\nmore") == (
        "step `push` exited with code 2; stderr ends with: no route")
    assert first_line("\n  boom  \nsecond") == "boom"
    assert first_line(None) == "" and len(first_line("x" * 500)) == 200
