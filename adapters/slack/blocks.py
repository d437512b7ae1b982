"""Reply -> Block Kit, and the edit that records a button choice. Pure functions, no I/O.
Slack's limits (below) are the rules the core lays a reply out by (`RULES`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.commands.block_messages import Layout, Rules, sections
from core.commands.messages import Button, Menu
from core.splitting import fit

SECTION_LIMIT = 3_000  # characters per section block
VALUE_LIMIT = 2_000  # characters per button value
LABEL_LIMIT = 75  # characters per button label or option text
ACTIONS_LIMIT = 25  # buttons per actions block
OPTION_VALUE_LIMIT = 150
OPTIONS_LIMIT = 100  # options per static_select
PLACEHOLDER_LIMIT = 150
FALLBACK_LIMIT = 3_000
#: Above this many characters a reply is uploaded as a file snippet instead of blocks.
UPLOAD_THRESHOLD = 12_000
HOME_BLOCKS = 100  # blocks a Home tab view holds
TEXT_BLOCKS = 40  # sections of text, leaving room for a note, the buttons and the choice lists
ACTION_PREFIX = "baton:"

Block = dict[str, Any]


def unescape_mrkdwn(text: str) -> str:
    """Undo Slack's escaping of incoming message text (`formatting.slack_escape`)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


RULES = Rules(section=SECTION_LIMIT, upload_over=UPLOAD_THRESHOLD, sections=TEXT_BLOCKS,
              fallback=FALLBACK_LIMIT, value=VALUE_LIMIT, option_value=OPTION_VALUE_LIMIT,
              unescape=unescape_mrkdwn)


def plain(text: str, limit: int) -> Block:
    """A `plain_text` object, cut to `limit` characters (with "…") where Slack would refuse it."""
    return {"type": "plain_text", "text": fit(text, limit), "emoji": True}


def button_element(button: Button, index: int) -> Block:
    """A button carrying its `command` as its value (or the reference the core made of it); its
    `action_id` is unique within the message (Slack requires it) and stable for one button."""
    element: Block = {"type": "button", "text": plain(button.label, LABEL_LIMIT), "value": button.command,
                      "action_id": f"{ACTION_PREFIX}{button.action or 'command'}:{index}"}
    if button.style in ("primary", "danger"):
        element["style"] = button.style
    return element


def select_element(menu: Menu, index: int) -> Block:
    """A `static_select`; its `action_id` starts with ACTION_PREFIX like a button's."""
    options = [{"text": plain(option.label, LABEL_LIMIT), "value": option.command}
               for option in menu.options[:OPTIONS_LIMIT]]
    return {"type": "static_select", "action_id": f"{ACTION_PREFIX}menu:{index}",
            "placeholder": plain(menu.placeholder, PLACEHOLDER_LIMIT), "options": options}


def section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def context(text: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def build_message(layout: Layout) -> Block:
    """chat.postMessage's `text` (the notification) and `blocks` for a reply the core laid out: a
    section per text (each within SECTION_LIMIT: the core split them), a context line for the
    note, actions blocks of at most 25 buttons (unique block ids), one of a select per choice list."""
    blocks = [section(t) for t in layout.sections if t.strip()]
    if layout.note:
        blocks.append(context(layout.note))
    buttons = [button_element(b, i) for i, b in enumerate(layout.buttons)]
    rows = [buttons[at : at + ACTIONS_LIMIT] for at in range(0, len(buttons), ACTIONS_LIMIT)]
    for n, row in enumerate(rows):
        blocks.append({"type": "actions", "block_id": f"baton_actions_{n}", "elements": row})
    if layout.menus:
        selects = [select_element(m, i) for i, m in enumerate(layout.menus)]
        blocks.append({"type": "actions", "block_id": "baton_menus", "elements": selects})
    return {"text": layout.fallback, "blocks": blocks}


def home_view(chunks: Sequence[str]) -> Block:
    """The Home tab's view: the rendered home as sections (a long one ends where Slack's limit does)."""
    return {"type": "home", "blocks": [section(t) for t in sections(chunks, SECTION_LIMIT)][:HOME_BLOCKS]}


def chosen_blocks(blocks: Sequence[Mapping[str, Any]], note: str) -> list[Block]:
    """The clicked message without its buttons, plus a line saying who chose what."""
    kept = [dict(b) for b in blocks if b.get("type") != "actions"]
    kept.append(context(note))
    return kept
