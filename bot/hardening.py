"""Keeping Baton's own secrets away from the processes it starts, beyond their environment.

- `scrub_environ`: once the settings are read, the variables holding their secrets leave
  `os.environ`, so a subprocess a tool starts inherits none of them.
- `forbid_inspection`: Linux marks the process non-dumpable (`PR_SET_DUMPABLE`): a process of
  the same user (a step) can no longer read its `/proc/<pid>/environ` or memory, nor attach a
  debugger. Forked children inherit it; what a step `exec`s is dumpable again.

Imported by the command line before anything heavy: ctypes and the standard library only.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

from core.redaction import Redactor

log = logging.getLogger("baton.hardening")

_PR_SET_DUMPABLE = 4


def scrub_environ(redactor: Redactor) -> list[str]:
    """Remove from `os.environ` the variables that hold `redactor`'s secrets (settings are read
    already): a `BATON_*` setting that holds one (the database URL holds its password), and any
    variable whose whole value is one. Other variables stay, even if a weak secret (a password
    like `postgres`) happens to occur in them, so `PATH` is never taken away. The names removed."""
    secrets = set(redactor.secrets)
    gone = [
        name
        for name, value in os.environ.items()
        if value in secrets or (name.upper().startswith("BATON_") and redactor.redact(value) != value)
    ]
    for name in gone:
        del os.environ[name]
    return gone


def forbid_inspection() -> None:
    """Linux: mark this process non-dumpable, so that other processes of the same user (the
    steps it starts) cannot read its memory or `/proc/<pid>/environ`. Elsewhere: nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")
    except (OSError, AttributeError) as exc:
        log.warning("could not make the process non-dumpable: %s", exc, extra={"action": "harden"})
