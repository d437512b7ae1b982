"""The core's side of a platform posting plain text messages (#27): `controls` lays a reply's
buttons out by the platform's rules, `text_transport` makes its messages one operation each
(the file on the first, the buttons on the last, a file too large, a message gone, fewer
messages), the adapter only posting, editing and deleting one message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from core.commands.controls import Rules, laid_out
from core.commands.messages import Button, Menu, Reply
from core.commands.text_messages import Content, Message
from core.commands.text_transport import Failures, Part, TextTransport
from core.delivery.button_refs import command_of, parse
from core.delivery.edits import NotDelivered, Posted
from core.redaction import Redactor
from core.render import format_of

RULES = Rules(reference=40, per_row=2, rows=3, label=5, options=2, option=4, placeholder=6)


class Gone(Exception):
    pass


class TooLarge(Exception):
    pass


class Expired(Exception):
    pass


class Down(Exception):
    pass


FAILURES = Failures(refused=(LookupError,), transient=(Down,), api=(Expired,),
                    gone=lambda exc: isinstance(exc, Gone), too_large=lambda exc: isinstance(exc, TooLarge),
                    expired=lambda exc: isinstance(exc, Expired))


@dataclass
class FakeMessages:
    platform: str = "discord"
    thread_is_place: bool = True
    failures: Failures = FAILURES
    done: list[tuple[str, Any]] = field(default_factory=list)
    fail: dict[str, Exception] = field(default_factory=dict)  # operation -> raised once

    def _maybe_fail(self, operation: str) -> None:
        if operation in self.fail:
            raise self.fail.pop(operation)

    async def post(self, place: Any, part: Part) -> tuple[str, str, Any]:
        self._maybe_fail("post")
        self.done.append(("post", part))
        return str(place), f"p{len(self.done)}", part

    async def edit(self, place: str, message_id: str, part: Part) -> None:
        self._maybe_fail(f"edit {message_id}")
        self.done.append((f"edit {message_id}", part))

    async def delete(self, place: str, message_id: str) -> None:
        self.done.append((f"delete {message_id}", None))

    async def open_thread(self, message: Any, name: str) -> str:
        self._maybe_fail("thread")
        return f"thread of {name}"

    async def person(self, user: str) -> str:
        return f"dm {user}"


def _message(*chunks: str, file: tuple[str, bytes] | None = None, nonce: str | None = "n1") -> Message:
    controls = laid_out(Reply("x", buttons=(Button("Open", "open r1", action="open"),), run_id="r1"),
                        RULES, str, Redactor(()))
    return Message(Content(chunks, file, (*chunks, "the rest")), nonce, ("42",), controls)


REPLY = Reply("run_completed", {"workflow": "notes"}, run_id="r1", run_status="completed")


def test_buttons_are_laid_out_in_rows_and_menus_after_them_each_carrying_its_command() -> None:
    kept: dict[str, str] = {}

    def keep(command: str) -> str:
        kept["d" * 64] = command
        return "d" * 64

    long = "run notes --set message=" + "x" * 60
    buttons = tuple(Button(f"Button {n}", f"resume r{n}", action="resume") for n in range(3))
    menu = Menu("Pick a gate", (Button("Gate one", long, action="approve"),) * 3)
    reply = Reply("x", buttons=buttons, menus=(menu, menu, menu), run_id="r1")
    drawn = laid_out(reply, RULES, keep, Redactor(()))
    assert [(c.row, c.label, c.options is None) for c in drawn] == [
        (0, "Butto", True), (0, "Butto", True), (1, "Butto", True), (2, "Pick a", False)]  # 3 rows in all
    assert drawn[0].custom_id == "baton:resume:=resume r0"
    menu_shown = drawn[3]
    assert menu_shown.custom_id == "baton-menu:0" and len(menu_shown.options or ()) == 2
    label, value = (menu_shown.options or ())[0]
    assert label == "Gate" and command_of(parse(value), lambda d: kept[d].encode()) == long  # type: ignore[arg-type]


async def test_a_post_is_one_operation_per_message_file_and_nonce_on_the_first_buttons_on_the_last() -> None:
    messages = FakeMessages()
    sent = await TextTransport(messages, format_of("discord")).post(
        "c1", REPLY, _message("one", "two", file=("a.txt", b"all")), attach=True, opens=True)
    parts = [part for _, part in messages.done]
    assert [(p.text, p.file, p.nonce, p.first, bool(p.controls)) for p in parts] == [
        ("one", ("a.txt", b"all"), "n1", True, False), ("two", None, None, False, True)]
    assert all(p.pings == ("42",) for p in parts)
    assert sent.posted == Posted("c1", ("p1", "p2")) and sent.filed and sent.thread == "thread of notes · r1"


async def test_a_file_refused_as_too_large_posts_every_chunk_instead_and_a_refused_thread_is_none() -> None:
    messages = FakeMessages(fail={"post": TooLarge(), "thread": Expired("no thread here")})
    sent = await TextTransport(messages, format_of("discord")).post(
        "c1", REPLY, _message("one", file=("a.txt", b"all")), attach=True, opens=True)
    assert [(part.text, part.file) for _, part in messages.done] == [("one", None), ("the rest", None)]
    assert not sent.filed and sent.thread is None


async def test_an_edit_reposts_a_message_gone_and_deletes_the_ones_left_over() -> None:
    messages = FakeMessages(fail={"edit m2": Gone()})
    sent = await TextTransport(messages, format_of("discord")).edit(
        "c1", Posted("c1", ("m1", "m2", "m3")), REPLY, _message("one", "two"), attach=False)
    assert [(done, part.text if part else None) for done, part in messages.done] == [
        ("edit m1", "one"), ("post", "two"), ("delete m3", None)]
    assert messages.done[1][1].controls and messages.done[1][1].nonce is None  # reposted: buttons, no nonce
    assert sent.posted == Posted("c1", ("m1", "p2"))  # the message posted again in its place


async def test_what_failures_mean_is_the_platform_s_data() -> None:
    transport = TextTransport(FakeMessages(fail={"post": Expired("token")}), format_of("discord"))
    assert not await transport.follow_up("handle", REPLY, _message("one"), attach=False)  # the next place
    assert transport.refusal(KeyError("gone"), REPLY) == "'gone'"
    assert transport.refusal(RuntimeError("bug"), REPLY) is None
    with pytest.raises(NotDelivered):
        transport.failed(Down("502"), REPLY)
    with pytest.raises(RuntimeError):
        transport.failed(RuntimeError("bug"), REPLY)
