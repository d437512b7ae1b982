"""YAML text -> plain Python data plus a map from every key/item path to its line.

PyYAML's composed node tree keeps line marks; constructing the data ourselves from that tree
lets every later error (pydantic's, the DAG checks', template compilation) point at the line
of the key it is about. Paths are tuples of mapping keys and list indexes, the same shape as
pydantic's error `loc`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from core.errors import WorkflowDefinitionError

Path_ = tuple[str | int, ...]

_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"
_MAX_DEPTH = 64
_TOO_DEEP = "the file is nested too deeply"
_TOO_DEEP_HINT = f"Flatten the YAML to at most {_MAX_DEPTH} levels, or remove a recursive anchor/alias."
#: libyaml when available (about 10x faster); its nodes carry the same line marks
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class ValuePosition:
    """Where a scalar value's text starts: its 1-based line and whether it is a block scalar."""

    line: int
    block: bool


@dataclass
class SourceMap:
    """1-based lines of keys (and list items) by path; positions of scalar values."""

    lines: dict[Path_, int] = field(default_factory=dict)
    values: dict[Path_, ValuePosition] = field(default_factory=dict)

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
