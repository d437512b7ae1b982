"""The pure translations: Slack payloads -> ChatMessage, texts and buttons -> Block Kit."""

from __future__ import annotations

from adapters.slack.blocks import (
    RULES,
    SECTION_LIMIT,
    VALUE_LIMIT,
    build_message,
    chosen_blocks,
)
from adapters.slack.formatting import FORMAT
from adapters.slack.formatting import slack_escape as escape_mrkdwn
from adapters.slack.inbound import button_click, chat_event, slash_command, strip_mention
from core.commands.block_messages import Layout, laid_out, split_lines
from core.commands.messages import Button, Reply
from core.delivery.buttons import ButtonCommands
from core.redaction import Redactor
from core.render import Rendered

BOT = "UBOT"


def test_split_text_keeps_every_character_within_the_section_limit() -> None:
    text = "\n".join(f"line {i} " + "x" * (i % 50) for i in range(2_000))
    parts = split_lines(text, SECTION_LIMIT)
    assert all(len(p) <= SECTION_LIMIT for p in parts)
    assert "\n".join(parts) == text


def test_split_text_hard_splits_one_overlong_line() -> None:
    parts = split_lines("y" * 7_001, SECTION_LIMIT)
    assert [len(p) for p in parts] == [3_000, 3_000, 1_001]


def test_buttons_become_one_actions_block_with_unique_action_ids() -> None:
    buttons = (
        Button("Resume", "resume r1", "primary", "resume"),
        Button("Abandon", "abandon r1", "danger", "abandon"),
        Button("Other", "status r1"),
        Button("Other 2", "runs"),
    )
    message = build_message(Layout(("*Run r1 failed*",), "*Run r1 failed*", buttons))
    section, actions = message["blocks"]
    assert section == {"type": "section", "text": {"type": "mrkdwn", "text": "*Run r1 failed*"}}
    ids = [e["action_id"] for e in actions["elements"]]
    assert ids == ["baton:resume:0", "baton:abandon:1", "baton:command:2", "baton:command:3"]
    assert [e["value"] for e in actions["elements"]] == ["resume r1", "abandon r1", "status r1", "runs"]
    assert actions["elements"][0]["style"] == "primary"
    assert "style" not in actions["elements"][2]
    assert message["text"] == "*Run r1 failed*"


def test_more_than_25_buttons_are_spread_over_several_actions_blocks() -> None:
    buttons = tuple(Button(f"Approve {n}", f"approve r{n}", action="approve") for n in range(30))
    blocks = build_message(Layout(("which one?",), "which one?", buttons))["blocks"]
    actions = [b for b in blocks if b["type"] == "actions"]
    assert [len(b["elements"]) for b in actions] == [25, 5]
    assert len({b["block_id"] for b in actions}) == 2
    values = [e["value"] for b in actions for e in b["elements"]]
    assert values == [f"approve r{n}" for n in range(30)]


def test_a_long_command_is_passed_by_reference() -> None:
    long_command = 'run x --force "' + "z" * VALUE_LIMIT + '"'
    reply = Reply("prompt", buttons=(Button("Force", long_command, action="force"),))
    refs = ButtonCommands(lambda blob: "1", lambda digest: b"")
    text = Rendered("prompt", ("prompt",), True)
    layout = laid_out(reply, text, FORMAT, RULES, Redactor(()), refs, attach=True)
    assert build_message(layout)["blocks"][-1]["elements"][0]["value"] == "ref:1"


def test_chosen_blocks_drop_the_buttons_and_say_who_chose() -> None:
    resume = Button("Resume", "resume r1", action="resume")
    message = build_message(Layout(("pick one",), "pick one", (resume,)))
    blocks = chosen_blocks(message["blocks"], "✔ <@U1> chose *Resume*")
    assert [b["type"] for b in blocks] == ["section", "context"]
    assert blocks[1]["elements"][0]["text"] == "✔ <@U1> chose *Resume*"


def test_escape_mrkdwn_neutralises_pings_and_links() -> None:
    assert escape_mrkdwn("<!channel> & <http://x|y>") == "&lt;!channel&gt; &amp; &lt;http://x|y&gt;"


def test_slash_command_becomes_a_command_message_in_its_channel() -> None:
    body = {"channel_id": "C1", "user_id": "U1", "user_name": "ana", "text": " run deploy &lt;v2&gt; ",
            "trigger_id": "t.1", "response_url": "https://hooks/1"}
    message, origin = slash_command(body)
    assert (message.platform, message.conversation, message.user) == ("slack", "C1", "U1")
    assert message.text == "run deploy <v2>"
    assert message.event_id == "command:t.1"
    assert message.is_command and not message.direct
    assert origin.follow_up == "https://hooks/1"


def test_slash_command_without_trigger_id_gets_a_stable_digest_id() -> None:
    body = {"channel_id": "D1", "user_id": "U1", "text": "runs"}
    first, _ = slash_command(body)
    again, _ = slash_command(dict(body))
    assert first.event_id == again.event_id
    assert first.event_id.startswith("command:")
    assert first.direct


def test_strip_mention_removes_the_bot_only() -> None:
    assert strip_mention("<@UBOT> lgtm <@U2>", BOT) == ("lgtm <@U2>", True)
    assert strip_mention("<@UBOT|baton> ship it", BOT) == ("ship it", True)
    assert strip_mention("ship it", BOT) == ("ship it", False)


def test_thread_reply_becomes_a_plain_message_with_a_stable_event_id() -> None:
    event = {"type": "message", "channel": "C1", "user": "U1", "text": "lgtm", "ts": "2.0",
             "thread_ts": "1.0"}
    parsed = chat_event(event, bot_user_id=BOT)
    assert parsed is not None
    message, origin = parsed
    assert (message.thread, message.is_command, message.mentions_bot) == ("1.0", False, False)
    assert message.event_id == "message:C1:2.0"
    assert origin.thread == "1.0"
    mention = chat_event({**event, "type": "app_mention"}, bot_user_id=BOT, mentioned=True)
    assert mention is not None and mention[0].event_id == message.event_id  # one message, one event


def test_bots_edits_joins_and_channel_chatter_are_ignored() -> None:
    base = {"type": "message", "channel": "C1", "user": "U1", "text": "lgtm", "ts": "2.0", "thread_ts": "1.0"}
    assert chat_event({**base, "bot_id": "B9"}, bot_user_id=BOT) is None
    assert chat_event({**base, "subtype": "bot_message"}, bot_user_id=BOT) is None
    assert chat_event({**base, "subtype": "message_changed"}, bot_user_id=BOT) is None
    assert chat_event({**base, "subtype": "channel_join"}, bot_user_id=BOT) is None
    assert chat_event({**base, "user": BOT}, bot_user_id=BOT) is None
    chatter = {k: v for k, v in base.items() if k != "thread_ts"}
    assert chat_event(chatter, bot_user_id=BOT) is None


def test_direct_messages_and_mentions_count_outside_threads() -> None:
    dm = {"type": "message", "channel": "D1", "user": "U1", "text": "approve", "ts": "3.0",
          "channel_type": "im"}
    parsed = chat_event(dm, bot_user_id=BOT)
    assert parsed is not None and parsed[0].direct
    mention = {"type": "message", "channel": "C1", "user": "U1", "text": "<@UBOT> approve", "ts": "4.0"}
    parsed = chat_event(mention, bot_user_id=BOT)
    assert parsed is not None
    assert (parsed[0].text, parsed[0].mentions_bot) == ("approve", True)


def test_button_click_runs_the_buttons_command_as_the_clicker() -> None:
    body = {"trigger_id": "tr", "user": {"id": "U2", "username": "bob"}, "channel": {"id": "C1"},
            "container": {"channel_id": "C1", "message_ts": "5.0"},
            "message": {"ts": "5.0", "thread_ts": "1.0"}, "response_url": "https://hooks/2"}
    action = {"action_id": "baton:resume:0", "value": "resume r1", "action_ts": "6.0"}
    message, origin = button_click(body, action, "resume r1")
    assert (message.user, message.text, message.thread) == ("U2", "resume r1", "1.0")
    assert message.is_command
    assert message.event_id == "action:tr:6.0:baton:resume:0"
    assert origin.follow_up == "https://hooks/2"
