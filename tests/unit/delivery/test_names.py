"""People's names for a platform that would ping an id: from their own requests, else the
platform's look-up, shared while in flight, never holding a message up. The look-up is a
coroutine of the test's; nothing else is stood in for."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from core.commands.messages import Reply
from core.delivery import names as names_module
from core.delivery.names import Names

IDS = r"[UW][A-Z0-9]{2,}"


class Directory:
    """A platform's look-up: names by id, counting calls; `gate` holds every answer back."""

    def __init__(self, known: dict[str, Sequence[object]]) -> None:
        self.known = known
        self.calls: list[str] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.answered = asyncio.Event()

    async def __call__(self, user: str) -> Sequence[object]:
        self.calls.append(user)
        await self.gate.wait()
        self.answered.set()
        if user not in self.known:
            raise LookupError("user_not_found")
        return self.known[user]


async def test_names_come_from_requests_then_one_shared_look_up_and_failures_show_the_id() -> None:
    directory = Directory({"U0BOB": (None, "  Bob \n Builder ", "bob")})
    names = Names("slack", IDS, directory)
    names.remember("U0ANA", "ana")
    names.remember("not-an-id", "x")  # only the platform's ids are remembered
    reply = Reply(kind="status", data={"by": "slack:U0ANA", "votes": ["voted by slack:U0BOB", "slack:U0EVE"]})
    assert names.people_of(reply.data) == ["U0ANA", "U0BOB", "U0EVE"]

    first, second = await asyncio.gather(names.names_for(reply.data), names.names_for(reply.data))
    assert first == second == {"slack:U0ANA": "ana", "slack:U0BOB": "Bob Builder"}  # Eve: her id
    assert sorted(directory.calls) == ["U0BOB", "U0EVE"]  # one look-up each, shared, none for Ana
    await names.names_for(reply.data)
    assert sorted(directory.calls) == ["U0BOB", "U0EVE"]  # cached, and a failure is remembered


async def test_a_slow_look_up_never_holds_a_message_up(monkeypatch: object) -> None:
    directory = Directory({"U0BOB": ("Bob",)})
    directory.gate.clear()
    monkeypatch.setattr(names_module, "LOOKUP_TIMEOUT", 0.05)  # type: ignore[attr-defined]
    names = Names("slack", IDS, directory)
    assert await names.resolve(["U0BOB"]) == {}  # shown as the id for now
    directory.gate.set()
    await asyncio.wait_for(directory.answered.wait(), 5)  # the late answer still fills the cache
    assert names.known("U0BOB") == "Bob"
