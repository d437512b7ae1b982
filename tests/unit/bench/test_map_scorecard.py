"""The map / sub-workflow scorecard family: its workflows load, its truth sets name units the
scenario has, and Baton, run for real on a few scenarios, re-runs exactly those units (an
item moved, a failed item fixed, a failed child fixed, a child edited to the same output)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bench.report import map_scorecard_section
from bench.scorecard.map_corpus import BASE_ARGS, CHILD, CHILD_UNITS, PARENT, SCENARIOS, MapScenario
from bench.scorecard.map_runner import run_scenario
from core.workflows.catalog import Catalog


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_every_scenario_loads_and_changes_something(tmp_path: Path, scenario: MapScenario) -> None:
    (tmp_path / "fleet.yaml").write_text(scenario.parent)
    (tmp_path / "notes-child.yaml").write_text(scenario.child)
    catalog = Catalog([tmp_path])
    assert [e.error for e in catalog.entries()] == [None, None]
    hosts = json.loads(scenario.args)["hosts"]
    units = {"hosts", "report", *(f"deploy:{h}" for h in hosts), *CHILD_UNITS}
    assert scenario.must_rerun <= units
    if scenario.name != "map-unchanged":
        assert (scenario.parent, scenario.child, scenario.args, dict(scenario.base_files)) != (
            PARENT, CHILD, BASE_ARGS, {})


@pytest.mark.parametrize("name", ["map-item-added-first", "map-failed-item-alone", "sub-failed-child-resumed",
                                  "sub-child-same-output"])
async def test_baton_reruns_exactly_the_units_that_must(tmp_path: Path, name: str) -> None:
    scenario = next(s for s in SCENARIOS if s.name == name)
    result = await run_scenario(scenario, tmp_path)
    assert result.corpus_errors == ()
    assert tuple(sorted(result.baton_ran)) == result.must_rerun  # each once, nothing else
    tp, fp, fn, _ = result.tallies["baton"]
    assert (fp, fn) == (0, 0) and tp > 0
    section = "\n".join(map_scorecard_section([json.loads(json.dumps(result.__dict__))]))
    assert f"| {name} |" in section and "**(" not in section


async def test_a_branch_the_failed_base_never_reached_must_run_on_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the child's step fails before `hosts` is done (a busy machine), the base run stops
    before any deploy starts: the resume must run them too, and the scorecard counts them so."""
    slow = PARENT.replace("echo hosts >> ran.log", "sleep 1; echo hosts >> ran.log")
    monkeypatch.setattr("bench.scorecard.map_runner.PARENT", slow)
    scenario = next(s for s in SCENARIOS if s.name == "sub-failed-child-resumed")
    result = await run_scenario(dataclasses.replace(scenario, parent=slow), tmp_path)
    assert result.corpus_errors == ()
    assert result.must_rerun == ("child:publish", "deploy:db-1", "deploy:web-1", "deploy:web-2", "report")
    assert tuple(sorted(result.baton_ran)) == result.must_rerun
