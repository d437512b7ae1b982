"""Gateway payloads as Discord sends them (INTERACTION_CREATE, MESSAGE_CREATE, GUILD_CREATE),
dispatched into the real discord.py `ConnectionState`."""

from __future__ import annotations

import copy
import secrets
from typing import Any

import discord

from tests.e2e.discord.fake_discord import (
    APP_ID,
    BOT_ID,
    CHANNEL_ID,
    COMMAND_ID,
    GUILD_ID,
    ISO,
    FakeDiscord,
    text_channel,
    user,
)

ANA = user("2200000000000000001", "ana")
BOB = user("2200000000000000002", "bob")
MALLORY = user("2200000000000000003", "mallory")


def guild_create() -> dict[str, Any]:
    return {
        "id": GUILD_ID, "name": "ops", "icon": None, "owner_id": ANA["id"], "unavailable": False,
        "member_count": 3, "large": False, "features": [], "emojis": [], "stickers": [],
        "roles": [{"id": GUILD_ID, "name": "@everyone", "permissions": "2248473465835073",
                   "position": 0, "color": 0, "hoist": False, "managed": False, "mentionable": False}],
        "channels": [text_channel(CHANNEL_ID)], "threads": [], "members": [], "voice_states": [],
        "presences": [], "joined_at": ISO, "premium_tier": 0, "verification_level": 0,
        "default_message_notifications": 0, "explicit_content_filter": 0, "mfa_level": 0,
        "nsfw_level": 0, "preferred_locale": "en-US", "system_channel_flags": 0,
    }


def _member(who: dict[str, Any]) -> dict[str, Any]:
    return {"user": who, "roles": [], "joined_at": ISO, "deaf": False, "mute": False, "flags": 0,
            "permissions": "2248473465835073", "nick": None, "avatar": None, "pending": False}


#: the permissions a server gives Baton in the tests' channels (every one a run needs)
ALL_PERMISSIONS = "2248473465835073"


def _interaction(fake: FakeDiscord, kind: int, who: dict[str, Any], channel: dict[str, Any],
                 data: dict[str, Any], message: dict[str, Any] | None = None, *,
                 app_permissions: str = ALL_PERMISSIONS, context: int = 0) -> dict[str, Any]:
    token = "itok_" + secrets.token_hex(16)
    fake.tokens[token] = {"channel": channel["id"], "original": message["id"] if message else None,
                          "user": who["id"]}
    payload: dict[str, Any] = {
        "id": fake.snowflake(), "application_id": APP_ID, "type": kind, "token": token, "version": 1,
        "guild_id": GUILD_ID, "channel_id": channel["id"], "channel": channel, "member": _member(who),
        "data": data, "locale": "en-US", "guild_locale": "en-US", "app_permissions": app_permissions,
        "entitlements": [], "authorizing_integration_owners": {"0": GUILD_ID}, "context": context,
        "attachment_size_limit": 26214400,
    }
    if message is not None:
        payload["message"] = copy.deepcopy(message)
    return payload


def slash_command(fake: FakeDiscord, text: str, *, who: dict[str, Any] = ANA,
                  channel_id: str = CHANNEL_ID, **place: Any) -> dict[str, Any]:
    """`/workflow do command: <text>` (any chat command, verbatim) typed in a channel (or a
    thread) of the guild; `place`: the interaction's `app_permissions` and `context`."""
    return subcommand(fake, "do", {"command": text}, who=who, channel_id=channel_id, **place)


#: Discord's option types: 3 string, 5 boolean.
_OPTION_TYPES = {str: 3, bool: 5}


def _options(values: dict[str, Any], focused: str | None = None) -> list[dict[str, Any]]:
    options = []
    for name, value in values.items():
        option: dict[str, Any] = {"name": name, "type": _OPTION_TYPES[type(value)], "value": value}
        if name == focused:
            option["focused"] = True
        options.append(option)
    return options


def subcommand(fake: FakeDiscord, name: str, values: dict[str, Any], *, who: dict[str, Any] = ANA,
               channel_id: str = CHANNEL_ID, **place: Any) -> dict[str, Any]:
    """`/workflow <name> <option: value>…` as Discord delivers it (type 2, a subcommand option)."""
    data = {"id": COMMAND_ID, "name": "workflow", "type": 1, "guild_id": GUILD_ID,
            "options": [{"name": name, "type": 1, "options": _options(values)}]}
    return _interaction(fake, 2, who, fake.channels[channel_id], data, **place)


def autocomplete(fake: FakeDiscord, name: str, values: dict[str, Any], focused: str, *,
                 who: dict[str, Any] = ANA, channel_id: str = CHANNEL_ID) -> dict[str, Any]:
    """Typing into option `focused` of `/workflow <name>` (type 4: Discord asks for choices)."""
    data = {"id": COMMAND_ID, "name": "workflow", "type": 1, "guild_id": GUILD_ID,
            "options": [{"name": name, "type": 1, "options": _options(values, focused)}]}
    return _interaction(fake, 4, who, fake.channels[channel_id], data)


def modal_submit(fake: FakeDiscord, custom_id: str, values: dict[str, str], *, who: dict[str, Any] = ANA,
                 channel_id: str = CHANNEL_ID) -> dict[str, Any]:
    """A modal the bot opened, submitted with these texts ({text input custom_id: text}) (type 5)."""
    rows = [{"type": 1, "components": [{"type": 4, "custom_id": cid, "value": text}]}
            for cid, text in values.items()]
    return _interaction(fake, 5, who, fake.channels[channel_id], {"custom_id": custom_id, "components": rows})


def button_click(fake: FakeDiscord, message_id: str, custom_id: str, *,
                 who: dict[str, Any] = ANA) -> dict[str, Any]:
    """A click on a button of a message the bot posted (the message as Discord holds it)."""
    message = fake.messages[message_id]
    data = {"custom_id": custom_id, "component_type": 2}
    return _interaction(fake, 3, who, fake.channels[message["channel_id"]], data, message)


def dm_button_click(fake: FakeDiscord, message_id: str, custom_id: str, *,
                    who: dict[str, Any] = ANA) -> dict[str, Any]:
    """A click on a button of a message the bot sent `who` directly (in their DM with it): no
    guild and no member, the person as `user`, the bot-DM context (1)."""
    message = fake.messages[message_id]
    token = "itok_" + secrets.token_hex(16)
    fake.tokens[token] = {"channel": message["channel_id"], "original": message_id, "user": who["id"]}
    channel = {**fake.channels[message["channel_id"]], "recipients": [who]}
    return {
        "id": fake.snowflake(), "application_id": APP_ID, "type": 3, "token": token, "version": 1,
        "channel_id": channel["id"], "channel": channel, "user": who,
        "data": {"custom_id": custom_id, "component_type": 2}, "message": copy.deepcopy(message),
        "locale": "en-US", "app_permissions": ALL_PERMISSIONS, "entitlements": [],
        "authorizing_integration_owners": {"0": "0"}, "context": 1, "attachment_size_limit": 26214400,
    }


def select_choice(fake: FakeDiscord, message_id: str, custom_id: str, value: str, *,
                  who: dict[str, Any] = ANA) -> dict[str, Any]:
    """An option picked in a select menu of a message the bot posted."""
    message = fake.messages[message_id]
    data = {"custom_id": custom_id, "component_type": 3, "values": [value]}
    return _interaction(fake, 3, who, fake.channels[message["channel_id"]], data, message)


def message_create(fake: FakeDiscord, channel_id: str, content: str, *, who: dict[str, Any] = ANA,
                   mentions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "id": fake.snowflake(), "channel_id": channel_id, "guild_id": GUILD_ID, "author": who,
        "member": {k: v for k, v in _member(who).items() if k != "user"}, "content": content,
        "timestamp": ISO, "edited_timestamp": None, "tts": False, "mention_everyone": False,
        "mentions": mentions or [], "mention_roles": [], "attachments": [], "embeds": [],
        "pinned": False, "type": 0, "flags": 0, "components": [],
    }


def bot_mention() -> str:
    return f"<@{BOT_ID}>"


def dispatch_interaction(client: discord.Client, payload: dict[str, Any]) -> None:
    client._connection.parse_interaction_create(copy.deepcopy(payload))  # type: ignore[arg-type]


def dispatch_message(client: discord.Client, payload: dict[str, Any]) -> None:
    client._connection.parse_message_create(copy.deepcopy(payload))  # type: ignore[arg-type]
