"""YAML text -> plain Python data plus a map from every key/item path to its line.

PyYAML's composed node tree keeps line marks; constructing the data ourselves from that tree
lets every later error (pydantic's, the DAG checks', template compilation) point at the line
of the key it is about. Paths are tuples of mapping keys and list indexes, the same shape as
pydantic's error `loc`.

Lines are only needed when something is wrong, so the common case is built straight from
libyaml's event stream (`_fast`: no node tree, no marks kept; docs/workflows.md says what it
saves; a file of only one-line `key: value` entries is read by lines, `_lines`, cheaper still)
and the `SourceMap` is computed from the node tree the first time an error asks for a line. A file
the event path does not handle exactly like the node-tree path (anchors and aliases, merge
keys, explicit tags, duplicate keys, deep nesting, anything libyaml rejects) is built by the
node-tree path (`_slow`), which keeps the alias-expansion bound and every check.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.events import (
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

from core.errors import WorkflowDefinitionError

Path_ = tuple[str | int, ...]

_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"
_MAX_DEPTH = 64
_TOO_DEEP = "the file is nested too deeply"
_TOO_DEEP_HINT = f"Flatten the YAML to at most {_MAX_DEPTH} levels, or remove a recursive anchor/alias."
#: libyaml (the C parser) when available; its nodes carry the same line marks
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class ValuePosition:
    """Where a scalar value's text starts: its 1-based line and whether it is a block scalar."""

    line: int
    block: bool


class SourceMap:
    """1-based lines of keys (and list items) by path; positions of scalar values.
    With `compute`, both are worked out at the first look (an error needs a line)."""

    def __init__(
        self,
        lines: dict[Path_, int] | None = None,
        values: dict[Path_, ValuePosition] | None = None,
        *,
        compute: Callable[[], SourceMap] | None = None,
    ) -> None:
        self._lines = lines if lines is not None else {}
        self._values = values if values is not None else {}
        self._compute = compute
        #: (column, text) of each item of the top-level `nodes:` list, when the event path
        #: read the file: the same pair means the same item (`loader` re-uses its model)
        self.node_texts: list[tuple[int, str]] = []

    def _resolve(self) -> None:
        if self._compute is not None:
            computed, self._compute = self._compute(), None
            self._lines, self._values = computed.lines, computed.values

    @property
    def lines(self) -> dict[Path_, int]:
        self._resolve()
        return self._lines

    @property
    def values(self) -> dict[Path_, ValuePosition]:
        self._resolve()
        return self._values

    def line_of(self, path: Path_) -> int | None:
        """The line of `path`, or of its nearest ancestor that has one."""
        path = tuple(path)
        while True:
            if path in self.lines:
                return self.lines[path]
            if not path:
                return None
            path = path[:-1]

    def text_line(self, path: Path_, line_in_text: int) -> int | None:
        """File line of line `line_in_text` (1-based) inside the scalar at `path`."""
        pos = self.values.get(tuple(path))
        if pos is None:
            return self.line_of(path)
        return pos.line + (1 if pos.block else 0) + max(line_in_text, 1) - 1


@dataclass
class _Expansion:
    """Counts the nodes YAML aliases add: each use of an anchor copies its whole subtree."""

    limit: int
    seen: set[int] = field(default_factory=set)
    added: int = 0

    def visit(self, node: yaml.Node, file: str) -> None:
        if id(node) in self.seen:
            self.added += 1
            if self.added > self.limit:
                raise WorkflowDefinitionError(
                    f"YAML aliases expand to more than {self.limit:,} nodes",
                    file=file,
                    line=node.start_mark.line + 1,
                    hint="Use fewer or smaller anchors (`*alias`), or raise BATON_YAML_MAX_ALIAS_NODES.",
                )
        else:
            self.seen.add(id(node))


def parse_yaml(text: str, *, file: str, max_alias_nodes: int = 10_000) -> tuple[Any, SourceMap]:
    """Parse one YAML document; syntax errors become `WorkflowDefinitionError` with the line.
    Aliases may add at most `max_alias_nodes` nodes (a "billion laughs" file is refused)."""
    spans: list[tuple[int, str]] = []
    data = _fast(text, spans)
    if data is _SLOW:
        return _slow(text, file, max_alias_nodes)

    def lines() -> SourceMap:
        try:
            return _slow(text, file, max_alias_nodes)[1]
        except WorkflowDefinitionError:  # cannot happen for text `_fast` took; no lines then
            return SourceMap()

    source = SourceMap(compute=lines)
    source.node_texts = spans
    return data, source


def _slow(text: str, file: str, max_alias_nodes: int) -> tuple[Any, SourceMap]:
    """The node-tree path: data and every line, with the alias bound and all checks."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        source = SourceMap()
        if node is not None:
            source.lines[()] = node.start_mark.line + 1
        expansion = _Expansion(max_alias_nodes)
        data = _build(loader, node, (), source, file, 0, expansion) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        if "maximum nesting depth" in str(exc.problem):  # libyaml's own limit (1000 levels)
            raise WorkflowDefinitionError(_TOO_DEEP, file=file, line=line or 1, hint=_TOO_DEEP_HINT) from exc
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        opened = exc.context_mark
        if opened is not None and mark is not None and opened.line != mark.line:
            problem += f" (opened at line {opened.line + 1})"
        hint = "Fix the YAML at that line: check indentation (spaces, not tabs), colons and quotes."
        lines = text.splitlines()
        if line is not None and 0 < line <= len(lines) and "\t" in lines[line - 1]:
            hint = f"Replace the tab characters on line {line} with spaces."
        raise WorkflowDefinitionError(
            f"YAML syntax error: {problem}", file=file, line=line, hint=hint
        ) from exc
    except yaml.YAMLError as exc:
        raise WorkflowDefinitionError(
            f"YAML error: {exc}", file=file, hint="Fix the YAML so it parses."
        ) from exc
    except WorkflowDefinitionError:
        raise
    except RecursionError as exc:  # the pure-Python parser recurses once per nesting level
        raise WorkflowDefinitionError(_TOO_DEEP, file=file, line=1, hint=_TOO_DEEP_HINT) from exc
    except Exception as exc:  # a parser bug must not take the bot down; report it per file
        raise WorkflowDefinitionError(
            f"the YAML parser failed ({type(exc).__name__}: {exc})",
            file=file,
            line=1,
            hint="Simplify the file until it parses, and report the parser failure.",
        ) from exc
    finally:
        loader.dispose()
    return data, source


def _build(
    loader: yaml.SafeLoader,
    node: yaml.Node,
    path: Path_,
    source: SourceMap,
    file: str,
    depth: int,
    expansion: _Expansion,
) -> Any:
    expansion.visit(node, file)
    if depth > _MAX_DEPTH:
        line = node.start_mark.line + 1
        raise WorkflowDefinitionError(_TOO_DEEP, file=file, line=line, hint=_TOO_DEEP_HINT)
    if isinstance(node, yaml.MappingNode) and node.tag == _MAP:
        _check_duplicate_keys(node, file)
        loader.flatten_mapping(node)  # resolves `<<: *anchor` merges in place
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _build(loader, key_node, path, source, file, depth + 1, expansion)
            if isinstance(key, list | dict):
                raise WorkflowDefinitionError(
                    "a mapping key must be a plain value",
                    file=file,
                    line=key_node.start_mark.line + 1,
                    hint="Use a plain word as the key.",
                )
            child = (*path, key)
            source.lines.setdefault(child, key_node.start_mark.line + 1)
            result[key] = _build(loader, value_node, child, source, file, depth + 1, expansion)
        return result
    if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
        items = []
        for index, item in enumerate(node.value):
            child = (*path, index)
            source.lines.setdefault(child, item.start_mark.line + 1)
            items.append(_build(loader, item, child, source, file, depth + 1, expansion))
        return items
    if isinstance(node, yaml.ScalarNode):
        source.values.setdefault(path, ValuePosition(node.start_mark.line + 1, node.style in ("|", ">")))
        if node.tag == _TIMESTAMP:
            return node.value  # keep dates as the text the author wrote
    return loader.construct_object(node, deep=True)


def _check_duplicate_keys(node: yaml.MappingNode, file: str) -> None:
    seen: dict[tuple[str, str], int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE:
            continue
        marker = (key_node.tag, key_node.value)
        line = key_node.start_mark.line + 1
        if marker in seen:
            raise WorkflowDefinitionError(
                f"duplicate key `{key_node.value}` (first at line {seen[marker]})",
                file=file,
                line=line,
                hint="Keep one of the two; YAML would silently use only the last.",
            )
        seen[marker] = line


# -- the event path ---------------------------------------------------------------------------

_SLOW: Any = object()  # `_fast` cannot build this text exactly: use the node-tree path
_STR = "tag:yaml.org,2002:str"
#: the first characters for which YAML 1.1 resolves a plain scalar to something else than str
_RESOLVED_FIRST = frozenset(yaml.resolver.Resolver.yaml_implicit_resolvers)
_resolver = yaml.resolver.Resolver()
_constructor = yaml.constructor.SafeConstructor()
_PLAIN_TAGS = {
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
}


class _Unusual(Exception):
    """Raised inside `_fast` for anything the node-tree path must handle."""


def _fast(text: str, spans: list[tuple[int, str]] | None = None) -> Any:
    """The data of a plain one-document file, or `_SLOW`: by lines (`_lines`) when every line
    is of the few shapes it reads, else from libyaml's events (`_events`). With `spans`, the
    text of each item of the top-level `nodes:` list is appended to it (`node_texts`)."""
    data = _lines(text, spans)
    return _events(text, spans) if data is _SLOW else data


def _events(text: str, spans: list[tuple[int, str]] | None = None) -> Any:
    """`_fast` from libyaml's events."""
    parser = _Loader(text)
    try:
        get = parser.get_event
        get()  # StreamStartEvent
        event = get()
        if type(event) is StreamEndEvent:
            return None
        if type(event) is not DocumentStartEvent:
            return _SLOW
        event = get()
        memo: dict[str, Any] = {}
        if type(event) is MappingStartEvent and spans is not None and event.anchor is None:
            data = _root(get, event, text, memo, spans)
        else:
            data = _value(get, event, 0, memo)
        if type(get()) is not DocumentEndEvent or type(get()) is not StreamEndEvent:
            return _SLOW  # more than one document: the node-tree path says so with the line
        return data
    except (_Unusual, yaml.YAMLError, RecursionError):
        return _SLOW
    finally:
        parser.dispose()


def _root(
    get: Callable[[], Any], event: Any, text: str, memo: dict[str, Any], spans: list[tuple[int, str]]
) -> Any:
    """The top-level mapping, noting where each item of `nodes:` starts and ends."""
    if event.tag is not None:
        raise _Unusual
    result: dict[Any, Any] = {}
    while True:
        key_event = get()
        if type(key_event) is MappingEndEvent:
            return result
        if type(key_event) is not ScalarEvent or key_event.anchor is not None:
            raise _Unusual
        key = _scalar(key_event, memo)
        if key in result or key_event.value == "<<":
            raise _Unusual
        value_event = get()
        if key != "nodes" or type(value_event) is not SequenceStartEvent or value_event.anchor is not None:
            result[key] = _value(get, value_event, 1, memo)
            continue
        if value_event.tag is not None:
            raise _Unusual
        items = []
        starts: list[tuple[int, int]] = []
        while True:
            item = get()
            mark = item.start_mark
            starts.append((mark.column, mark.index))
            if type(item) is SequenceEndEvent:
                break
            items.append(_value(get, item, 2, memo))
        spans[:] = [(col, text[at:end]) for (col, at), (_, end) in itertools.pairwise(starts)]
        result[key] = items


def _value(get: Callable[[], Any], event: Any, depth: int, memo: dict[str, Any]) -> Any:
    kind = type(event)
    if kind is ScalarEvent:
        return _scalar(event, memo)
    if event.anchor is not None or event.tag is not None or depth >= _MAX_DEPTH:
        raise _Unusual  # anchors and aliases (their expansion is counted), tags, deep nesting
    if kind is MappingStartEvent:
        result: dict[Any, Any] = {}
        while True:
            key_event = get()
            if type(key_event) is not ScalarEvent:
                if type(key_event) is MappingEndEvent:
                    return result
                raise _Unusual  # a container as a key, or an aliased key
            key = _scalar(key_event, memo)
            if key in result or key == "<<":
                raise _Unusual  # a duplicate (reported with lines) or a merge key
            item = get()
            result[key] = (
                _scalar(item, memo) if type(item) is ScalarEvent else _value(get, item, depth + 1, memo)
            )
    if kind is SequenceStartEvent:
        items = []
        while True:
            item = get()
            if type(item) is ScalarEvent:
                items.append(_scalar(item, memo))
            elif type(item) is SequenceEndEvent:
                return items
            else:
                items.append(_value(get, item, depth + 1, memo))
    raise _Unusual  # an alias


def _scalar(event: Any, memo: dict[str, Any]) -> Any:
    value: str = event.value
    if event.anchor is not None or event.tag is not None:
        raise _Unusual
    if not event.implicit[0] or value[:1] not in _RESOLVED_FIRST:
        return value  # quoted, block, or plain text no implicit type can match
    return memo[value] if value in memo else _resolve(value, memo)


def _resolve(value: str, memo: dict[str, Any]) -> Any:
    tag = _resolver.resolve(yaml.ScalarNode, value, (True, False))
    if tag in (_STR, _TIMESTAMP):
        result: Any = value  # dates stay the text the author wrote
    elif tag in _PLAIN_TAGS:
        result = _constructor.yaml_constructors[tag](_constructor, yaml.ScalarNode(tag, value))
    else:
        raise _Unusual  # `<<`, `=`: the node-tree path decides
    memo[value] = result
    return result


# -- the line path ----------------------------------------------------------------------------
#
# A big definition is most often generated: top-level `key: value` lines and a `nodes:` list of
# one-line `key: value` entries. libyaml makes a Python object (and two marks) of each of its
# events, which was three quarters of reading such a file; this path reads it line by line
# instead. It takes only lines of the shapes below, whose every scalar is plain, of characters
# with no YAML meaning (no quote, brace, bracket, `#`, `:`, `&`, `*`, `!`, `|`, `>`, `%`,
# `@`, tab, or an indicator first); anything else (a comment, a blank line, a quoted or
# multi-line scalar, a nested block, other indentation) leaves the whole file to `_events`.
# Scalars are resolved by `_plain`, as `_scalar` resolves the events' plain scalars, and
# `test_definition_cache` checks both paths build the same data and item texts.

_WORD = r"[A-Za-z0-9_][A-Za-z0-9_./+=-]*"  # a plain scalar in a flow collection, or a key
_TEXT = rf"{_WORD}(?: [A-Za-z0-9_./+=-]+)*"  # in a block: words between single spaces
_VALUE = (
    rf"{_TEXT}"
    rf"|\[(?:{_WORD}(?:, {_WORD})*)?\]"
    rf"|\{{(?:{_WORD}: {_WORD}(?:, {_WORD}: {_WORD})*)?\}}"
)
#: `<indent>[- ]key: value` or `<indent>[- ]key:` (a top-level key whose list follows)
_LINE = re.compile(rf"( *)(- )?([A-Za-z_][A-Za-z0-9_]*):(?: ({_VALUE}))?")


_FLOW_OR_RESOLVED = _RESOLVED_FIRST | {"[", "{"}  # a value `_inline` must read: else it is text


def _plain(value: str, memo: dict[str, Any]) -> Any:
    """A plain scalar's value, as `_scalar` gives it for an event."""
    if value[:1] not in _RESOLVED_FIRST:
        return value
    return memo[value] if value in memo else _resolve(value, memo)


def _inline(value: str, memo: dict[str, Any]) -> Any:
    """A value of `_VALUE`: a plain scalar, `[a, b]` or `{k: v, …}` of plain scalars."""
    first = value[0]
    if first == "[":
        return [_plain(w, memo) for w in value[1:-1].split(", ")] if len(value) > 2 else []
    if first != "{":
        return _plain(value, memo)
    result: dict[Any, Any] = {}
    for pair in value[1:-1].split(", ") if len(value) > 2 else ():
        key, _, item = pair.partition(": ")
        name = _plain(key, memo)
        if name in result:
            raise _Unusual  # a duplicate key: the node-tree path reports it with its line
        result[name] = _plain(item, memo)
    return result


def _lines(text: str, spans: list[tuple[int, str]] | None) -> Any:
    """`_fast` for a file of `_LINE`s only: top-level keys, each with a value or a block list
    of one-line mappings (`nodes:`); `_SLOW` for any other file."""
    if not text.endswith("\n"):
        return _SLOW
    lines = text.split("\n")
    lines.pop()
    memo: dict[str, Any] = {}
    match = _LINE.fullmatch
    result: dict[Any, Any] = {}
    texts: list[tuple[int, str]] = []  # `spans`, set once the whole file is read
    at, pos, count = 0, 0, len(lines)
    try:
        while at < count:
            line = match(lines[at])
            if line is None or line.group(1) or line.group(2):
                return _SLOW  # not a top-level key
            key = _plain(line.group(3), memo)
            if key in result:
                return _SLOW
            value = line.group(4)
            pos += len(lines[at]) + 1
            at += 1
            if value is not None:
                if key == "nodes":
                    return _SLOW  # an inline list: its items' texts are the events'
                result[key] = _inline(value, memo)
                continue
            items: list[dict[Any, Any]] = []
            starts: list[tuple[int, int]] = []
            indent = -1
            while at < count:
                text_line = lines[at]
                line = match(text_line)
                if line is None:
                    return _SLOW
                lead, dash, name, value = line.groups()
                width = len(lead)
                if not width and not dash and indent >= 0:
                    break  # the next top-level key
                if value is None:
                    return _SLOW  # a nested block
                if dash:
                    if indent < 0:
                        indent = width
                    elif width != indent:
                        return _SLOW
                    item: dict[Any, Any] = {}
                    items.append(item)
                    starts.append((width + 2, pos + width + 2))
                elif width != indent + 2 or indent < 0:
                    return _SLOW
                if name[:1] in _RESOLVED_FIRST:
                    name = _plain(name, memo)
                if name in item:
                    return _SLOW
                item[name] = _inline(value, memo) if value[:1] in _FLOW_OR_RESOLVED else value
                pos += len(text_line) + 1
                at += 1
            if not items:
                return _SLOW  # `key:` with nothing under it
            if key == "nodes":
                ends = [start for _, start in starts[1:]] + [pos]
                texts = [(col, text[start:end]) for (col, start), end in zip(starts, ends, strict=True)]
            result[key] = items
    except _Unusual:
        return _SLOW
    if spans is not None:
        spans[:] = texts
    return result
