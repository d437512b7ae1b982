"""Whether Baton can post where a `run` was typed (`core.commands.preflight.Preflight`), from what
the platform says of the conversation (faked here): which sentence the user is told, and a
writable conversation asked about once."""

from __future__ import annotations

import pytest

from core.commands.preflight import Conversation, Preflight
from core.delivery.failures import CallFailed
from core.render import format_of, sentence

SLACK = format_of("slack")


class Platform:
    def __init__(self, seen: Conversation | None) -> None:
        self.seen = seen
        self.asked: list[tuple[str, str | None]] = []

    async def look(self, channel: str, name: str | None) -> Conversation:
        self.asked.append((channel, name))
        if self.seen is None:
            raise CallFailed("x\ny", method="conversations.info", error="invalid_auth", channel=channel)
        return self.seen


@pytest.mark.parametrize(("seen", "told"), [
    (Conversation("public", member=True), None),
    (Conversation("dm", own_dm=True), None),
    (Conversation("dm", own_dm=True, archived=True), None),
    (Conversation("public"), sentence(SLACK, "cannot_post", "public", "C1")),
    (Conversation("group_dm"), sentence(SLACK, "cannot_post", "group_dm", "C1")),
    (Conversation("private", member=True, archived=True), sentence(SLACK, "archived", "C1")),
    (None, sentence(SLACK, "cannot_check", "invalid_auth")),
])
async def test_the_user_is_told_what_fits_the_conversation(seen: Conversation | None,
                                                            told: str | None) -> None:
    assert await Preflight(Platform(seen).look, SLACK).refusal("C1", "general") == told


async def test_a_writable_conversation_is_asked_about_once_and_a_refusing_one_every_time() -> None:
    writable, refusing = Platform(Conversation("public", member=True)), Platform(Conversation("public"))
    for platform in (writable, refusing):
        preflight = Preflight(platform.look, SLACK)
        await preflight.refusal("C1", "general")
        await preflight.refusal("C1", "general")
    assert writable.asked == [("C1", "general")]
    assert refusing.asked == [("C1", "general")] * 2
