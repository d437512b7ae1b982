"""The few sentences that exist only because of Slack's mechanics (uploads, button clicks,
channel membership). Everything about workflows and runs is worded in `templates/slack/`.
Each error is one line of cause and one line of next step.
"""

from __future__ import annotations

from adapters.slack.blocks import escape_mrkdwn
from core.render import slack_text


def chose(user: str, label: str) -> str:
    """Shown on a message whose button was clicked, in place of its buttons."""
    return f"✔ <@{user}> chose *{slack_text(label)}*"


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
