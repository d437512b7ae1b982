"""The delivery service decides a reply's way out; the transport only does what it is told and
answers what it did (`core.delivery.transport`). `Wire` is a transport at the port, like httpx's
`MockTransport`: it records each operation and refuses or fails where a test says."""

from __future__ import annotations

from typing import Any

import pytest

from core.commands.messages import Reply
from core.delivery.edits import Edits, NotDelivered, Outgoing, Posted
from core.delivery.envelope import Address, Mode
from core.delivery.fallbacks import DIRECT, FOLLOW_UP
from core.delivery.service import DeliveryService
from core.delivery.transport import Sent


class Gone(Exception):
    """The place refuses (deleted, no access)."""


class Wire:
    platform = "chat"
    thread_is_place = True

    def __init__(self, *refusing: str, stale: bool = False, failing: bool = False) -> None:
        self.refusing, self.stale, self.failing = set(refusing), stale, failing
        self.ops: list[tuple[Any, ...]] = []
        self.posts = 0

    async def post(self, place: Any, reply: Outgoing, message: Any, *, attach: bool, opens: bool) -> Sent:
        self.ops.append(("post", place, reply.kind, attach, opens))
        if self.failing:
            raise OSError("connection reset")
        if place in self.refusing:
            raise Gone(place)
        self.posts += 1
        return Sent(Posted(place, (f"m{self.posts}",)), thread=f"t{self.posts}" if opens else None)

    async def edit(self, place: Any, posted: Posted, reply: Outgoing, message: Any, *,
                   attach: bool) -> Sent | None:
        self.ops.append(("edit", posted.place, posted.ids, reply.kind))
        return None if self.stale or posted.place != place else Sent(posted)

    async def follow_up(self, handle: Any, reply: Outgoing, message: Any, *, attach: bool) -> bool:
        self.ops.append(("follow_up", handle, reply.kind))
        return True

    async def person(self, user: str) -> str:
        return f"D-{user}"

    async def moved(self, how: str, to: Any, reply: Outgoing, error: str) -> bool:
        self.ops.append(("moved", how, to, error))
        return True

    def refusal(self, exc: BaseException, reply: Outgoing) -> str | None:
        return f"gone: {exc}" if isinstance(exc, Gone) else None

    def failed(self, exc: Exception, reply: Outgoing) -> None:
        if isinstance(exc, OSError):
            raise NotDelivered(str(exc)) from exc
        raise exc


class Threads:
    def __init__(self) -> None:
        self.attached: list[tuple[str, str | None]] = []

    async def __call__(self, run_id: str, thread: str | None) -> None:
        self.attached.append((run_id, thread))


def service(wire: Wire, edits: Edits | None = None) -> tuple[DeliveryService, Threads]:
    threads = Threads()
    return DeliveryService(wire, edits or Edits(), threads), threads


RUNNING = Reply(kind="progress", run_id="r1", run_status="running",
                to=Address(conversation="C1", thread="T1", requester="chat:U1"),
                how=Mode(replace_key="progress:r1"))
DONE = Reply(kind="run_completed", run_id="r1", run_status="completed",
             to=Address(conversation="C1", thread="T1", requester="chat:U1"))


async def test_a_keyed_message_is_posted_once_then_edited_and_posted_anew_when_gone() -> None:
    wire = Wire()
    delivery, _ = service(wire)
    await delivery.send(RUNNING)
    await delivery.send(RUNNING)
    assert [op[0] for op in wire.ops] == ["post", "edit"]
    assert wire.ops[1][1:3] == ("T1", ("m1",))  # the message the first post made
    wire.stale = True
    await delivery.send(RUNNING)
    assert [op[0] for op in wire.ops] == ["post", "edit", "edit", "post"]
    assert delivery.edits.posted("chat", "progress:r1") == Posted("T1", ("m2",))


async def test_an_edit_only_reply_never_posts() -> None:
    wire = Wire()
    delivery, _ = service(wire)
    decided = Reply(kind="gate_decided", run_id="r1", to=Address(conversation="C1"),
                    how=Mode(replace_key="offer:1", edit_only=True))
    await delivery.send(decided)
    assert wire.ops == []


async def test_the_thread_a_reply_opened_is_handed_to_the_core_and_none_when_it_failed() -> None:
    started = Reply(kind="run_started", run_id="r1", to=Address(conversation="C1"),
                    how=Mode(starts_thread=True))
    wire = Wire()
    delivery, threads = service(wire)
    sent = await delivery.answer(started, "C1", follow_up=("https://hooks/1", 60.0, 5))
    assert sent is not None and sent.thread == "t1"
    assert threads.attached == [("r1", "t1")]
    assert delivery.edits.follow_up_of("chat", "r1", use=False) == "https://hooks/1"

    failing, threads = service(Wire(failing=True))
    with pytest.raises(OSError):
        await failing.answer(started, "C1")
    assert threads.attached == [("r1", None)]  # no thread will come: it reports where asked


async def test_refused_places_fall_back_to_the_follow_up_then_a_direct_message_told_once() -> None:
    edits = Edits()
    edits.follow_up("chat", "r1", "hook", ttl=60)
    wire = Wire("T1", "C1")
    delivery, _ = service(wire, edits)
    await delivery.send(DONE)
    assert wire.ops[-2:] == [("moved", FOLLOW_UP, "hook", "gone: T1"), ("follow_up", "hook", "run_completed")]

    no_follow_up = Wire("T1", "C1")
    delivery, _ = service(no_follow_up)
    await delivery.send(RUNNING)  # progress is not posted through a follow-up: straight to a DM
    await delivery.send(RUNNING)
    told = [op for op in no_follow_up.ops if op[0] == "moved"]
    assert told == [("moved", "C1", "C1", "gone: T1"), ("moved", DIRECT, "D-U1", "gone: T1")]  # once each
    assert no_follow_up.ops[-1] == ("edit", "D-U1", ("m1",), "progress")  # its own key in the DM
    assert delivery.edits.posted("chat", "progress:r1:direct") == Posted("D-U1", ("m1",))


async def test_what_may_pass_is_not_delivered_and_a_closing_service_takes_nothing() -> None:
    delivery, _ = service(Wire(failing=True))
    with pytest.raises(NotDelivered):
        await delivery.send(DONE)
    wire = Wire()
    delivery, _ = service(wire)
    await delivery.aclose()
    with pytest.raises(NotDelivered):
        await delivery.send(DONE)
    assert wire.ops == []
