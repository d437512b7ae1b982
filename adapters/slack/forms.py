"""`Form` -> a Slack modal (`views.open`), and a `view_submission` back to the texts it holds.

Pure translation. Each field is an input block `field:<name>`: a `static_select` for a field
with choices (`enum:`, and booleans), a multi-line `plain_text_input` for objects and arrays,
a one-line one otherwise, prefilled with the field's text and optional unless required. The
modal's `private_metadata` carries the core's `FormPlace`; the core's errors come back as
Slack's per-block errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.slack.blocks import Block, plain
from adapters.slack.formatting import FORMAT
from core.commands.forms import offered
from core.commands.messages import Form, FormField

CALLBACK_ID = "baton:form"
BLOCK_PREFIX = "field:"
ACTION_ID = "value"
TITLE_LIMIT = 24  # characters of a modal's title, submit and close labels
LABEL_LIMIT = 2_000
OPTIONS_LIMIT = 100
OPTION_LIMIT = 75  # characters of an option's text (its value: 150)
METADATA_LIMIT = 3_000


def _element(field: FormField) -> Block:
    choices = offered(field)
    if choices:
        options = [{"text": plain(c, OPTION_LIMIT), "value": c} for c in choices[:OPTIONS_LIMIT]]
        element: Block = {"type": "static_select", "action_id": ACTION_ID, "options": options,
                          "placeholder": plain(FORMAT.said("choose"), LABEL_LIMIT)}
        chosen = [o for o in options if o["value"] == field.value]
        if chosen:
            element["initial_option"] = chosen[0]
        return element
    element = {"type": "plain_text_input", "action_id": ACTION_ID, "multiline": field.multiline}
    if field.value:
        element["initial_value"] = field.value
    return element


def _block(field: FormField) -> Block:
    label = plain(FORMAT.said("field_label", field.label, field.type), LABEL_LIMIT)
    block: Block = {"type": "input", "block_id": BLOCK_PREFIX + field.name, "optional": not field.required,
                    "label": label, "element": _element(field)}
    if field.description:
        block["hint"] = plain(field.description, LABEL_LIMIT)
    return block


def modal(form: Form, metadata: str) -> Block:
    """The modal asking for `form`'s fields (`metadata`: an encoded `FormPlace`, or a reference)."""
    return {
        "type": "modal", "callback_id": CALLBACK_ID, "private_metadata": metadata,
        "title": plain(form.title, TITLE_LIMIT), "submit": plain(form.submit, TITLE_LIMIT),
        "close": plain(FORMAT.said("cancel"), TITLE_LIMIT), "blocks": [_block(f) for f in form.fields],
    }


def submitted(view: Mapping[str, Any]) -> dict[str, str]:
    """Field name -> the text submitted for it ("" when left empty)."""
    values: dict[str, str] = {}
    for block_id, actions in ((view.get("state") or {}).get("values") or {}).items():
        if not str(block_id).startswith(BLOCK_PREFIX):
            continue
        state = (actions or {}).get(ACTION_ID) or {}
        if state.get("type") == "static_select":
            text = (state.get("selected_option") or {}).get("value")
        else:
            text = state.get("value")
        values[str(block_id)[len(BLOCK_PREFIX):]] = str(text) if text is not None else ""
    return values


def block_errors(errors: Mapping[str, str], view: Mapping[str, Any]) -> dict[str, str]:
    """The core's errors (field name -> line; `""`: the whole form) as Slack's per-block errors;
    an error about the whole form is shown on the first field."""
    blocks = [str(b.get("block_id")) for b in view.get("blocks") or [] if b.get("type") == "input"]
    shown: dict[str, str] = {}
    for name, line in errors.items():
        block = BLOCK_PREFIX + name if name else (blocks[0] if blocks else BLOCK_PREFIX)
        shown[block] = (shown[block] + " " + line) if block in shown else line
    return shown
