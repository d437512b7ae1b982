"""The order `baton say --wait` prints replies in (adapters/console/oneshot.py `Transcript`)."""

from __future__ import annotations

from adapters.console.oneshot import Transcript
from core.commands.messages import Reply
from core.delivery.envelope import Mode


def test_replies_keep_their_order() -> None:
    transcript = Transcript()
    for kind in ("started", "note", "done"):
        transcript.add(Reply(kind=kind))
    assert [r.kind for r in transcript.replies] == ["started", "note", "done"]


def test_an_edited_message_replaces_its_earlier_version_and_moves_last() -> None:
    transcript = Transcript()
    transcript.add(Reply(kind="progress", run_id="r1", run_status="running", how=Mode(replace_key="p:r1")))
    transcript.add(Reply(kind="started", run_id="r1", run_status="running"))
    transcript.add(Reply(kind="progress", run_id="r1", run_status="completed", how=Mode(replace_key="p:r1")))

    assert [(r.kind, r.run_status) for r in transcript.replies] == [
        ("started", "running"),
        ("progress", "completed"),
    ]


def test_different_keys_are_different_messages() -> None:
    transcript = Transcript()
    transcript.add(Reply(kind="progress", how=Mode(replace_key="p:r1")))
    transcript.add(Reply(kind="progress", how=Mode(replace_key="p:r2")))
    transcript.add(Reply(kind="plain"))
    transcript.add(Reply(kind="plain"))
    assert [r.how.replace_key for r in transcript.replies] == ["p:r1", "p:r2", None, None]
