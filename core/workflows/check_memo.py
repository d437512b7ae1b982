"""Checks of a workflow's parts that passed before, remembered across processes.

Loading the workflows checks each `output.schema` against its JSON Schema metaschema (jsonschema)
and each `schedule: cron` expression (croniter). The answer is a function of the text checked and
of the library that checks it, and every process used to import both libraries to give the same
answers again (≈ 40 ms of a cold `baton say`, most of it importing jsonschema and its
`referencing`, `attrs` and metaschemas). A process that has a memo (the `baton` executable installs
one, kept in `bot/compile_cache.py`'s file) asks it first:

    key = check_memo.key("cron", CRON_LIBRARIES, text)   # None: nothing remembered for this text
    if not check_memo.passed(key):
        ...the real check, which raises or reports as before...
        check_memo.remember(key)

Only passes are remembered: a text that fails is checked by the library every time, so every
error still comes from it, where it came from before. A key names the library by where it is
installed and that directory's modification time: installing, upgrading or removing any package
there (pip, uv) adds and removes entries in it, so it changes the key, and the check runs again
(an uninstalled library still fails with ImportError where it did). A library found nowhere
gives no key. Without a memo (tests, a program embedding Baton) every check runs.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["canonical_json", "install", "key", "passed", "remember"]

_passed: Callable[[str], bool] | None = None
_remember: Callable[[str], None] | None = None
_stamps: dict[str, str | None] = {}  # library -> where it is installed and when that changed


def install(passed: Callable[[str], bool], remember: Callable[[str], None]) -> None:
    """Use `passed(key)` / `remember(key)` (the process's memo) from now on."""
    global _passed, _remember
    _passed, _remember = passed, remember


def _stamp(library: str) -> str | None:
    if library not in _stamps:
        try:
            spec = importlib.machinery.PathFinder.find_spec(library)
            origin = spec.origin if spec is not None else None
            if origin is None or not spec.has_location:  # type: ignore[union-attr]
                raise OSError
            package = os.path.dirname(origin) if spec.submodule_search_locations else origin  # type: ignore[union-attr]
            where = os.path.dirname(package)  # site-packages: a new entry there on every (un)install
            _stamps[library] = f"{origin}\0{os.stat(where).st_mtime_ns}"
        except (OSError, ImportError, ValueError):
            _stamps[library] = None
    return _stamps[library]


def key(kind: str, libraries: Sequence[str], text: str | None) -> str | None:
    """The memo's key for checking `text` with `libraries` installed as they are now; None when
    there is no memo, no text, or a library is not found."""
    if _passed is None or text is None:
        return None
    stamps = [_stamp(library) for library in libraries]
    if any(stamp is None for stamp in stamps):
        return None
    return "\0".join(("check", kind, *(s for s in stamps if s is not None), text))


def passed(memo_key: str | None) -> bool:
    """Whether the check of this key passed before."""
    return memo_key is not None and _passed is not None and _passed(memo_key)


def remember(memo_key: str | None) -> None:
    """The check of this key passed."""
    if memo_key is not None and _remember is not None:
        _remember(memo_key)


def canonical_json(value: Any) -> str | None:
    """`value` as sorted JSON when that text stands for it alone (only str keys, only JSON's
    own types: `{1: x}` and `{"1": x}` would share a text), else None."""
    if not _plain(value):
        return None
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _plain(value: Any) -> bool:
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if kind is list:
        return all(_plain(v) for v in value)
    return kind in (str, int, float, bool) or value is None
