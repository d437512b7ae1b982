"""What a tool *is*, for the cache keys of the steps that call it.

    source_facts(fn) -> SourceFacts(digest, stamps)
        digest   sha256 over the module that defines `fn` and every module it imports from
                 that module's directory (transitively), each as its normalized AST
        stamps   (path, mtime_ns, size, digest) of those files, to notice later that one changed

A tool's identity (`ToolSpec.identity`) is `version:<v>` when its `@tool(version=...)` says
so (the author decides when results change, and answers for it), else `source:<digest>`,
else, for a function without a source file (built by `exec`), `code:<digest of its code>`.

**Normalized AST.** A module counts as `ast.dump(ast.parse(source))`: comments, blank lines,
indentation, line breaks inside brackets, quoting style and line numbers do not change an
identity, so reformatting `tools.py` keeps its callers' results. Docstrings *do* count: a
program can read them (`fn.__doc__`), and a cache must never serve a result the current code
would not produce. A file that does not parse counts by its raw bytes.

**Imports** are resolved statically, wherever they are written (also inside functions, which
import when first called): `import a.b`, `from a import b`, `from . import b`, `from .a import
b`, against the defining module's directory and, for a module of a package, the package's
root. Only files inside the defining module's directory (and its subdirectories) count: the
standard library and installed packages belong to the environment, not to the tool.

Each file is read and parsed once per change: digests are cached by (path, mtime_ns, size).
A file modified in the last two seconds is read again every time (file systems stamp
modifications with a coarse clock, so a quick second edit of the same size could otherwise
keep its stamp), as git does with "racily clean" entries.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import marshal
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.canonical import ENCODER
from core.workflows.limits import RACY_NS

Stamp = tuple[str, int, int, str]  # (resolved path, mtime_ns, size, normalized digest)


@dataclass(frozen=True, slots=True)
class SourceFacts:
    digest: str
    stamps: tuple[Stamp, ...]  # the files the digest covers, sorted by path


@dataclass(frozen=True, slots=True)
class _Parsed:
    mtime_ns: int
    size: int
    digest: str
    imports: tuple[tuple[int, str, tuple[str, ...]], ...]  # (level, module, names)


_parsed: dict[Path, _Parsed] = {}


def _read(path: Path) -> _Parsed:
    """The file's normalized digest and its import statements; cached by (path, mtime, size)."""
    stat = path.stat()
    known = _parsed.get(path)
    if known is not None and (known.mtime_ns, known.size) == (stat.st_mtime_ns, stat.st_size):
        return known
    data = path.read_bytes()
    try:
        tree = ast.parse(data, filename=str(path))
    except (SyntaxError, ValueError):
        parsed = _Parsed(stat.st_mtime_ns, stat.st_size, "raw:" + hashlib.sha256(data).hexdigest(), ())
    else:
        digest = hashlib.sha256(ast.dump(tree).encode()).hexdigest()
        parsed = _Parsed(stat.st_mtime_ns, stat.st_size, digest, tuple(_imports(tree)))
    if time.time_ns() - stat.st_mtime_ns > RACY_NS:
        _parsed[path] = parsed
    return parsed


def _imports(tree: ast.AST) -> Iterable[tuple[int, str, tuple[str, ...]]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield 0, alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            yield node.level, node.module or "", tuple(a.name for a in node.names if a.name != "*")


def _module_files(base: Path, dotted: str) -> list[Path]:
    """Files that `import <dotted>` may execute below `base`: each package's `__init__.py`
    along the way and the module itself (`""`: the package at `base`, for `from . import x`)."""
    parts = [p for p in dotted.split(".") if p]
    if not parts:
        return [base / "__init__.py"] if (base / "__init__.py").is_file() else []
    found: list[Path] = []
    here = base
    for i, part in enumerate(parts):
        here = here / part
        package = here / "__init__.py"
        if package.is_file():
            found.append(package)
        elif i == len(parts) - 1 and here.with_suffix(".py").is_file():
            found.append(here.with_suffix(".py"))
    return found


def _resolve(
    path: Path, imports: Iterable[tuple[int, str, tuple[str, ...]]], roots: tuple[Path, ...]
) -> list[Path]:
    """The files these import statements of `path` refer to, below any of `roots`."""
    found: list[Path] = []
    for level, module, names in imports:
        if level:
            base = path.parent
            for _ in range(level - 1):
                base = base.parent
            bases: tuple[Path, ...] = (base,)
        else:
            bases = roots
        for base in bases:
            found += _module_files(base, module)
            for name in names:  # `from a import b` may name a submodule `a/b.py`
                found += _module_files(base, f"{module}.{name}" if module else name)
    return found


def _package_root(fn: Callable[..., Any], path: Path) -> Path:
    """The directory absolute imports of `fn`'s module start from (its package's root)."""
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    spec = getattr(module, "__spec__", None)
    package = getattr(spec, "parent", "") or ""
    root = path.parent
    for _ in package.split(".") if package else ():
        root = root.parent
    return root


def source_facts(fn: Callable[..., Any]) -> SourceFacts | None:
    """The digest of `fn`'s module and its same-directory imports; None without a source file."""
    try:
        filename = inspect.getsourcefile(inspect.unwrap(fn))
    except TypeError:
        return None
    if filename is None:
        return None
    origin = Path(filename).resolve()
    if not origin.is_file():
        return None
    home = origin.parent
    roots = tuple(dict.fromkeys((home, _package_root(fn, origin))))
    digests: dict[Path, _Parsed] = {}
    todo = [origin]
    while todo:
        path = todo.pop()
        if path in digests:
            continue
        parsed = digests[path] = _read(path)
        for found in _resolve(path, parsed.imports, roots):
            resolved = found.resolve()
            if resolved not in digests and resolved.is_relative_to(home):
                todo.append(resolved)
    ordered = sorted(digests)
    summary = {str(p.relative_to(home)): digests[p].digest for p in ordered}
    return SourceFacts(
        digest=hashlib.sha256(ENCODER.encode(summary).encode("utf-8")).hexdigest(),  # canonical_json's bytes
        stamps=tuple((str(p), digests[p].mtime_ns, digests[p].size, digests[p].digest) for p in ordered),
    )


def code_digest(fn: Callable[..., Any]) -> str:
    """A function without a source file: its code object (bytecode, constants, names)."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:  # a builtin or a callable object: its qualified name is all there is
        return hashlib.sha256(f"{fn.__module__}.{getattr(fn, '__qualname__', fn)}".encode()).hexdigest()
    return hashlib.sha256(marshal.dumps(code)).hexdigest()


def identity_of(fn: Callable[..., Any], version: str | None, facts: SourceFacts | None) -> str:
    if version is not None:
        return f"version:{version}"
    if facts is not None:
        return f"source:{facts.digest}"
    return f"code:{code_digest(fn)}"


def stamp(path: Path) -> Stamp:
    """`path` as a stamp, as the files of a source identity are (`changed` tells when it moves)."""
    resolved = path.resolve()
    parsed = _read(resolved)
    return (str(resolved), parsed.mtime_ns, parsed.size, parsed.digest)


def changed(stamps: Iterable[Stamp]) -> list[str]:
    """The paths among `stamps` whose file is gone, has another mtime or size now, or, while
    its modification is recent enough to hide a second edit, another digest."""
    moved: list[str] = []
    for path, mtime_ns, size, digest in stamps:
        try:
            stat = os.stat(path)  # once per step on a worker: no `Path` built for it
        except OSError:
            moved.append(path)
            continue
        stamped = (stat.st_mtime_ns, stat.st_size) == (mtime_ns, size)
        racy = time.time_ns() - stat.st_mtime_ns <= RACY_NS
        if not stamped or (racy and _read(Path(path)).digest != digest):
            moved.append(path)
    return moved
