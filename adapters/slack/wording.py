"""The few sentences that exist only because of Slack's mechanics (uploads, button clicks,
channel membership). Everything about workflows and runs is worded in `templates/slack/`.
Each error is one line of cause and one line of next step.
"""

from __future__ import annotations

from adapters.slack.blocks import escape_mrkdwn
from core.render import slack_text


def chose(name: str, label: str) -> str:
    """Shown on a message whose button was clicked, in place of its buttons: who clicked, by
    name (no ping; untrusted text, escaped), and what."""
    return f"✔ {slack_text(name)} chose *{slack_text(label)}*"


def uploaded(characters: int, filename: str) -> str:
    return (
        f"The full text ({characters:,} characters) is too long for a Slack message; "
        f"it is attached in this thread as `{escape_mrkdwn(filename)}`."
    )


def invite_bot(channel: str) -> str:
    return (
        f"Baton cannot post in <#{channel}>: the bot is not a member of that channel.\n"
        f"Invite the bot to <#{channel}> with `/invite @Baton`, then try again."
    )


def cannot_post(kind: str, channel: str) -> str:
    """Before a run: Baton may not post where the command was typed; worded for that kind of
    conversation ("public", "private", "group_dm", "dm")."""
    first = "Nothing was started: Baton cannot post in "
    if kind == "public":
        return (f"{first}<#{channel}> (the bot is not a member).\n"
                f"Invite it with `/invite @Baton` in <#{channel}>, then run the command again.")
    if kind == "private":
        return (f"{first}this private channel (the bot was not added to it).\n"
                "Add it from the channel's details (Integrations → Add apps → Baton), "
                "then run the command again.")
    place = "group direct message" if kind == "group_dm" else "direct message between people"
    return (f"{first}this {place}: Slack does not let a bot join one.\n"
            "Run the command in a channel Baton is in, or in your direct message with Baton.")


def moved(run_id: str, channel: str, error: str) -> str:
    """Said once, in a direct message, when a run's channel stopped taking its messages."""
    return (f"Baton can no longer post in <#{channel}> ({escape_mrkdwn(error)}), so it reports run "
            f"`{escape_mrkdwn(run_id)}` to you here from now on.")


def moved_here(run_id: str, channel: str, error: str) -> str:
    """Said once, through the command's response URL, when a run's channel stopped taking its
    messages: its state-carrying messages come here while that URL lives."""
    return (f"Baton can no longer post in <#{channel}> ({escape_mrkdwn(error)}), so it answers about run "
            f"`{escape_mrkdwn(run_id)}` here for now, then in a direct message to whoever started it.")


def started_unseen(run_id: str, error: str) -> str:
    """A run started, but the message saying so did not get through: it must not be started again."""
    run = escape_mrkdwn(run_id)
    return (f"Run `{run}` started, but Baton's message about it did not get through "
            f"({escape_mrkdwn(error)}).\n"
            f"Do not start it again: `/workflow status {run}` shows how it is doing.")


def archived(channel: str) -> str:
    return (f"Nothing was started: <#{channel}> is archived, so Baton cannot post there.\n"
            "Run the command in another channel Baton is in.")


def cannot_check(error: str) -> str:
    return (f"Nothing was started: Baton could not check that it can post here ({escape_mrkdwn(error)}).\n"
            "Try again in a minute; if it keeps failing, ask an admin to check Baton's logs.")


def missing_scope(needed: str) -> str:
    return (
        f"Baton's Slack app lacks the `{escape_mrkdwn(needed)}` permission.\n"
        "Ask a workspace admin to add that scope (see slack/manifest.yaml) and reinstall the app."
    )


def slack_failed(error: str) -> str:
    return (
        f"Slack refused Baton's message ({escape_mrkdwn(error)}).\n"
        "Try again in a minute; if it keeps failing, ask an admin to check Baton's logs."
    )


def slack_unreachable(error: str) -> str:
    return (
        f"Baton could not reach Slack ({escape_mrkdwn(error)}); what it was posting may be missing here.\n"
        "Try again in a minute; if it keeps failing, ask an admin to check the bot's network and logs."
    )


def button_expired() -> str:
    return (
        "This button has expired: Baton no longer remembers its command (long commands are kept"
        " for a limited time).\n"
        "Type the command shown in the message with `/workflow`."
    )


def form_expired() -> str:
    return "Baton no longer knows what this form was for; close it and type the command again."


def internal_error() -> str:
    return (
        "Baton hit an internal error while handling that.\n"
        "Try again; if it keeps failing, ask an admin to check Baton's logs."
    )
