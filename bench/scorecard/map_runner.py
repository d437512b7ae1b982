"""Running the `map:` / `workflow:` scorecard family (`map_corpus.py`): Baton for real.

Per scenario, in a fresh directory and database: the base run of `fleet` (with the base
files: a broken item or child step, when the scenario says), then the edit (workflows and
arguments rewritten, the broken files removed), a *truth* run of the edited workflow from
scratch (every unit it runs, and their outputs), then Baton's resume (`resume` of a failed
base run, else a new run `--resume-from` it). What the resume ran is read from the units'
`ran.log` lines written during it. A unit outside `must_rerun` whose output differs between
base and truth is a corpus error (reported, never silently scored).

The node-id baseline re-uses a unit whenever the base run completed the step of that id (an
item by its position, a child step by its name under the parent's step).
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.rig import Rig, rig
from bench.scorecard.map_corpus import BASE_ARGS, CHILD, PARENT, SCENARIOS, MapScenario
from bench.scorecard.score import tally
from core.engine.mapping import split_item_id
from core.store.records import NodeStatus, RunStatus


@dataclass(frozen=True)
class MapScenarioResult:
    name: str
    what: str
    nodes: tuple[str, ...]  # the units the truth run ran
    must_rerun: tuple[str, ...]
    skipped: dict[str, tuple[str, ...]]  # keying -> units it re-used
    tallies: dict[str, tuple[int, int, int, int]]  # keying -> (tp, fp, fn, tn)
    baton_ran: tuple[str, ...]  # units the resume ran (from their log lines)
    corpus_errors: tuple[str, ...]


def _logs(r: Rig) -> Counter[str]:
    """Every unit line of every run's `ran.log` so far."""
    lines: Counter[str] = Counter()
    for log in (r.root / "data" / "runs").glob("*/ran.log"):
        lines.update(line for line in log.read_text().splitlines() if line)
    return lines


def units_of(r: Rig, run_id: str) -> dict[str, str]:
    """The units of a run (its steps, its map items by value, its child's steps) and their
    outputs; a failed unit's output is its error."""
    store = r.store
    out: dict[str, str] = {}
    entries = store.steps.journal([run_id])
    latest = {e.node_id: e for e in entries}
    args = json.loads(store.blobs.get_blob(store.runs.get_run(run_id).args_digest))
    for node_id, entry in latest.items():
        split = split_item_id(node_id)
        text = _text(r, entry)
        if split is None and node_id in ("hosts", "report"):
            out[node_id] = text
        elif split is not None:
            out[f"deploy:{args['hosts'][split[1]]}"] = text
    children = [c for c in store.runs.child_runs([run_id]) if c.parent_node == "notes"]
    if children:
        for entry in store.steps.journal([children[0].id]):
            out[f"child:{entry.node_id}"] = _text(r, entry)
    return out


def _text(r: Rig, entry: Any) -> str:
    if entry.status is NodeStatus.COMPLETED and entry.output_digest:
        return str(r.store.blobs.get_blob(entry.output_digest).decode())
    return f"({entry.status.value}: {entry.error})"


def node_id_skips(r: Rig, base: str, truth_units: set[str], args: dict[str, Any]) -> frozenset[str]:
    """What keying by step id alone re-uses: every unit whose step id completed in the base."""
    store = r.store
    done = {e.node_id for e in store.steps.journal([base]) if e.status is NodeStatus.COMPLETED}
    kids = [c for c in store.runs.child_runs(store.steps.lineage(base)) if c.parent_node == "notes"]
    child_done = set()
    if kids:
        child_done = {
            e.node_id for e in store.steps.journal([kids[0].id]) if e.status is NodeStatus.COMPLETED
        }
    skipped = set()
    for unit in truth_units:
        kind, _, name = unit.partition(":")
        if kind == "deploy":
            if f"deploy[{args['hosts'].index(name)}]" in done:
                skipped.add(unit)
        elif kind == "child":
            if "notes" in done or name in child_done:
                skipped.add(unit)
        elif unit in done:
            skipped.add(unit)
    return frozenset(skipped)


def _write(r: Rig, s: MapScenario, base: bool) -> None:
    r.add_workflow("notes-child", CHILD if base else s.child)
    r.add_workflow("fleet", PARENT if base else s.parent)


async def run_scenario(s: MapScenario, root: Path) -> MapScenarioResult:
    async with rig(root) as r:
        for name, content in s.base_files.items():
            (r.workflows / name).write_text(content)
        _write(r, s, base=True)
        base = await r.run("fleet", json.loads(BASE_ARGS))
        want = RunStatus.FAILED if s.resume else RunStatus.COMPLETED
        got = r.store.runs.get_run(base).status
        if got is not want:
            raise RuntimeError(f"{s.name}: base run {base} ended {got.value}, not {want.value}")
        base_units = units_of(r, base)
        for name in s.base_files:
            (r.workflows / name).unlink()
        _write(r, s, base=False)
        args = json.loads(s.args)
        before = _logs(r)
        truth = await r.run("fleet", args, conversation="truth")
        truth_units = units_of(r, truth)
        ran_truth = _logs(r) - before
        before = _logs(r)
        if s.resume:
            await r.engine.resume(base, actor="console:bench")
            await r.engine.wait(base)
            resumed = base
        else:
            resumed = await r.run("fleet", args, resume_from=base, conversation="resume")
        if r.store.runs.get_run(resumed).status is not RunStatus.COMPLETED:
            ended = r.store.runs.get_run(resumed).status.value
            raise RuntimeError(f"{s.name}: resumed run {resumed} ended {ended}")
        ran = _logs(r) - before
    units = tuple(sorted(ran_truth))
    # a unit the failed base run never completed must run too: a branch that had not reached it
    # when another branch failed (the child's step fails while `hosts` still runs, on a busy
    # machine) left it unstarted, and only a resume can do it
    must = s.must_rerun | {u for u in units if base_units.get(u, "(").startswith("(")}
    baton_skipped = frozenset(u for u in units if u not in ran)
    skipped = {"baton": baton_skipped, "node-id": node_id_skips(r, base, set(units), args)}
    errors = tuple(
        u for u in units if u not in must and u in base_units and truth_units.get(u) != base_units[u]
    )
    return MapScenarioResult(
        name=s.name,
        what=s.what,
        nodes=units,
        must_rerun=tuple(sorted(must)),
        skipped={k: tuple(sorted(v)) for k, v in skipped.items()},
        tallies={k: tuple(asdict(tally(units, v, must)).values()) for k, v in skipped.items()},
        baton_ran=tuple(sorted(ran.elements())),
        corpus_errors=errors,
    )


async def run_all(only: str | None = None) -> list[MapScenarioResult]:
    results = []
    for s in SCENARIOS:
        if only and s.name != only:
            continue
        with tempfile.TemporaryDirectory(prefix=f"bench-score-{s.name}-") as tmp:
            results.append(await run_scenario(s, Path(tmp)))
    return results
