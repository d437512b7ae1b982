"""Loading definitions fast without changing what they mean.

- the catalog parses a file once per change of content, whatever the stat says;
- an edited file re-validates and re-prepares only the nodes whose text changed, and the
  re-used ones are exactly the ones that did not change (type-strict: `1` is not `true`);
- the YAML event path builds the same data as the node-tree path, and hands every unusual
  file (anchors, merge keys, tags, duplicates) to it; the line path builds the same data and
  item texts as the event path, and hands it every file of other shapes;
- literal templates and `{{ name.attr }}` placeholders are read without jinja2, with the
  same references as the AST gives.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.engine.prepared import prepare
from core.engine.tools import ToolRegistry
from core.errors import UnknownWorkflow, WorkflowDefinitionError
from core.workflows import templating, yaml_source
from core.workflows.bash_template import _analysed, bash_plan
from core.workflows.catalog import Catalog
from core.workflows.loader import load_workflow_text

OLD_S = 3600  # dated an hour back: outside the catalog's racy-write window


def _chain(n: int, *, last: str = "tool: noop", name: str = "w") -> str:
    lines = [f"name: {name}", "nodes:"]
    for i in range(n):
        lines.append(f"  - id: s{i}")
        if i:
            lines.append(f"    depends_on: [s{i - 1}]")
        lines.append(f"    {last if i == n - 1 else 'tool: noop'}")
    return "\n".join(lines) + "\n"


def _settled(path: Path, text: str, *, mtime_ns: int | None = None) -> int:
    """Write `text` in place and date the file back; returns the mtime it got."""
    path.write_text(text, encoding="utf-8")
    when = mtime_ns if mtime_ns is not None else time.time_ns() - OLD_S * 1_000_000_000
    os.utime(path, ns=(when, when))
    return when


def _tools() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool("noop", replay="pure", inline=True)
    def noop(v: object = None) -> str:
        return "ok"

    return registry


# -- the catalog's cache ------------------------------------------------------------------


def test_an_unchanged_file_is_parsed_once_however_often_it_is_reloaded(tmp_path: Path) -> None:
    _settled(tmp_path / "w.yaml", _chain(50))
    catalog = Catalog([tmp_path])
    first = catalog.get("w")
    assert catalog.parses == 1
    for _ in range(20):
        catalog.reload()
    assert catalog.parses == 1 and catalog.get("w") is first


def test_a_racy_file_is_re_read_but_not_parsed_again_while_its_content_is_the_same(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text(_chain(5), encoding="utf-8")  # just written: racy
    catalog = Catalog([tmp_path])
    first = catalog.get("w")
    for _ in range(5):
        catalog.reload()
    assert catalog.parses == 1 and catalog.get("w") is first


def test_same_size_and_mtime_but_other_content_is_seen_after_the_racy_window(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    mtime = _settled(path, _chain(3, last="with: {v: 1}\n    tool: noop"))
    catalog = Catalog([tmp_path])
    assert catalog.get("w").nodes[-1].with_ == {"v": 1}
    before = path.stat()
    _settled(path, _chain(3, last="with: {v: 2}\n    tool: noop"), mtime_ns=mtime)  # utime back
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )
    catalog.reload()
    assert catalog.get("w").nodes[-1].with_ == {"v": 2}
    assert catalog.parses == 2


def test_a_deleted_file_disappears_and_a_new_one_appears(tmp_path: Path) -> None:
    _settled(tmp_path / "w.yaml", _chain(2))
    catalog = Catalog([tmp_path])
    (tmp_path / "w.yaml").unlink()
    _settled(tmp_path / "v.yaml", _chain(2, name="v"))
    catalog.reload()
    assert catalog.names() == ["v"]
    with pytest.raises(UnknownWorkflow):
        catalog.get("w")


# -- incremental re-validation --------------------------------------------------------------


def test_an_edit_re_uses_the_untouched_nodes_and_re_prepares_only_the_edited_one(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    _settled(path, _chain(20, last="with: {v: 1}\n    tool: noop"))
    catalog, tools = Catalog([tmp_path]), _tools()
    old = catalog.get("w")
    old_prepared = prepare(old, tools)
    _settled(path, _chain(20, last="with: {v: true}\n    tool: noop"))  # 1 == True in Python
    catalog.reload()
    new = catalog.get("w")
    assert new is not old and new.nodes[-1].with_ == {"v": True}
    assert isinstance(new.nodes[-1].with_["v"], bool)
    assert all(a is b for a, b in zip(old.nodes[:-1], new.nodes[:-1], strict=True))
    assert new.nodes[-1] is not old.nodes[-1]
    new_prepared = prepare(new, tools)
    assert all(new_prepared.nodes[f"s{i}"] is old_prepared.nodes[f"s{i}"] for i in range(19))
    assert new_prepared.nodes["s19"].static_definition != old_prepared.nodes["s19"].static_definition
    assert new_prepared.nodes["s19"].node is new.nodes[-1]


def test_a_workflow_level_edit_re_prepares_every_node(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    _settled(path, _chain(5))
    catalog, tools = Catalog([tmp_path]), _tools()
    old_prepared = prepare(catalog.get("w"), tools)
    _settled(path, "defaults: {timeout: 5}\n" + _chain(5))
    catalog.reload()
    new_prepared = prepare(catalog.get("w"), tools)
    assert all(new_prepared.nodes[n] is not old_prepared.nodes[n] for n in new_prepared.nodes)
    assert {pn.timeout for pn in new_prepared.nodes.values()} == {5.0}


def test_a_re_indented_node_is_validated_again(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    _settled(path, "name: w\nnodes:\n  - id: a\n    bash: echo 1\n")
    catalog = Catalog([tmp_path])
    old = catalog.get("w")
    _settled(path, "name: w\nnodes:\n- id: a\n  bash: echo 1\n")
    catalog.reload()
    assert catalog.get("w").nodes[0] == old.nodes[0] and catalog.get("w").nodes[0] is not old.nodes[0]


def test_an_edit_that_breaks_a_node_reports_its_line_and_the_fix_loads_again(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    _settled(path, _chain(4))
    catalog = Catalog([tmp_path])
    _settled(path, _chain(4, last="tool: noop\n    timeout: -1"))
    catalog.reload()
    with pytest.raises(WorkflowDefinitionError) as broken:
        catalog.get("w")
    assert broken.value.line == 14  # the `timeout:` line of the last node
    _settled(path, _chain(4))
    catalog.reload()
    assert [n.id for n in catalog.get("w").nodes] == ["s0", "s1", "s2", "s3"]


# -- the YAML event path ----------------------------------------------------------------------

SAME_DATA = [
    "a: 1\nb: 0x1f\nc: yes\nd: ~\ne: 2001-12-14\nf: 1.5e3\ng: .inf\nh: '1'\ni: [1, '2', no]\n",
    "k: -0\nl: 1_000\nm: 0o17\nn: 190:20:30\no: +12\np: .NaN\nq: NULL\nr: On\ns: ''\nt:\n",
    "text: |\n  line one\n  line two\nfolded: >\n  a\n  b\nkeep: |+\n  x\n\n",
    "nodes:\n  - {id: a, bash: 'echo \"{{ inputs.x }}\"'}\n  - id: b\n    with: {n: [1, {m: 2.5}]}\n",
    "1: int key\n2.5: float key\nfalse: bool key\n~: null key\n",
    "- a\n- [b, [c, [d]]]\n- {e: {f: {g: h}}}\n",
    "",
    "just text\n",
]


@pytest.mark.parametrize("text", SAME_DATA)
def test_the_event_path_builds_what_the_node_tree_path_builds(text: str) -> None:
    fast = yaml_source._events(text, [])
    assert fast is not yaml_source._SLOW
    slow = yaml_source._slow(text, "x.yaml", 10_000)[0]
    assert repr(fast) == repr(slow)


@pytest.mark.parametrize(
    "text",
    [
        "a: &x 1\nb: *x\n",  # anchors and aliases: the expansion bound is counted there
        "base: &b {x: 1}\nc:\n  <<: *b\n",  # merge keys
        "a: !!str 3\n",  # explicit tags
        "a: 1\na: 2\n",  # a duplicate key, reported with its line
        "1: a\n0x1: b\n",  # keys equal once constructed
        "- a\n---\n- b\n",  # two documents
        "a: [\n",  # a syntax error
        "? [a]\n: b\n",  # a container as a key
    ],
)
def test_unusual_files_go_to_the_node_tree_path(text: str) -> None:
    assert yaml_source._fast(text, []) is yaml_source._SLOW


LINE_FILES = [
    _chain(3),
    _chain(3, last="with: {v: 0}"),
    "name: w\nnodes:\n- id: a\n  tool: t\n- id: b\n  depends_on: [a]\n  tool: t\nenv: {A: b}\n",
    "a: 1\nb: 0x1f\nc: yes\ne: 2001-12-14\nf: 1.5e3\ni: [1, 2, no]\nk: 1_000\nq: NULL\nr: On\n",
    "on: x\nnull: y\nt: [a.b, c-d, x=1, 0o17, 1]\nu: {1: a, no: b}\nv: []\nw: {}\nx: Build it - now\n",
]


def _same_as_events(text: str) -> bool:
    """The line path took `text` (True) and built what the event path builds, or left it."""
    by_lines: list[tuple[int, str]] = []
    by_events: list[tuple[int, str]] = []
    data = yaml_source._lines(text, by_lines)
    if data is yaml_source._SLOW:
        return False
    assert repr(data) == repr(yaml_source._events(text, by_events))
    assert by_lines == by_events
    return True


@pytest.mark.parametrize("text", LINE_FILES)
def test_the_line_path_builds_what_the_event_path_builds(text: str) -> None:
    assert _same_as_events(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: 'quoted'\n", "a: b # note\n", "# note\na: b\n", "a: b\n\nc: d\n", "a: b\r\n", "a:\tb\n",
        "a:  b\n", "a: b \n", "a: -b\n", "a: ~\n", "a: =\n", "a: b: c\n", "a: [b,c]\n", "a: {b: [c]}\n",
        "a:\n", "a:\nb: c\n", "a:\n  - b\n", "a:\n  - b: c\n      d: e\n", "a:\n  - b:\n      c: d\n",
        "a:\n  - b: c\n - d: e\n", "  a: b\n", "a: b", "---\na: b\n", "a: b\na: c\n", "on: 1\nyes: 2\n",
        "nodes: []\n", "a:\n  - b: c\n    b: d\n", "a: {b: 1, b: 2}\n", "a: b\n...\n",
    ],
)
def test_files_of_other_shapes_are_left_to_the_event_path(text: str) -> None:
    assert yaml_source._lines(text, []) is yaml_source._SLOW


_TAKEN = [
    "a", "s1", "noop", "1", "0x1f", "1_000", "1.5e3", "2001-12-14", "yes", "No", "null", "NULL", "on", "Off",
    "true", "y", "n", "0o17", "190:20:30", "a/b", "a.b", "x=1", "1-2", "a b", "1e3", "0.", "_", "a b - c",
]  # fmt: skip
_OTHER = [".inf", "+1", "-a", "a  b", "a #b", "'q'", "~", "=", "<<", "a,b", "a: b", "é", "a\tb"]
_SCALARS = st.sampled_from(_TAKEN * 4 + _OTHER)
_KEYS = st.sampled_from(
    ["a", "b", "c", "d", "id", "nodes", "on", "yes", "null", "True", "_x", "tool", "depends_on", "e1"]
)


@st.composite
def _values(draw: st.DrawFn) -> str:
    scalars = st.lists(_SCALARS, max_size=3)
    kind = draw(st.sampled_from(["plain", "list", "map"]))
    if kind == "plain":
        return draw(_SCALARS)
    if kind == "list":
        return "[" + ", ".join(draw(scalars)) + "]"
    return "{" + ", ".join(f"{k}: {v}" for k, v in zip(draw(scalars), draw(scalars), strict=False)) + "}"


@st.composite
def _files(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        key = draw(_KEYS)
        if draw(st.booleans()):
            lines.append(f"{key}: {draw(_values())}")
            continue
        lines.append(f"{key}:")
        indent = draw(st.sampled_from([0, 2, 4]))
        for _ in range(draw(st.integers(0, 3))):
            for j in range(draw(st.integers(1, 3))):
                lead = " " * draw(st.sampled_from([indent] * 8 + [indent + 2, indent + 1]))
                lines.append(f"{lead}{'- ' if j == 0 else '  '}{draw(_KEYS)}: {draw(_values())}")
    end = draw(st.sampled_from(["\n"] * 8 + ["", "\n\n"]))
    return "\n".join(lines) + end


@settings(max_examples=1000, deadline=None)
@given(_files())
def test_what_the_line_path_takes_it_builds_as_the_event_path_does(text: str) -> None:
    _same_as_events(text)


def test_errors_in_a_file_read_by_the_event_path_still_name_their_line() -> None:
    text = "name: w\nnodes:\n  - id: a\n    bash: echo\n  - id: b\n    depends_on: [c]\n    bash: echo\n"
    with pytest.raises(WorkflowDefinitionError) as raised:
        load_workflow_text(text, file="w.yaml")
    assert raised.value.line == 6 and "unknown node `c`" in str(raised.value)


# -- templates without jinja2 ------------------------------------------------------------------

TEMPLATES = [
    "echo hello",
    "echo ${HOME} {not a placeholder} }}",
    "echo {{ inputs.message }}",
    "echo {{inputs.a}} {{ inputs.b.c }} {{ nodes.fetch.output }} {{ run.id }}",
    "echo {{ inputs }} and {{ nodes.x }}",
    "echo {{ nodes }}",
    "{{\n  inputs.x\n}}",
    "echo {{ inputs.x | upper }}",
    "echo {{{ inputs.x }}}",
    "{% if inputs.x %}{{ inputs.y }}{% endif %}",
    "echo {# note #} {{ inputs.z }}",
    "echo {{ inputs.items() }}",
    "echo {{ inputs['k'] }}",
    "echo {{ other.thing }}",
    "echo {{- inputs.x }}",
]


@pytest.mark.parametrize("source", TEMPLATES)
def test_simple_references_agree_with_the_template_ast(source: str) -> None:
    simple = templating.simple_references(source)
    templating.template_references.cache_clear()
    try:
        tree = templating.parse_template(source)
    except Exception:  # a template that does not compile must not be read as simple
        assert simple is None
        return
    assert tree is not None
    if simple is None:
        return  # the AST decides
    found: dict[str, set[str]] = {"inputs": set(), "nodes": set()}
    whole = {"inputs": False, "nodes": False}
    for name, key, called in templating._name_uses(tree):
        if name in found:
            if key is None or called:
                whole[name] = True
            else:
                found[name].add(key)
    assert simple.inputs == found["inputs"] and simple.nodes == found["nodes"]
    assert (simple.whole_inputs, simple.whole_nodes) == (whole["inputs"], whole["nodes"])
    from jinja2 import meta

    assert simple.names == meta.find_undeclared_variables(tree)
    assert templating.unknown_filters(source) == []


@pytest.mark.parametrize("source", ["true", "echo hello world", "echo 'a' \"b\" ${HOME} $(date) }} {x}"])
def test_a_literal_bash_command_has_the_plan_the_analysis_gives(source: str) -> None:
    assert bash_plan(source) == _analysed(source)[0]


@pytest.mark.parametrize("source", ["true", "echo a\n", "x\n\n", "ünï $HOME ${A} }} {x}", "a\tb", "a\r\nb"])
def test_a_literal_renders_to_what_jinja2_would_render(source: str) -> None:
    from core.workflows.bash_template import render_bash

    by_jinja = templating.run_template(templating.compile_template(source), source, {})
    assert templating.render_template(source, {}) == by_jinja
    assert render_bash(source, {}).text == by_jinja and render_bash(source, {}).variables == {}


@pytest.mark.parametrize(
    "node",
    [
        "tool: noop",
        "bash: echo 'ünï \\\"q\\\" \\\\ \\t'",
        "prompt: Summarise {{ inputs.message }}",
        "approval: Ship it?",
        "tool: noop\n    with: {v: 1}",
        "bash: echo\n    artifacts: [a.txt]",
        "bash: echo {}\n    output: {format: json}",
    ],
)
def test_the_written_out_definition_digest_is_the_canonical_one(node: str) -> None:
    from core.engine.cache_key import definition_digest, definition_of, digest_value

    workflow = load_workflow_text(f"name: w\nnodes:\n  - id: a\n    {node}\n", file="w.yaml")
    step = workflow.nodes[0]
    assert definition_digest(step, script_source=None, files={}) == digest_value(
        definition_of(step, script_source=None, files={})
    )


# -- what a load leaves for later ------------------------------------------------------------


def test_a_definition_digest_is_worked_out_when_first_asked_and_is_the_canonical_one(tmp_path: Path) -> None:
    from core.engine.cache_key import definition_of, digest_value

    (tmp_path / "step.py").write_text("print('hi')\n")
    text = _chain(3, last="with: {v: [1, 'two']}\n    tool: noop") + (
        "  - id: s3\n    script: step.py\n"
    )
    _settled(tmp_path / "w.yaml", text)
    prepared = prepare(Catalog([tmp_path]).get("w"), _tools())
    assert all(pn.digest_cache == [] for pn in prepared.nodes.values())  # preparing hashes nothing
    for pn in prepared.nodes.values():
        if pn.external:
            assert pn.static_definition is None  # read with its script at each execution
            continue
        canonical = digest_value(definition_of(pn.node, script_source=None, files={}))
        assert pn.static_definition == canonical
        assert pn.digest_cache == [canonical]  # kept for the next key
        assert pn.static_definition is pn.digest_cache[0]


def test_a_lazy_digest_still_follows_an_edit(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    _settled(path, _chain(4, last="with: {v: 1}\n    tool: noop"))
    catalog, tools = Catalog([tmp_path]), _tools()
    old = prepare(catalog.get("w"), tools)
    before = {n: pn.static_definition for n, pn in old.nodes.items()}  # asked before the edit
    _settled(path, _chain(4, last="with: {v: 2}\n    tool: noop"))
    catalog.reload()
    new = prepare(catalog.get("w"), tools)
    assert new.nodes["s3"].digest_cache == [] and new.nodes["s3"].static_definition != before["s3"]
    assert {n: new.nodes[n].static_definition for n in ("s0", "s1", "s2")} == {
        n: before[n] for n in ("s0", "s1", "s2")
    }
