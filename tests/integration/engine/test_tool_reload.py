"""A long-running engine (as under `baton run`) picks up an edited tool module: the next run
executes the code on disk and its keys say so; a module that no longer imports fails only
the runs that call tools."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.engine.tools import ToolRegistry
from core.errors import ConfigurationError
from core.store.records import RunStatus
from tests.integration.engine.harness import Harness, make_harness

# a registry of its own: `@tool` would register into the process-wide default registry
TOOLS = """\
from core.engine.tools import ToolRegistry

tool = ToolRegistry().tool


@tool(replay="pure", inline=True)
def produce(x: str) -> str:
    return "old-" + x
"""

TW = """\
name: tw
nodes:
  - id: p
    tool: produce
    with: {x: a}
  - id: c
    depends_on: [p]
    bash: echo got {{ nodes.p.output }}
    replay: pure
"""

PLAIN = "name: plain\nnodes:\n  - id: hello\n    bash: echo hi\n"


@pytest.fixture
def h(tmp_path: Path, sqlite_url: str) -> Iterator[Harness]:
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "tools.py").write_text(TOOLS)
    tools = ToolRegistry()
    tools.load(["workflows/tools.py"], tmp_path)
    harness = make_harness(tmp_path, sqlite_url, tools=tools)
    harness.write("tw.yaml", TW)
    harness.write("plain.yaml", PLAIN)
    yield harness
    harness.store.close()
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", "")).startswith(str(tmp_path)):
            del sys.modules[name]


async def test_an_edited_tool_takes_effect_without_a_restart(h: Harness) -> None:
    first = await h.run("tw")
    assert h.output(first.id, "c").strip() == "got old-a"

    h.write("tools.py", TOOLS.replace('"old-"', '"fixed-"'))
    plan = {n.node_id: (n.action, n.reason) for n in h.engine.plan(first.id).nodes}
    assert plan["p"] == ("runs", "tool `produce` changed")

    fixed = await h.run("tw", resume_from=first.id)

    assert fixed.status is RunStatus.COMPLETED
    assert h.output(fixed.id, "c").strip() == "got fixed-a"
    [entry] = h.entries(fixed.id, "p")
    assert entry.notes.reason == "tool `produce` changed"
    assert h.engine.tools is not h.tools  # a new registry, with the module imported again


async def test_a_broken_tool_module_fails_runs_that_call_tools_and_no_other(h: Harness) -> None:
    h.write("tools.py", TOOLS + "\ndef broken(:\n")

    with pytest.raises(ConfigurationError, match="failed to import: SyntaxError") as refused:
        await h.start("tw")
    assert "BATON_TOOL_MODULES" in (refused.value.hint or "")
    assert h.store.runs.recent_runs(limit=10) == []  # refused before any run exists

    plain = await h.run("plain")
    assert plain.status is RunStatus.COMPLETED

    h.write("tools.py", TOOLS.replace('"old-"', '"again-"'))
    again = await h.run("tw")
    assert h.output(again.id, "c").strip() == "got again-a"
