"""The order of places a background reply tries, for every platform: the run's usual places,
the follow-up while it lives (state-carrying replies only), then a direct message; the first
reply in a new place is told it moves (once), later ones go straight there."""

from __future__ import annotations

from core.commands.messages import Reply
from core.delivery.edits import Edits
from core.delivery.envelope import Address, Mode
from core.delivery.fallbacks import DIRECT, FOLLOW_UP, Refused, along


class Places:
    """What a platform does at each place: refuse, cannot (False), or take the reply."""

    def __init__(self, *refusing: str, cannot: tuple[str, ...] = ()) -> None:
        self.refusing, self.cannot = set(refusing), set(cannot)
        self.tried: list[tuple[str, bool]] = []

    async def __call__(self, place: str, moving: bool) -> bool:
        self.tried.append((place, moving))
        if place in self.refusing:
            raise Refused(place)
        return place not in self.cannot


COMPLETED = Reply(kind="run_completed", run_id="r1", run_status="completed", to=Address(requester="slack:U1"))
RUNNING = Reply(kind="progress", run_id="r1", run_status="running", how=Mode(replace_key="progress:r1"))


async def test_the_next_place_that_takes_it_is_told_once_and_kept() -> None:
    edits = Edits()
    edits.follow_up("discord", "r1", "send", ttl=60)
    places = Places("T1", "C1")
    assert await along(edits, "discord", COMPLETED, ["T1", "C1"], places)
    assert places.tried == [("T1", False), ("C1", True), (FOLLOW_UP, True)]
    assert edits.moved("discord", "r1") == FOLLOW_UP

    again = Places()
    assert await along(edits, "discord", COMPLETED, ["T1", "C1"], again)
    assert again.tried == [(FOLLOW_UP, False)]  # straight there, not told again


async def test_progress_is_not_posted_through_a_follow_up_and_without_one_goes_direct() -> None:
    edits = Edits()
    edits.follow_up("slack", "r1", "https://hooks/1", ttl=60)
    places = Places("usual")
    assert await along(edits, "slack", RUNNING, ["usual"], places)
    assert places.tried == [("usual", False)]  # left to the next state-carrying reply
    assert edits.moved("slack", "r1") is None

    no_follow_up = Edits()
    places = Places("usual")
    assert await along(no_follow_up, "slack", COMPLETED, ["usual"], places)
    assert places.tried == [("usual", False), (DIRECT, True)]


async def test_an_edit_only_reply_is_never_moved_and_nowhere_says_so() -> None:
    edits = Edits()
    decided = Reply(kind="gate_decided", run_id="r1", how=Mode(replace_key="offer:1", edit_only=True))
    places = Places("T1")
    assert not await along(edits, "discord", decided, ["T1", "C1"], places)
    assert places.tried == [("T1", False)]
    nowhere = Places(cannot=("T1", "C1", DIRECT))
    assert not await along(Edits(), "discord", COMPLETED, ["T1", "C1"], nowhere)


async def test_replies_on_their_way_at_once_say_the_run_moved_once() -> None:
    """The final progress edit and the completion fail over together (thread, channel and
    follow-up refused): the direct message says "from now on" once."""
    import asyncio

    edits = Edits()
    edits.follow_up("discord", "r1", "send", ttl=60)

    class Slow(Places):
        async def __call__(self, place: str, moving: bool) -> bool:
            await asyncio.sleep(0.01)  # each refusal is a round trip
            return await super().__call__(place, moving)

    places = Slow("T1", "C1", FOLLOW_UP)
    final_edit = Reply(kind="progress", run_id="r1", run_status="completed",
                       how=Mode(replace_key="progress:r1"))
    assert all(await asyncio.gather(
        along(edits, "discord", final_edit, ["T1", "C1"], places),
        along(edits, "discord", COMPLETED, ["T1", "C1"], places)))
    told = [moving for place, moving in places.tried if place == DIRECT]
    assert sorted(told) == [False, True]  # both sent there, the move told once
