"""Before a run starts from a channel: can Baton post there? (the interaction's own answer)

Every interaction carries the bot's permissions in its channel (`app_permissions`) and the
kind of place it came from (`context`): a server channel, the bot's direct messages, or a
private channel between people (a DM or group DM where Baton was used as a user's app, which
no bot can post in). A run needs to see the channel, send messages in it (in threads, when
typed in one) and attach files (long outputs); without them nothing starts and the user alone
is told (ephemeral) what to ask for. Opening the run's thread is not needed: without it the
run reports in the channel.
"""

from __future__ import annotations

import discord

from adapters.discord.formatting import FORMAT

#: what a run needs of a server channel: (permission, how Discord's settings name it)
NEEDED = (("view_channel", "View Channel"), ("send_messages", "Send Messages"),
          ("attach_files", "Attach Files"))
IN_THREADS = (("view_channel", "View Channel"), ("send_messages_in_threads", "Send Messages in Threads"),
              ("attach_files", "Attach Files"))


def refusal(interaction: discord.Interaction) -> str | None:
    """None when Baton can post where `interaction` came from; else the two lines to tell."""
    if interaction.context.private_channel:
        return FORMAT.said("private_channel")
    if interaction.guild_id is None:  # the bot's own direct messages
        return None
    kind = getattr(interaction.channel, "type", None)
    thread = kind in (discord.ChannelType.public_thread, discord.ChannelType.private_thread)
    granted = interaction.app_permissions
    missing = [label for name, label in (IN_THREADS if thread else NEEDED) if not getattr(granted, name)]
    if not missing:
        return None
    return FORMAT.said("lacks", missing, interaction.channel_id)
