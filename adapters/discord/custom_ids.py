"""Button `custom_id`s that carry their whole command, so buttons survive a restart.

A Discord `custom_id` holds at most 100 characters and is all a click brings back. Three
forms, tried in order when a button is posted:

    baton:<action>:<run_id>        the command is exactly `<action> <run_id>` (resume, approve, …)
    baton:<action>:=<command>      the literal command text, when it fits
    baton:<action>:#<sha256 hex>   a key into the store's content-addressed blobs, holding the
                                   command text (option 3 "run X --force <long message>")

Encoding and decoding are pure; storing and fetching the blob is the caller's `put`/`get`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

MAX_CUSTOM_ID = 100
PREFIX = "baton"
#: Matches every custom_id this module makes (DynamicItem template).
PATTERN = re.compile(r"baton:(?P<action>[a-z][a-z0-9_-]{0,19}):(?P<ref>.+)", re.DOTALL)
#: A select menu's custom_id; each option's value is made like a button's custom_id.
MENU_PATTERN = re.compile(r"baton-menu:(?P<index>[0-9]{1,2})")
_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_DIGEST = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class ButtonRef:
    """What a click carries: the action name and how to get its command back."""

    action: str
    run_id: str | None = None  # form 1
    command: str | None = None  # form 2
    digest: str | None = None  # form 3


def _action(action: str) -> str:
    name = re.sub(r"[^a-z0-9_-]", "", action.lower())[:20]
    return name if name and name[0].isalpha() else "cmd"


def encode(action: str, command: str, run_id: str | None, put: Callable[[bytes], str]) -> str:
    """The shortest custom_id that gives `command` back; `put` stores bytes, returns a digest."""
    name = _action(action)
    head = f"{PREFIX}:{name}:"
    if run_id and _RUN_ID.fullmatch(run_id) and command.strip() == f"{name} {run_id}":
        return head + run_id
    literal = f"{head}={command}"
    if len(literal) <= MAX_CUSTOM_ID:
        return literal
    return f"{head}#{put(command.encode('utf-8'))}"


def parse(custom_id: str) -> ButtonRef | None:
    """The reference a custom_id carries, or None when it is not one of ours."""
    match = PATTERN.fullmatch(custom_id)
    if match is None:
        return None
    action, ref = match["action"], match["ref"]
    if ref.startswith("="):
        return ButtonRef(action, command=ref[1:])
    if ref.startswith("#") and _DIGEST.fullmatch(ref[1:]):
        return ButtonRef(action, digest=ref[1:])
    if _RUN_ID.fullmatch(ref):
        return ButtonRef(action, run_id=ref)
    return None


def command_of(ref: ButtonRef, get: Callable[[str], bytes]) -> str:
    """The exact `/workflow …` text (without `/workflow `) the button runs."""
    if ref.command is not None:
        return ref.command
    if ref.digest is not None:
        return get(ref.digest).decode("utf-8")
    return f"{ref.action} {ref.run_id}"
