"""Code that Python generates while Baton's modules load, compiled once and kept beside the bytecode.

Python keeps the bytecode of modules (`.pyc`) but compiles again, in every new process, what
the standard library generates at import time:

- `@dataclass` writes the source of each class's `__init__`, `__repr__`, `__eq__` … and
  compiles it with `exec` (≈ 230 dataclasses, ≈ 1,200 compiles on the way to work: the largest
  single cost of a cold start after the interpreter and the libraries' imports);
- `typing.ForwardRef` compiles each string annotation (≈ 500, pydantic and typer read them);
- `namedtuple` compiles its `__new__` with `eval`;
- `re` parses every pattern compiled at import (≈ 200) into the regular expression engine's
  code, in Python;
- SQLAlchemy's decorators (`sqlalchemy.util.langhelpers`) write and compile the source of
  each wrapper they make (≈ 100 while `import sqlalchemy` runs, ≈ 5 ms);
- jinja2 (`jinja2.environment`) writes and compiles the Python code of each template made
  from a string: the workflows' templates, prepared at every load (≈ 4 ms for this checkout's
  `workflows/`; the replies' templates come from jinja2's own bytecode cache).

`install()` (the `baton` executable does it first, `bot/startup.py`) routes those through a cache:
a source text (or pattern and flags) seen before gets what compiling that very text gave (compiled
as the library compiles it: no inherited `__future__` flags, file `<string>`; `re`: the same
engine code, groups and names; SQLAlchemy, jinja2: their file names and their module's `__future__` flags),
so the classes, functions and patterns are the same. The results live in one file in the `bot`
package's `__pycache__` (named like a `.pyc` for this interpreter's version), read at start and
written as Python writes bytecode: not when `sys.dont_write_bytecode` (`PYTHONDONTWRITEBYTECODE`),
only where that directory can be written (best effort, replaced atomically), once the process has
started (`save`, from `bot.startup.started`) and when it exits, if it compiled a few new texts
(`MIN_NEW`). A missing, damaged or foreign file is ignored. An install whose directories the
service cannot write fills it once, after `compileall`: `python -m bot.compile_cache` imports what
the entry points import and writes the file (`main`); each entry is unmarshalled when first used,
so a process pays only for what it uses.

The same file keeps the checks of workflows that passed (`passed`, `remember`: the memo of
`core/workflows/check_memo.py`, a schema's metaschema check, a cron expression's reading), so a
process that loads the same workflows again does not import jsonschema or croniter to give the same
answers; a new one saves the file even alone.
"""

from __future__ import annotations

import _sre
import atexit
import collections
import contextlib
import dataclasses
import importlib.machinery
import importlib.util
import marshal
import os
import re
import sys
import typing
from types import CodeType
from typing import Any

from core.workflows import check_memo

__all__ = ["cache_path", "install", "main", "passed", "remember", "save"]

#: entries kept at most: past it a save keeps only what this process used (stale texts go)
MAX_ENTRIES = 20_000
#: new compiles that make a save rewrite the file (≈ 1 MB): fewer cost less than the rewrite,
#: and some texts differ in every process (tokenize builds a pattern from a set, in hash order)
MIN_NEW = 8
#: the file's header: this interpreter's bytecode and regular-expression code versions
_HEADER = importlib.util.MAGIC_NUMBER + _sre.MAGIC.to_bytes(4, "little")

# keys: "exec\0<source>", "eval\0<source>" -> code; "re\0<flags>\0<pattern>" -> engine code.
# (A source text cannot contain NUL, so the kind and the text never run together.) The file
# maps each key to its value marshalled on its own (`_stored`), unmarshalled when first used:
# a process pays only for what it uses of what other entry points put there.
_stored: dict[str, bytes] = {}
_values: dict[str, Any] = {}  # unmarshalled or compiled in this process
_fresh: set[str] = set()  # compiled in this process, not in the file
_used: set[str] = set()
_new = 0  # compiles since the file was read or written
_installed = False


def cache_path() -> str | None:
    """Where this interpreter keeps the compiled code (None: no bytecode cache location)."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "generated_code.py")
    try:
        return importlib.util.cache_from_source(source)
    except NotImplementedError:  # no `sys.implementation.cache_tag`
        return None


def _load(path: str) -> dict[str, bytes]:
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError:
        return {}
    if not data.startswith(_HEADER):
        return {}
    try:
        entries = marshal.loads(data[len(_HEADER) :])
    except (EOFError, ValueError, TypeError):
        return {}
    return entries if isinstance(entries, dict) else {}


def _cached(key: str) -> Any:
    """The value stored for `key`, or None."""
    value = _values.get(key)
    if value is None and key in _stored:
        try:
            value = _values[key] = marshal.loads(_stored[key])
        except (EOFError, ValueError, TypeError):
            return None
    return value


def _keep(key: str, value: Any) -> None:
    global _new
    _values[key] = value
    _fresh.add(key)
    _new += 1


def passed(key: str) -> bool:
    """Whether a check of workflows (`core/workflows/check_memo.py`) passed for `key` before."""
    if _cached(key) is True:
        _used.add(key)
        return True
    return False


def remember(key: str) -> None:
    """A check of `key` passed: kept, and the file saved even if nothing else is new (an entry
    spares a library's import, worth more than the `MIN_NEW` compiles it stands for)."""
    global _new
    if _cached(key) is not True:
        _keep(key, True)
        _new += MIN_NEW
    _used.add(key)


def _compiled(source: str, mode: str) -> CodeType:
    """`compile(source, "<string>", mode)` as a module without `__future__` imports calls it."""
    key = f"{mode}\0{source}"
    code = _cached(key)
    if not isinstance(code, CodeType):
        code = compile(source, "<string>", mode, dont_inherit=True)
        _keep(key, code)
    _used.add(key)
    return code


def _exec(source: Any, namespace: Any = None, local_ns: Any = None, /) -> None:
    """`exec` as `dataclasses` calls it (a source text, its namespaces)."""
    if namespace is None:  # exec's own default: the caller's namespace
        frame = sys._getframe(1)
        namespace, local_ns = frame.f_globals, frame.f_locals if local_ns is None else local_ns
    exec(_compiled(source, "exec") if isinstance(source, str) else source, namespace, local_ns)


def _eval(source: Any, namespace: Any = None, local_ns: Any = None, /) -> Any:
    """`eval` as `namedtuple` calls it."""
    if namespace is None:
        frame = sys._getframe(1)
        namespace, local_ns = frame.f_globals, frame.f_locals if local_ns is None else local_ns
    return eval(_compiled(source, "eval") if isinstance(source, str) else source, namespace, local_ns)


def _compile(source: Any, filename: Any, mode: str, flags: int = 0, dont_inherit: bool = False,
             optimize: int = -1, **kwargs: Any) -> Any:  # fmt: skip
    """`compile` as `typing.ForwardRef` calls it: `compile(text, "<string>", "eval")`."""
    if isinstance(source, str) and filename == "<string>" and not flags and optimize == -1 and not kwargs:
        return _compiled(source, mode)
    return compile(source, filename, mode, flags, dont_inherit, optimize, **kwargs)


#: the module whose `compile` makes SQLAlchemy's generated wrappers, and the `__future__` flags its
#: calls inherit (it has `from __future__ import annotations`)
SQLALCHEMY_GENERATOR = "sqlalchemy.util.langhelpers"
_SQLALCHEMY_FLAGS = annotations.compiler_flag  # this module's `from __future__ import annotations`


def _sqlalchemy_compile(source: Any, filename: Any, mode: str, *args: Any, **kwargs: Any) -> Any:
    """`compile` as SQLAlchemy's `exec_code_in_env` calls it: `compile(text, "<sqlalchemy
    generated …>", "exec")`, with its module's `__future__` flags."""
    if isinstance(source, str) and isinstance(filename, str) and mode == "exec" and not args and not kwargs:
        key = f"sa\0{filename}\0{source}"
        code = _cached(key)
        if not isinstance(code, CodeType):
            code = compile(source, filename, mode, _SQLALCHEMY_FLAGS, dont_inherit=True)
            _keep(key, code)
        _used.add(key)
        return code
    return compile(source, filename, mode, _SQLALCHEMY_FLAGS | (args[0] if args else 0), *args[1:], **kwargs)


#: the module whose `compile` makes the Python code of each jinja2 template compiled from its
#: source (a workflow's templates, checked and prepared at every load; it has no `__future__` import)
JINJA2_GENERATOR = "jinja2.environment"


def _jinja2_compile(source: Any, filename: Any, mode: str, flags: int = 0, dont_inherit: bool = False,
                    optimize: int = -1, **kwargs: Any) -> Any:  # fmt: skip
    """`compile` as jinja2's `Environment._compile` calls it: `compile(python_source, filename,
    "exec")`, the template's file name (`<template>` for a string); nothing to inherit."""
    if isinstance(source, str) and isinstance(filename, str) and mode == "exec" and not flags \
            and optimize == -1 and not kwargs:  # fmt: skip
        key = f"j2\0{filename}\0{source}"
        code = _cached(key)
        if not isinstance(code, CodeType):
            code = compile(source, filename, mode, dont_inherit=True)
            _keep(key, code)
        _used.add(key)
        return code
    return compile(source, filename, mode, flags, True, optimize, **kwargs)


#: each module that generates code, and the cached `compile` its namespace gets
_GENERATORS = {SQLALCHEMY_GENERATOR: _sqlalchemy_compile, JINJA2_GENERATOR: _jinja2_compile}


class _Generators:
    """A finder of `sys.meta_path` (`importlib.abc.MetaPathFinder`'s one method; that module
    costs a start ≈ 7 ms of imports): finds a module of `_GENERATORS` as Python would and,
    before its code runs, gives its namespace the cached `compile` (a module's globals come
    before builtins)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        cached_compile = _GENERATORS.get(fullname)
        if cached_compile is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: Any) -> None:
            module.compile = cached_compile
            run(module)

        loader.exec_module = exec_module  # type: ignore[method-assign] # this spec's own loader
        return spec


_re_compile = getattr(getattr(re, "_compiler", None), "compile", None)


def _re_engine_code(pattern: str, flags: int) -> tuple[int, list[int], int, dict[str, int], tuple[Any, ...]]:
    """What `re._compiler.compile` hands the engine for `pattern` (its own steps, Python 3.11+)."""
    compiler = re._compiler  # type: ignore[attr-defined]
    parsed = compiler._parser.parse(pattern, flags)
    code = [int(op) for op in compiler._code(parsed, flags)]  # its opcodes are int subclasses
    groupindex = parsed.state.groupdict
    indexgroup: list[str | None] = [None] * parsed.state.groups
    for name, index in groupindex.items():
        indexgroup[index] = name
    return int(flags | parsed.state.flags), code, parsed.state.groups - 1, dict(groupindex), tuple(indexgroup)


def _re_compile_cached(pattern: Any, flags: int = 0) -> Any:
    """`re._compiler.compile` with the parse and code generation of a known pattern cached."""
    if type(pattern) is not str or flags & re.DEBUG:
        return _re_compile(pattern, flags)  # type: ignore[misc]
    key = f"re\0{int(flags)}\0{pattern}"
    entry = _cached(key)
    if not (isinstance(entry, tuple) and len(entry) == 5):
        entry = _re_engine_code(pattern, flags)
        _keep(key, entry)
    _used.add(key)
    final_flags, code, groups, groupindex, indexgroup = entry
    return _sre.compile(pattern, final_flags, code, groups, dict(groupindex), indexgroup)


def install() -> None:
    """Route the standard library's compiles of generated code through the cache (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    path = cache_path()
    if path is not None:
        _stored.update(_load(path))
    # each shadows the builtin in that one module (a module's globals come before builtins)
    dataclasses.exec = _exec  # type: ignore[attr-defined]
    collections.eval = _eval  # type: ignore[attr-defined]
    typing.compile = _compile  # type: ignore[attr-defined]
    compiler = getattr(re, "_compiler", None)
    if _re_compile is not None and all(hasattr(compiler, n) for n in ("_parser", "_code")):
        compiler.compile = _re_compile_cached  # type: ignore[union-attr]
    for name, cached_compile in _GENERATORS.items():
        if name in sys.modules:  # imported before: its later compiles still go through the cache
            sys.modules[name].compile = cached_compile  # type: ignore[attr-defined]
    sys.meta_path.insert(0, _Generators())
    check_memo.install(passed, remember)
    atexit.register(save)


def save(*, force: bool = False) -> str | None:
    """Write what was compiled since the last save (`MIN_NEW` or more), if the process writes
    bytecode (`force`: whatever was compiled, as `compileall` writes bytecode). The path
    written, or None."""
    global _new
    wanted = force or (_new >= MIN_NEW and not sys.dont_write_bytecode)
    path = cache_path() if wanted and (_new or force) else None
    if path is None:
        return None
    _new = 0
    try:
        entries = {**_stored, **{key: marshal.dumps(_values[key]) for key in _fresh}}
    except ValueError:  # something not marshallable: keep compiling, never fail the process
        return None
    _stored.update(entries)
    _fresh.clear()
    if len(entries) > MAX_ENTRIES:
        entries = {key: raw for key, raw in entries.items() if key in _used}
    try:
        data = _HEADER + marshal.dumps(entries)
    except ValueError:
        return None
    temp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temp, "wb") as file:
            file.write(data)
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        return None
    return path


#: what `python -m bot.compile_cache` imports: the modules of every entry point's way to work
PRIMED = ("bot.main", "bot.serve", "bot.worker", "adapters.console.oneshot", "core.render", "jinja2.sandbox",
          "jsonschema", "adapters.slack", "adapters.discord", "adapters.mcp", "adapters.web.app")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """`python -m bot.compile_cache [WORKFLOW_DIR…]`: fill the cache at install time (after
    `compileall`), as an install whose directories the service cannot write needs: what the
    entry points import, and the checks and templates of the workflows in the directories
    given (those of `BATON_WORKFLOW_DIRS`; a workflow added or changed later is checked by
    every start, as without the file)."""
    dirs = sys.argv[1:] if argv is None else argv
    install()
    for module in PRIMED:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    # and what every start does once imported: the CLI reads its commands' annotations (typer),
    # the replies' template environment compiles its lexer's patterns (jinja2)
    import typer.main

    from bot.main import app
    from core.render import environment

    typer.main.get_command(app)
    environment().lexer  # noqa: B018 - a property that compiles
    if dirs:
        from pathlib import Path

        from core.workflows.catalog import Catalog

        for entry in Catalog([Path(d) for d in dirs]).entries():  # checks remembered, templates compiled
            if entry.error is not None:
                print(f"not loaded: {entry.error}", file=sys.stderr)
    path = save(force=True)
    print(path or "no bytecode cache location: nothing written")


if __name__ == "__main__":
    from bot.compile_cache import main as _main  # this module as `bot` imports it, not __main__

    _main()
