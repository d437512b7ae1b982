"""Discord events -> `ChatMessage`. Translation only; every decision stays in core.

- Users are their immutable snowflake (`str(user.id)`); display names ride along for display.
- The event id is the interaction id or the message id: a gateway redelivery (after a resume
  or a reconnect) carries the same id, so the core processes it once.
- A thread's conversation is its parent channel and its thread is the thread channel id:
  that is where the run was started and where it lives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import discord

from core.commands.messages import ChatMessage

PLATFORM = "discord"


@dataclass(frozen=True, slots=True)
class Place:
    """Where an event happened, as the core names places."""

    conversation: str
    thread: str | None
    direct: bool


def place_of(channel: object, *, channel_id: int, guild_id: int | None) -> Place:
    """Conversation/thread/direct for a channel object discord.py resolved (or could not)."""
    if isinstance(channel, discord.Thread):
        return Place(str(channel.parent_id), str(channel.id), direct=False)
    if isinstance(channel, discord.DMChannel | discord.GroupChannel) or guild_id is None:
        return Place(str(channel_id), None, direct=True)
    return Place(str(channel_id), None, direct=False)


def strip_mentions(text: str, bot_id: int | None) -> tuple[str, bool]:
    """Remove `<@BOT>` / `<@!BOT>` from the text; say whether the bot was mentioned."""
    if bot_id is None:
        return " ".join(text.split()), False
    stripped, count = re.subn(rf"<@!?{bot_id}>", " ", text)
    return " ".join(stripped.split()), count > 0


def is_person(message: discord.Message, bot_id: int | None) -> bool:
    """A human wrote it: not our bot, not another bot or webhook, not a system message."""
    if message.author.bot or message.webhook_id is not None or message.author.id == bot_id:
        return False
    return message.type in (discord.MessageType.default, discord.MessageType.reply)


def _message(place: Place, user: discord.abc.User, text: str, event_id: str, *, is_command: bool,
             mentions_bot: bool = False) -> ChatMessage:
    return ChatMessage(
        platform=PLATFORM, conversation=place.conversation, thread=place.thread, user=str(user.id),
        user_name=user.display_name or user.name, text=text, event_id=event_id, is_command=is_command,
        direct=place.direct, mentions_bot=mentions_bot,
    )


def command_message(interaction: discord.Interaction, text: str) -> ChatMessage:
    """`/workflow command: <text>` as a command message."""
    place = place_of(
        interaction.channel, channel_id=interaction.channel_id or 0, guild_id=interaction.guild_id
    )
    return _message(place, interaction.user, text.strip(), f"interaction:{interaction.id}", is_command=True)


def chat_message(message: discord.Message, channel: object, bot_id: int | None) -> ChatMessage:
    """A plain message (not a command): an approval reply candidate, classified by core."""
    text, mentioned = strip_mentions(message.content, bot_id)
    guild_id = message.guild.id if message.guild is not None else getattr(channel, "guild_id", None)
    place = place_of(channel, channel_id=message.channel.id, guild_id=guild_id)
    return _message(place, message.author, text, f"message:{message.id}", is_command=False,
                    mentions_bot=mentioned)
