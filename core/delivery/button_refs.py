"""A button's reference to its command, in the few characters a platform lets a button carry
(Discord: a `custom_id` of 100), so buttons survive a restart. Three forms, tried in order:

    baton:<action>:<run_id>        the command is exactly `<action> <run_id>` (resume, approve, …)
    baton:<action>:=<command>      the literal command text, when it fits
    baton:<action>:#<sha256 hex>   a key into the store's content-addressed blobs, holding the
                                   command text (`ButtonCommands`: option 3 "run X --force <long message>")

Encoding and decoding are pure; storing and fetching the blob is the caller's `put`/`get`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from core.delivery.buttons import DIGEST

PREFIX = "baton"
#: Matches every reference this module makes.
PATTERN = re.compile(r"baton:(?P<action>[a-z][a-z0-9_-]{0,19}):(?P<ref>.+)", re.DOTALL)
_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


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


def encode(action: str, command: str, run_id: str | None, put: Callable[[bytes], str], *, limit: int) -> str:
    """The shortest reference of at most `limit` characters that gives `command` back; `put`
    stores bytes and returns their digest."""
    name = _action(action)
    head = f"{PREFIX}:{name}:"
    if run_id and _RUN_ID.fullmatch(run_id) and command.strip() == f"{name} {run_id}":
        return head + run_id
    literal = f"{head}={command}"
    if len(literal) <= limit:
        return literal
    return f"{head}#{put(command.encode('utf-8'))}"


def parse(reference: str) -> ButtonRef | None:
    """What `reference` carries, or None when it is not one of ours."""
    match = PATTERN.fullmatch(reference)
    if match is None:
        return None
    action, ref = match["action"], match["ref"]
    if ref.startswith("="):
        return ButtonRef(action, command=ref[1:])
    if ref.startswith("#") and DIGEST.fullmatch(ref[1:]):
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
