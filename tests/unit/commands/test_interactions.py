"""`Interactions`: where the answer to a request with a response of its own goes (a Discord
interaction), decided in the core (#27); the adapter's `Asked` only names the places."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from core.commands.interactions import Interactions
from core.commands.messages import Button, ChatMessage, Reply
from core.redaction import Redactor
from core.render import format_of


class Refused(Exception):
    pass


@dataclass
class FakeDelivery:
    answered: list[tuple[str, Any, bool]] = field(default_factory=list)  # (kind, place, with follow-up)
    fail_at: Any = None

    async def answer(self, reply: Reply, place: Any, *, follow_up: Any = None,
                     thread_or_none: bool = True) -> None:
        if place == self.fail_at:
            raise Refused(place)
        self.answered.append((reply.kind if not reply.buttons else f"{reply.kind}+buttons", place,
                              follow_up is not None))


@dataclass
class FakeAsked:
    original: str = "original"
    public: str = "public"
    private: str = "private"
    follow_up: str = "follow-up"
    follow_up_ttl: float = 840.0
    form_fields: int = 5
    channel: str | None = "C1"
    refused: tuple[type[BaseException], ...] = (Refused,)
    errors: tuple[type[BaseException], ...] = (Refused,)
    did: list[str] = field(default_factory=list)

    def message(self, text: str) -> ChatMessage:
        return ChatMessage(platform="discord", conversation="C1", thread=None, user="U1", user_name="ana",
                           text=text, event_id="e1", is_command=True)

    async def tell(self, text: str, controls: Any = None) -> None:
        self.did.append(f"tell {text.splitlines()[0]}")

    async def delete_original(self) -> None:
        self.did.append("delete original")


def _interactions(delivery: FakeDelivery) -> Interactions:
    handler = SimpleNamespace(redactor=Redactor(()))
    return Interactions(handler, delivery, format_of("discord"))  # type: ignore[arg-type]


STARTED = Reply("run_started", {"workflow": "notes"}, run_id="r1", buttons=(Button("Open", "open r1"),)).sent(
    starts_thread=True)


async def test_a_private_answer_deletes_the_public_deferral_first() -> None:
    delivery, asked = FakeDelivery(), FakeAsked()
    await _interactions(delivery).answer(asked, [Reply("help").sent(ephemeral=True)], open_original=True)  # type: ignore[arg-type]
    assert asked.did == ["delete original"] and delivery.answered == [("help", "private", True)]


async def test_an_answer_aimed_at_another_thread_goes_there_and_is_shown_here_without_buttons() -> None:
    delivery, asked = FakeDelivery(), FakeAsked()
    await _interactions(delivery).answer(asked, [STARTED.at(thread="T9")], open_original=True)  # type: ignore[arg-type]
    assert delivery.answered == [("run_started+buttons", "T9", True), ("run_started", "original", False)]
    assert asked.did == []


async def test_a_run_whose_answer_fails_starts_in_the_channel_and_no_thinking_stays() -> None:
    delivery, asked = FakeDelivery(fail_at="original"), FakeAsked()
    await _interactions(delivery).answer(asked, [STARTED], open_original=True)  # type: ignore[arg-type]
    assert delivery.answered == [("run_started+buttons", "C1", False)] and asked.did == ["delete original"]


async def test_public_answers_replace_the_deferral_then_follow_it_and_an_unused_deferral_is_deleted() -> None:
    delivery, asked = FakeDelivery(), FakeAsked()
    interactions = _interactions(delivery)
    await interactions.answer(asked, [Reply("help"), Reply("status")], open_original=True)  # type: ignore[arg-type]
    assert [place for _, place, _ in delivery.answered] == ["original", "public"]
    await interactions.answer(asked, [], open_original=True)  # type: ignore[arg-type]
    assert asked.did == ["delete original"]


async def test_a_malformed_button_is_told_stale_and_runs_nothing() -> None:
    delivery, asked = FakeDelivery(), FakeAsked()
    assert await _interactions(delivery).click(asked, "baton:open:not a run id!") is None  # type: ignore[arg-type]
    assert len(asked.did) == 1 and asked.did[0].startswith("tell ") and delivery.answered == []
