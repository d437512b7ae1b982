"""The methods `@dataclass` generates, compiled once and kept beside the bytecode.

For every dataclass, `dataclasses` writes the source of its `__init__`, `__repr__`, `__eq__`
(and `__setattr__`, `__hash__` … as asked) and compiles it with `exec` while the class is
created. Python keeps the bytecode of modules (`.pyc`), not of these: a Baton process creates
about 230 dataclasses on its way to work (the records, commands, events), ≈ 1,200 compiles, the
largest single cost of a cold start after the interpreter and the libraries' imports.

`install()` (the `baton` executable does it first, `bot/startup.py`) makes `dataclasses`
execute through a cache: a source text seen before runs from the code compiled from that very
text (compiled as `dataclasses`' own `exec` compiles it: no inherited `__future__` flags, file
`<string>`), so the classes and their methods are the same. The compiled code lives in one
file in the `bot` package's `__pycache__` (named like a `.pyc`, for this interpreter's version),
read at start and written as Python writes bytecode: not when `sys.dont_write_bytecode`
(`PYTHONDONTWRITEBYTECODE`), only where the directory can be written (best effort, replaced
atomically), once the process has started (`save`, from `bot.startup.started`) or exits. A file
that is missing, from another Python or unreadable is ignored (compile as usual).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
from types import CodeType
from typing import Any

__all__ = ["cache_path", "install", "save"]

#: entries kept at most: past it a save keeps only what this process used (stale texts go)
MAX_ENTRIES = 20_000
_MAGIC = importlib.util.MAGIC_NUMBER

_codes: dict[str, CodeType] = {}
_used: set[str] = set()
_unsaved = False
_installed = False


def cache_path() -> str | None:
    """Where this interpreter keeps the compiled methods (None: no bytecode cache location)."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dataclass_methods.py")
    try:
        return importlib.util.cache_from_source(source)
    except NotImplementedError:  # no `sys.implementation.cache_tag`
        return None


def _load(path: str) -> dict[str, CodeType]:
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError:
        return {}
    if not data.startswith(_MAGIC):
        return {}
    try:
        codes = marshal.loads(data[len(_MAGIC) :])
    except (EOFError, ValueError, TypeError):
        return {}
    return codes if isinstance(codes, dict) else {}


def _exec(source: Any, namespace: Any = None, local_ns: Any = None, /) -> None:
    """`exec` as `dataclasses` calls it, with the compile of a known source text cached."""
    global _unsaved
    if namespace is None:  # exec's own default: the caller's namespace
        frame = sys._getframe(1)
        namespace, local_ns = frame.f_globals, frame.f_locals if local_ns is None else local_ns
    if isinstance(source, str):
        code = _codes.get(source)
        if not isinstance(code, CodeType):
            code = compile(source, "<string>", "exec", dont_inherit=True)
            _codes[source] = code
            _unsaved = True
        _used.add(source)
        source = code
    exec(source, namespace, local_ns)  # the source that dataclasses generated


def install() -> None:
    """Route `dataclasses`' compiles through the cache (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    path = cache_path()
    if path is not None:
        _codes.update(_load(path))
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # shadows the builtin in that module
    atexit.register(save)


def save() -> None:
    """Write what was compiled since the last save, if the process writes bytecode."""
    global _unsaved
    path = cache_path() if _unsaved and not sys.dont_write_bytecode else None
    if path is None:
        return
    _unsaved = False
    keep = _codes if len(_codes) <= MAX_ENTRIES else {s: c for s, c in _codes.items() if s in _used}
    temp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temp, "wb") as file:
            file.write(_MAGIC + marshal.dumps(keep))
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)
