"""The adapter's pure translations: custom_ids that carry their command, mentions, places."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.discord.buttons import MAX_CUSTOM_ID
from adapters.discord.inbound import place_of, strip_mentions
from core.delivery.button_refs import command_of, encode, parse
from core.store.repository import SqlStore


@pytest.fixture
def store(sqlite_url: str) -> Iterator[SqlStore]:
    store = SqlStore(sqlite_url)
    store.migrate()
    yield store
    store.close()


@pytest.mark.parametrize(
    ("action", "command", "form"),
    [
        ("resume", "resume 3f9a1c2b0d11", "baton:resume:3f9a1c2b0d11"),
        ("approve", "approve 3f9a1c2b0d11", "baton:approve:3f9a1c2b0d11"),
        ("resolve_done", "resolve 3f9a1c2b0d11 ship done",
         "baton:resolve_done:=resolve 3f9a1c2b0d11 ship done"),
        ("force", 'run hello --force "hi"', 'baton:force:=run hello --force "hi"'),
    ],
)
def test_short_commands_are_carried_in_the_custom_id_itself(
    store: SqlStore, action: str, command: str, form: str
) -> None:
    custom_id = encode(action, command, "3f9a1c2b0d11", store.blobs.put_blob, limit=MAX_CUSTOM_ID)
    ref = parse(custom_id)

    assert custom_id == form
    assert ref is not None and command_of(ref, store.blobs.get_blob) == command


def test_a_long_command_is_a_key_into_the_store_and_comes_back_verbatim(store: SqlStore) -> None:
    command = 'run deploy --force "' + "ünïcode and \\\"quotes\\\" `ticks` " * 12 + '"'

    custom_id = encode("force", command, "3f9a1c2b0d11", store.blobs.put_blob, limit=MAX_CUSTOM_ID)
    ref = parse(custom_id)

    assert len(custom_id) <= MAX_CUSTOM_ID and custom_id.startswith("baton:force:#")
    assert ref is not None and command_of(ref, store.blobs.get_blob) == command


@pytest.mark.parametrize("foreign", ["other:resume:1", "baton:Resume:1", "baton:resume:#nothex", "baton:x:"])
def test_foreign_or_malformed_custom_ids_are_not_ours(foreign: str) -> None:
    assert parse(foreign) is None


def test_bot_mentions_are_stripped_and_reported() -> None:
    assert strip_mentions("<@42> lgtm  <@!42>", 42) == ("lgtm", True)
    assert strip_mentions("lgtm <@7>", 42) == ("lgtm <@7>", False)


def test_places_use_the_parent_channel_as_the_conversation_of_a_thread() -> None:
    assert place_of(object(), channel_id=5, guild_id=None).direct
    channel = place_of(object(), channel_id=5, guild_id=9)
    assert (channel.conversation, channel.thread, channel.direct) == ("5", None, False)
    # a thread (a real discord.Thread from the gateway) is covered end to end in
    # tests/e2e/acceptance (case 4: a reply in the run's thread)
