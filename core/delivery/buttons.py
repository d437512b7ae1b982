"""One store of long button commands, for every platform.

A button carries its command back when clicked, in what the platform lets it carry (Discord:
a `custom_id` of 100 characters; Slack: a `value` of 2,000, an option's of 150, a modal's
metadata of 3,000). A command too long for that is kept here and the button carries its
reference: the SHA-256 of the command, a key into the store's content-addressed blobs
(`value`: the command itself, or `ref:<sha256>` when it is too long; `command_of` reads it back).

One retention: blobs are kept as long as the database is (a gate's buttons work however long
it waits, also after a restart). A reference nobody kept answers None; the adapter tells the
clicker to type the command.
"""

from __future__ import annotations

import re
from collections.abc import Callable

DIGEST = re.compile(r"[0-9a-f]{64}")
REF = "ref:"


class ButtonCommands:
    def __init__(self, put: Callable[[bytes], str], get: Callable[[str], bytes]) -> None:
        self._put = put
        self._get = get

    def keep(self, command: str) -> str:
        """The reference a button carries for `command`."""
        return self._put(command.encode("utf-8"))

    def command(self, ref: str) -> str | None:
        """The command `ref` stands for; None when it is not one this store kept."""
        if not DIGEST.fullmatch(ref):
            return None
        try:
            return self._get(ref).decode("utf-8")
        except KeyError:
            return None

    def value(self, command: str, limit: int) -> str:
        """What a button carries for `command`: itself, or `ref:<sha256>` over `limit` characters."""
        return command if len(command) <= limit else REF + self.keep(command)

    def command_of(self, value: str) -> str | None:
        """The command a clicked button's `value` stands for (None: an unknown reference)."""
        return self.command(value.removeprefix(REF)) if value.startswith(REF) else value
