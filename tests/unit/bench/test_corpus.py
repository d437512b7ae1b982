"""The scorecard corpus is well-formed: enough scenarios, loadable workflows, sane truth sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.scorecard.corpus import BASE_ARGS, BASE_FILES, BASE_YAML, NODES, SCENARIOS, Scenario, edit
from core.workflows.loader import load_workflow_file


def _write(tmp_path: Path, s: Scenario) -> Path:
    for name, content in s.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content)
    path = tmp_path / "pipe.yaml"
    path.write_text(s.yaml.replace("@WF@", str(tmp_path)))
    return path


def test_at_least_twenty_scenarios_with_unique_names() -> None:
    names = [s.name for s in SCENARIOS]
    assert len(SCENARIOS) >= 20
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_every_edited_workflow_loads_and_names_its_nodes(tmp_path: Path, scenario: Scenario) -> None:
    workflow = load_workflow_file(_write(tmp_path, scenario))
    assert tuple(n.id for n in workflow.nodes) == scenario.nodes
    assert scenario.must_rerun <= set(scenario.nodes)
    assert {n for n, _ in scenario.invalidate} <= set(NODES)


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.name != "unchanged"], ids=lambda s: s.name)
def test_every_scenario_changes_something(scenario: Scenario) -> None:
    changed = (
        scenario.yaml != BASE_YAML
        or dict(scenario.files) != dict(BASE_FILES)
        or scenario.args != BASE_ARGS
        or scenario.invalidate
        or dict(scenario.settings) != dict(scenario.base_settings)
        or dict(scenario.secrets) != dict(scenario.base_secrets)
    )
    assert changed


def test_the_corpus_covers_the_issue_s_edit_kinds() -> None:
    names = {s.name for s in SCENARIOS}
    assert {"script-edit", "unrelated-input", "args-reordered", "script-comment", "invalidate",
            "memoize-false"} <= names  # fmt: skip
    # what changes a result outside the YAML node: tool code, what answers, env, secrets, defaults
    assert {"tool-edit", "tool-helper-edit", "tool-reformatted", "provider-switch", "command-edit",
            "model-edit", "api-key-rotated", "node-provider", "defaults-provider", "env-edit",
            "secret-rotated"} <= names  # fmt: skip


def test_new_nodes_must_run_and_unchanged_skips_everything() -> None:
    by_name = {s.name: s for s in SCENARIOS}
    assert by_name["new-step"].must_rerun == {"audit"}
    assert by_name["unchanged"].must_rerun == frozenset()


def test_edit_refuses_a_replacement_that_is_not_there_once() -> None:
    assert edit("a b", "a", "c") == "c b"
    with pytest.raises(ValueError, match="occurs 0 times"):
        edit("a b", "x", "y")
    with pytest.raises(ValueError, match="occurs 2 times"):
        edit("a a", "a", "y")
