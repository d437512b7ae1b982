"""Reply -> Block Kit, and the edit that records a button choice. Pure functions, no I/O.

Slack's limits shape everything here: 3,000 characters per section block, 2,000 per
button `value`, 75 per button label, 25 buttons per actions block; a choice list is a
`static_select` of at most 100 options (150 characters per value, 75 per option text).
The core lays a reply out by these limits (`RULES`, `core.commands.block_messages`): sections
of text, a note, buttons and choice lists carrying their values, the text to upload.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.commands.block_messages import Rules, sections
from core.commands.messages import Button, Menu
from core.splitting import fit

SECTION_LIMIT = 3_000
VALUE_LIMIT = 2_000
LABEL_LIMIT = 75
ACTIONS_LIMIT = 25  # buttons per actions block
OPTION_VALUE_LIMIT = 150
OPTIONS_LIMIT = 100  # options per static_select
PLACEHOLDER_LIMIT = 150
FALLBACK_LIMIT = 3_000
#: Above this many characters a reply is uploaded as a file snippet instead of blocks.
UPLOAD_THRESHOLD = 12_000
TEXT_BLOCKS = 40  # sections of text, leaving room for a note, the buttons and the choice lists
ACTION_PREFIX = "baton:"

Block = dict[str, Any]


@dataclass(frozen=True, slots=True)
class SlackMessage:
    """The `text` (notification fallback) and `blocks` of one chat.postMessage/update."""

    text: str
    blocks: tuple[Block, ...]

    def as_kwargs(self) -> dict[str, Any]:
        return {"text": self.text, "blocks": list(self.blocks)}


def unescape_mrkdwn(text: str) -> str:
    """Undo Slack's escaping of incoming message text (`formatting.slack_escape`)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


RULES = Rules(section=SECTION_LIMIT, upload_over=UPLOAD_THRESHOLD, sections=TEXT_BLOCKS,
              fallback=FALLBACK_LIMIT, value=VALUE_LIMIT, option_value=OPTION_VALUE_LIMIT,
              unescape=unescape_mrkdwn)


def action_id(button: Button, index: int) -> str:
    """Unique within the message (Slack requires it) and stable for one button."""
    return f"{ACTION_PREFIX}{button.action or 'command'}:{index}"


def plain(text: str, limit: int) -> Block:
    """A `plain_text` object, cut to `limit` characters (with "…") where Slack would refuse it."""
    return {"type": "plain_text", "text": fit(text, limit), "emoji": True}


def button_element(button: Button, index: int) -> Block:
    """A button carrying its `command` as its value (or the reference the core made of it)."""
    element: Block = {"type": "button", "text": plain(button.label, LABEL_LIMIT),
                      "action_id": action_id(button, index), "value": button.command}
    if button.style in ("primary", "danger"):
        element["style"] = button.style
    return element


def actions_blocks(buttons: Sequence[Button]) -> list[Block]:
    """Actions blocks of at most 25 buttons each (Slack's limit), with unique block ids."""
    elements = [button_element(b, i) for i, b in enumerate(buttons)]
    return [
        {"type": "actions", "block_id": f"baton_actions_{n}", "elements": elements[i : i + ACTIONS_LIMIT]}
        for n, i in enumerate(range(0, len(elements), ACTIONS_LIMIT))
    ]


def select_element(menu: Menu, index: int) -> Block:
    """A `static_select`; its `action_id` starts with ACTION_PREFIX like a button's."""
    return {
        "type": "static_select",
        "action_id": f"{ACTION_PREFIX}menu:{index}",
        "placeholder": plain(menu.placeholder, PLACEHOLDER_LIMIT),
        "options": [
            {"text": plain(o.label, LABEL_LIMIT), "value": o.command}
            for o in menu.options[:OPTIONS_LIMIT]
        ],
    }


def menus_block(menus: Sequence[Menu]) -> list[Block]:
    """One actions block holding a select per choice list (none when there is no list)."""
    if not menus:
        return []
    elements = [select_element(m, i) for i, m in enumerate(menus)]
    return [{"type": "actions", "block_id": "baton_menus", "elements": elements}]


def section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def context(text: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def build_message(
    texts: Sequence[str],
    buttons: Sequence[Button] = (),
    *,
    menus: Sequence[Menu] = (),
    note: str | None = None,
    text: str | None = None,
) -> SlackMessage:
    """Section blocks for the `texts` (each within SECTION_LIMIT: the core split them), a context
    line for `note`, actions blocks for the buttons and for the choice lists; `text`: the
    notification text (None: the start of `texts`)."""
    blocks: list[Block] = [section(t) for t in texts if t.strip()]
    if note:
        blocks.append(context(note))
    blocks.extend(actions_blocks(buttons))
    blocks.extend(menus_block(menus))
    if text is None:
        text = fit("\n".join(t for t in texts if t.strip()) or " ", FALLBACK_LIMIT)
    return SlackMessage(text=text, blocks=tuple(blocks))


HOME_BLOCKS = 100  # blocks a Home tab view holds


def home_view(chunks: Sequence[str]) -> Block:
    """The Home tab's view: the rendered home as sections (a long one ends where Slack's limit does)."""
    return {"type": "home", "blocks": [section(t) for t in sections(chunks, SECTION_LIMIT)][:HOME_BLOCKS]}


def chosen_blocks(blocks: Sequence[Mapping[str, Any]], note: str) -> list[Block]:
    """The clicked message without its buttons, plus a line saying who chose what."""
    kept = [dict(b) for b in blocks if b.get("type") != "actions"]
    kept.append(context(note))
    return kept
