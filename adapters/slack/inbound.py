"""Slack payloads -> `ChatMessage` (and the `Origin` its answers go to), and what Slack says of a
conversation -> `Conversation`. Pure functions over the bodies Bolt hands us.

Users are identified by their immutable Slack id (`U…`/`W…`), never a display name.
Every message carries an event id that is identical across Slack's retries:
- slash command: its `trigger_id` (unique per invocation), else a digest of the body;
- message / app_mention: `channel:ts` of the message, so the `message` and `app_mention`
  deliveries of one message, and their retries, are the same event for the core;
- button click: the click's `trigger_id` and `action_ts`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from adapters.slack.blocks import ACTION_PREFIX, unescape_mrkdwn
from core.commands.answering import heard
from core.commands.messages import ChatMessage
from core.commands.preflight import Conversation, Kind
from core.commands.requests import Origin

PLATFORM = "slack"

#: Message subtypes that are a person writing; every other subtype (edits, joins,
#: deletions, bot messages, channel topic changes…) is ignored.
_PERSON_SUBTYPES = frozenset({None, "thread_broadcast", "file_share"})


def _digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _chosen_by(body: Mapping[str, Any], channel: str, text: str, event_id: str, thread: str | None,
               **reach: Any) -> tuple[ChatMessage, Origin]:
    """A command chosen by the `user` of a click's or a form's `body`, in `channel`; `reach`: the
    ways back to them (`Origin.follow_up`, `.trigger`)."""
    user = body.get("user") or {}
    message = ChatMessage(platform=PLATFORM, conversation=channel, user=str(user.get("id", "")), text=text,
                          event_id=event_id, thread=thread, direct=channel.startswith("D"),
                          user_name=user.get("username") or user.get("name"))
    return message, Origin(channel=channel, user=message.user, thread=thread, **reach)


def slash_command(body: Mapping[str, Any]) -> tuple[ChatMessage, Origin]:
    """`/workflow <text>` -> a command message in the channel it was typed in."""
    channel, user = str(body.get("channel_id", "")), str(body.get("user_id", ""))
    trigger = body.get("trigger_id")
    message = ChatMessage(
        platform=PLATFORM, conversation=channel, user=user,
        text=unescape_mrkdwn(str(body.get("text", ""))).strip(),
        event_id=f"command:{trigger}" if trigger else f"command:{_digest(body)}",
        direct=str(body.get("channel_name", "")) == "directmessage" or channel.startswith("D"),
        user_name=body.get("user_name"),
    )
    origin = Origin(channel=channel, user=user, follow_up=body.get("response_url"), trigger=trigger)
    return message, origin


def strip_mention(text: str, bot_user_id: str | None) -> tuple[str, bool]:
    """Remove `<@BOTID>` (with or without `|name`) from the text; say whether it was there."""
    if not bot_user_id:
        return text, False
    pattern = re.compile(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>")
    stripped, count = pattern.subn("", text)
    return " ".join(stripped.split()), count > 0


def is_person_message(event: Mapping[str, Any], bot_user_id: str | None) -> bool:
    """A human wrote it: not a bot (ours or another), not an edit/join/deletion."""
    if event.get("bot_id") or event.get("bot_profile"):
        return False
    if event.get("subtype") not in _PERSON_SUBTYPES:
        return False
    user = event.get("user")
    return bool(user) and user != bot_user_id


def chat_event(
    event: Mapping[str, Any], *, bot_user_id: str | None, mentioned: bool = False
) -> tuple[ChatMessage, Origin] | None:
    """A `message` or `app_mention` event -> a plain (non-command) message, or None to ignore
    (a bot's, an edit, or one the core does not hear: `answering.heard`)."""
    if not is_person_message(event, bot_user_id):
        return None
    channel = str(event.get("channel", ""))
    user = str(event["user"])
    thread = event.get("thread_ts")
    direct = event.get("channel_type") == "im"  # a group DM (`mpim`) counts like a small channel
    text, mentions = strip_mention(str(event.get("text", "")), bot_user_id)
    message = ChatMessage(platform=PLATFORM, conversation=channel, user=user, text=unescape_mrkdwn(text),
                          event_id=f"message:{channel}:{event.get('ts', '')}", thread=thread,
                          is_command=False, direct=direct, mentions_bot=mentions or mentioned)
    return (message, Origin(channel=channel, user=user, thread=thread)) if heard(message) else None


def button_click(
    body: Mapping[str, Any], action: Mapping[str, Any], command: str
) -> tuple[ChatMessage, Origin]:
    """A `block_actions` click -> the command the button stands for, as the clicking user."""
    container = body.get("container") or {}
    channel = str((body.get("channel") or {}).get("id") or container.get("channel_id", ""))
    thread = (body.get("message") or {}).get("thread_ts") or container.get("thread_ts")
    click = (body.get("trigger_id", ""), action.get("action_ts", ""), action.get("action_id", ""))
    return _chosen_by(body, channel, command, "action:" + ":".join(str(part) for part in click), thread,
                      follow_up=body.get("response_url"), trigger=body.get("trigger_id"))


def form_submission(body: Mapping[str, Any], command: str, channel: str,
                    thread: str | None) -> tuple[ChatMessage, Origin]:
    """A `view_submission` of a form: the command it completes, as the user who submitted it
    (never whoever asked for the form), in the conversation the form was asked for in."""
    view = body.get("view") or {}
    return _chosen_by(body, channel, command, f"view:{view.get('id', '')}:{view.get('hash', '')}", thread)


def chosen(action: Mapping[str, Any]) -> tuple[str, str, str]:
    """The name of a clicked button (its `action_id`, `blocks.button_element`), its value (or the
    value of the option picked in a `static_select`) and what the user saw on it (its label)."""
    name = str(action.get("action_id", "")).removeprefix(ACTION_PREFIX).split(":", 1)[0]
    shown = (action.get("selected_option") or {}) if action.get("type") == "static_select" else action
    value = str(shown.get("value", ""))
    return name, value, str((shown.get("text") or {}).get("text", value))


def conversation(channel: str, name: str | None, info: Mapping[str, Any]) -> Conversation:
    """What `conversations.info` said of `channel` (`info`: nothing when the bot cannot see it),
    with the name a slash command gives it (`directmessage`, `privategroup`, `mpdm-…`)."""
    name = name or ""
    kind: Kind = "public"
    if info.get("is_mpim") or name.startswith("mpdm-"):
        kind = "group_dm"
    elif info.get("is_im") or name == "directmessage" or channel.startswith("D"):
        kind = "dm"
    elif info.get("is_private") or info.get("is_group") or name == "privategroup" or channel.startswith("G"):
        kind = "private"
    return Conversation(kind, own_dm=bool(info.get("is_im")), member=bool(info.get("is_member")),
                        archived=bool(info.get("is_archived")))
