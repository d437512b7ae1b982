"""A redelivered outbox row's message is looked for before it is posted again, on a platform
without an idempotency key (`core.delivery.redelivery`): the transport lists, the core decides."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.commands.messages import Reply
from core.delivery.edits import Outgoing, Posted
from core.delivery.envelope import Address, Mode, Once
from core.delivery.failures import CallFailed
from core.delivery.redelivery import Seen, payload, post
from core.delivery.transport import Sent

KEY = "outbox:7"


class Listing:
    """A transport that lists pages of messages (`pages`), or fails listing (`failing`)."""

    platform = "chat"
    thread_is_place = False

    def __init__(self, *pages: Sequence[Seen], failing: bool = False, listable: bool = True) -> None:
        self.pages, self.failing, self.listable = list(pages), failing, listable
        self.ops: list[tuple[Any, ...]] = []

    async def recent(self, place: Any, thread: str | None, oldest: float, limit: int,
                     cursor: str | None) -> tuple[Sequence[Seen], str | None] | None:
        self.ops.append(("recent", place, thread, oldest, cursor))
        if self.failing:
            raise CallFailed("cannot read\nadd the scope", method="history", error="missing_scope",
                             channel=place)
        if not self.listable:
            return None
        index = int(cursor or 0)
        return self.pages[index], (str(index + 1) if index + 1 < len(self.pages) else None)

    async def own(self) -> tuple[str, str]:
        self.ops.append(("own",))
        return "B1", "A1"

    async def landed(self, place: Any, reply: Outgoing, message: Any, posted: str, *, attach: bool) -> Sent:
        self.ops.append(("landed", place, posted))
        return Sent(Posted(place, (posted,)))

    async def post(self, place: Any, reply: Outgoing, message: Any, *, attach: bool, opens: bool) -> Sent:
        self.ops.append(("post", place))
        return Sent(Posted(place, ("new",)))


def _reply(since: float | None = 1_000.0) -> Reply:
    return Reply("run_completed", run_id="r1", to=Address(conversation="C1", thread="1.2"),
                 how=Mode(once=Once(KEY, since)))


async def _post(listing: Listing, reply: Reply) -> Sent:
    return await post(listing, "C1", reply, None, attach=False, opens=False)  # type: ignore[arg-type]


async def test_the_bots_own_message_under_the_rows_key_is_taken_for_posted() -> None:
    listing = Listing([Seen("1.3", "outbox:other", "B1"), Seen("1.4", KEY, "B1", "A1")])
    sent = await _post(listing, _reply())
    assert sent.posted == Posted("C1", ("1.4",))
    assert listing.ops[0] == ("recent", "C1", "1.2", 940.0, None)  # its thread, a minute early
    assert ("post", "C1") not in listing.ops


async def test_another_apps_message_carrying_the_key_is_not_ours() -> None:
    listing = Listing([Seen("1.4", KEY, "B2"), Seen("1.5", KEY, "B1", "A9")])
    assert (await _post(listing, _reply())).posted.ids == ("new",)


async def test_the_pages_are_looked_through_until_the_last() -> None:
    listing = Listing([Seen("1.3", None)], [Seen("1.4", KEY, "B1")])
    assert (await _post(listing, _reply())).posted.ids == ("1.4",)
    assert [op[-1] for op in listing.ops if op[0] == "recent"] == [None, "1"]


async def test_a_first_attempt_a_failed_look_up_or_an_unlistable_place_posts() -> None:
    first = Listing([Seen("1.4", KEY, "B1")])
    assert (await _post(first, _reply(since=None))).posted.ids == ("new",)
    assert first.ops == [("post", "C1")]
    for listing in (Listing(failing=True), Listing(listable=False)):
        assert (await _post(listing, _reply())).posted.ids == ("new",)


def test_the_payload_names_the_key_and_the_row() -> None:
    assert payload(Once("outbox:12:2")) == {"key": "outbox:12:2", "row": 12}
    assert payload(Once("notice:x")) == {"key": "notice:x"}
