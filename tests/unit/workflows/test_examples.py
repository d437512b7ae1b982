"""The workflows that ship in workflows/: they load, cover every node kind, and run on a bare
machine (their bash and script steps are executed here for real; the engine's own tests run
them end to end)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from core.workflows.args import validate_inputs
from core.workflows.bash_template import render_bash
from core.workflows.catalog import Catalog
from core.workflows.loader import files_content, script_source
from core.workflows.model import NODE_KINDS, Workflow, is_script_path
from core.workflows.templating import render_template
from core.workflows.validation import topological_order
from tests.unit.workflows.conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "workflows"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog([EXAMPLES])


def test_every_example_loads(catalog: Catalog) -> None:
    assert [e.error for e in catalog.entries()] == [None] * len(catalog.entries())
    assert {"hello", "release-notes", "build-report", "deploy"} <= set(catalog.names())


def test_fixtures_load() -> None:
    fixtures = Catalog([FIXTURES])
    assert [e.error for e in fixtures.entries()] == [None] * 4


def test_examples_cover_every_kind_and_feature(catalog: Catalog) -> None:
    nodes = [n for name in catalog.names() for n in catalog.get(name).nodes]
    assert {n.kind for n in nodes} == set(NODE_KINDS)
    scripts = [n.script for n in nodes if n.script is not None]
    assert any(is_script_path(s) for s in scripts) and any(not is_script_path(s) for s in scripts)
    assert any(n.kind == "prompt" and n.output.format == "json" and n.output.schema_ for n in nodes)
    assert any(n.artifacts for n in nodes) and any(n.files for n in nodes)


@pytest.fixture(scope="module")
def tool_registry() -> Any:
    tools = pytest.importorskip("core.engine.tools")
    registry = tools.ToolRegistry()
    registry.load(["workflows/tools.py"], ROOT)
    return registry


def test_tools_module_registers_the_example_tools(catalog: Catalog, tool_registry: Any) -> None:
    used = {n.tool for name in catalog.names() for n in catalog.get(name).nodes if n.tool}
    assert used == {"post_release", "deploy_service"}
    for name in used:
        spec = tool_registry.get(name)
        assert spec.replay.value == "idempotent" and spec.accepts_key


def test_deploy_tool_is_idempotent_by_key(tool_registry: Any) -> None:
    deploy = tool_registry.get("deploy_service").fn
    first = deploy(service="api", version="1.2", idempotency_key="k1")
    assert first == deploy(service="api", version="1.2", idempotency_key="k1")
    assert first["deployment"] != deploy(service="api", idempotency_key="k2")["deployment"]


def _bash(workflow: Workflow, node_id: str, context: dict[str, Any], cwd: Path) -> str:
    command = render_bash(workflow.node(node_id).bash or "", context)
    env = {**os.environ, **command.variables}
    result = subprocess.run(
        ["bash", "-c", command.text], cwd=cwd, env=env, capture_output=True, text=True, timeout=10
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_hello_echoes_any_message_literally(catalog: Catalog, tmp_path: Path) -> None:
    workflow = catalog.get("hello")
    message = "ship it; $(rm -rf ~) 'now'"
    inputs = validate_inputs(workflow, {"message": message})
    out = _bash(workflow, "greet", {"inputs": inputs, "nodes": {}, "run": {"id": "r"}}, tmp_path)
    assert out == f"Hello from Baton: {message}\n"


def test_build_report_steps_run_and_meet_their_contract(catalog: Catalog, tmp_path: Path) -> None:
    workflow = catalog.get("build-report")
    assert topological_order(workflow) == ["build", "summarize", "announce"]
    inputs = validate_inputs(workflow, {"targets": "4"})
    env = {**os.environ, "BATON_ARTIFACTS_DIR": str(tmp_path / "artifacts")}
    env["BATON_WORKFLOW_DIR"] = str(EXAMPLES)  # as the engine exports it: where build_matrix.txt is
    outputs: dict[str, Any] = {}
    for node_id in ("build", "summarize"):
        nodes = {"build": {"output": json.loads(outputs["build"])}} if node_id == "summarize" else {}
        result = subprocess.run(
            [sys.executable, "-c", script_source(workflow, workflow.node(node_id))],
            input=json.dumps({"inputs": inputs, "nodes": nodes, "run": {"id": "r1"}}),
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=10,
        )
        assert result.returncode == 0, result.stderr
        outputs[node_id] = result.stdout.strip()
    build = json.loads(outputs["build"])
    jsonschema.validate(build, workflow.node("build").output.schema_ or {})
    assert build == {"project": "baton", "targets": 4, "passed": 3}
    assert (tmp_path / "artifacts" / "report.json").is_file()
    assert outputs["summarize"] == "baton: 3/4 targets passed"
    context = {
        "inputs": inputs,
        "nodes": {"build": {"output": build}, "summarize": {"output": outputs["summarize"]}},
    }
    assert _bash(workflow, "announce", context, tmp_path) == "baton: 3/4 targets passed (3 passed)\n"


def test_script_source_and_files_content_resolve_against_the_workflow_file(catalog: Catalog) -> None:
    workflow = catalog.get("build-report")
    build = workflow.node("build")
    assert script_source(workflow, build) == (EXAMPLES / "scripts" / "build_report.py").read_text()
    matrix = (EXAMPLES / "scripts" / "build_matrix.txt").read_bytes()
    assert files_content(workflow, build) == {"scripts/build_matrix.txt": hashlib.sha256(matrix).hexdigest()}
    inline = workflow.node("summarize")
    assert script_source(workflow, inline) == inline.script


def test_deploy_and_release_notes_render_their_gates(catalog: Catalog) -> None:
    deploy = catalog.get("deploy")
    inputs = validate_inputs(deploy, {"service": "api"})
    question = render_template(deploy.node("approve").body, {"inputs": inputs})
    assert question == "Deploy api latest to staging?"
    notes = catalog.get("release-notes")
    context = {"nodes": {"draft": {"output": {"title": "Baton 1.0", "body": "..."}}}}
    assert render_template(notes.node("review").body, context) == "Publish 'Baton 1.0'?"


def test_the_quorum_example_states_a_whole_policy_and_branches_on_it(catalog: Catalog) -> None:
    example = catalog.get("deploy-quorum")
    gate = example.node("review").approval
    assert gate is not None and gate.required == 2 and gate.requester_may_approve is False
    assert gate.humans_only  # no agent decides a production deploy
    assert gate.answers == ("approve", "hotfix", "reject") and set(gate.form) == {"replicas", "window"}
    assert example.node("review").approvers == ["group:sre"]
    assert example.node("ship").when and example.node("hotfix").when
