"""Running the corpus: Baton for real, the baselines on the same runs' outputs.

Per scenario, in a fresh directory and database:
  1. the base run of `pipe` with the base files, arguments, provider settings and secrets;
  2. the edit is applied (files rewritten, then `invalidate` on the base run if asked), and
     Baton is started again on the same database with the scenario's provider settings and
     secrets. The tool registry is the one the base run used: the engine re-imports the tool
     module when its files changed, as a running Baton does;
  3. a *truth* run: the edited workflow from scratch (`--force`), giving every node's
     current output. A node outside `must_rerun` must print what the base run printed,
     otherwise the corpus is wrong (reported, never silently scored);
  4. Baton's resume: a new run `--resume-from` the base run. Its journal says which nodes
     were re-used (`cached_from`) and, for the others, why they ran.
Prompts the `openai` provider answers go to a local OpenAI-compatible endpoint whose answer
names the model.
The baselines are then asked what they would have re-used, given the base run's outputs
and the truth run's outputs.

    python -m bench.scorecard.runner [--only NAME]   # prints the per-scenario table as JSON

The `map:` / `workflow:` family (`map_corpus.py`, `map_runner.py`) runs after, under
`map_scenarios`; it counts what ran from the units' own log lines.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from bench.protocol import emit
from bench.rig import Rig, rig
from bench.scorecard import baselines, map_runner
from bench.scorecard.corpus import BASE_ARGS, BASE_FILES, BASE_YAML, SCENARIOS, Scenario
from bench.scorecard.score import tally
from core.config import Settings
from core.engine.providers import ProviderRegistry
from core.engine.tools import ToolRegistry
from core.store.records import NodeStatus


@dataclass(frozen=True)
class ScenarioResult:
    name: str
    what: str
    nodes: tuple[str, ...]
    must_rerun: tuple[str, ...]
    skipped: dict[str, tuple[str, ...]]  # keying -> nodes it re-used
    tallies: dict[str, tuple[int, int, int, int]]  # keying -> (tp, fp, fn, tn)
    baton_reasons: dict[str, str]  # node Baton re-ran -> its explanation
    corpus_errors: tuple[str, ...]  # nodes outside must_rerun whose output changed


def write_files(folder: Path, files: Mapping[str, str]) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != content:
            path.write_text(content)


def write_workflow(r: Rig, text: str, files: Mapping[str, str]) -> None:
    write_files(r.workflows, files)
    r.add_workflow("pipe", text.replace("@WF@", str(r.workflows)))


def providers_for(settings: Mapping[str, str], openai_url: str) -> ProviderRegistry:
    """The providers Baton builds from these settings (`BATON_PROMPT_PROVIDER`, …)."""
    values = {k: v.replace("@OPENAI@", openai_url) for k, v in settings.items()}
    return ProviderRegistry.from_settings(Settings(**values))  # type: ignore[arg-type]


@contextlib.contextmanager
def operator_env(values: Mapping[str, str]) -> Iterator[None]:
    """The operator's environment (secret values) while Baton runs."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def importable(folder: Path) -> Iterator[None]:
    """`folder` on the import path (the tool imports its helper), and none of its modules
    left imported afterwards (the next scenario has its own)."""
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        sys.path.remove(str(folder))
        for name, module in list(sys.modules.items()):
            filename = getattr(module, "__file__", None)
            if filename and Path(filename).resolve().is_relative_to(folder.resolve()):
                del sys.modules[name]


async def _models(request: web.Request) -> web.Response:
    body = await request.json()
    asked = body["messages"][-1]["content"]
    answer = f"{body['model']} says: {asked[:40]}"
    return web.json_response({"choices": [{"message": {"role": "assistant", "content": answer}}]})


@contextlib.asynccontextmanager
async def openai_endpoint() -> AsyncIterator[str]:
    """A local OpenAI-compatible endpoint; its base URL."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", _models)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()


def outputs_of(r: Rig, run_id: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in r.store.steps.journal([run_id]):
        if entry.status is NodeStatus.COMPLETED and entry.output_digest:
            out[entry.node_id] = r.store.blobs.get_blob(entry.output_digest).decode()
    return out


async def _run(r: Rig, args_raw: str, **kw: Any) -> str:
    run_id = await r.run("pipe", json.loads(args_raw), **kw)
    run = r.store.runs.get_run(run_id)
    if run.status.value != "completed":
        raise RuntimeError(f"run {run_id} ended {run.status.value}: {run.reason}")
    return run_id


async def run_scenario(s: Scenario, root: Path, openai_url: str) -> ScenarioResult:
    folder = root / "workflows"
    write_files(folder, BASE_FILES)
    with importable(folder):
        tools = ToolRegistry()
        tools.load(["tools.py"], folder)
        with operator_env(s.base_secrets):
            async with rig(root, tools=tools, providers=providers_for(s.base_settings, openai_url),
                           step_secrets=tuple(s.base_secrets)) as r:
                write_workflow(r, BASE_YAML, BASE_FILES)
                base = await _run(r, BASE_ARGS)
                base_out = outputs_of(r, base)
        with operator_env(s.secrets):
            async with rig(root, tools=tools, providers=providers_for(s.settings, openai_url),
                           step_secrets=tuple(s.secrets)) as r:
                write_workflow(r, s.yaml, s.files)
                for node, downstream in s.invalidate:
                    r.engine.invalidate(base, node, downstream=downstream, actor="console:bench")
                truth_out = outputs_of(r, await _run(r, s.args, conversation="truth"))
                resumed = await _run(r, s.args, resume_from=base, conversation="resume")
                entries = r.store.steps.journal([resumed])
    nodes = s.nodes
    baton_skipped = frozenset(e.node_id for e in entries if e.cached_from)
    reasons = {
        e.node_id: e.notes.reason or ""
        for e in entries
        if not e.cached_from and e.status is NodeStatus.COMPLETED
    }
    dropped = {n for n, _ in s.invalidate} | _downstream_of(s)
    base_steps = baselines.steps_of(yaml.safe_load(BASE_YAML))
    steps = baselines.steps_of(yaml.safe_load(s.yaml))
    earlier_keys = baselines.prefix_keys(BASE_ARGS, base_steps, base_out)
    earlier = {key: base_out[node] for node, key in earlier_keys.items()}
    skipped = {
        "baton": baton_skipped,
        "node-id": baselines.node_id_skips(steps, set(base_out), dropped),
        "prefix": baselines.prefix_skips(s.args, steps, earlier, truth_out, dropped),
    }
    errors = tuple(
        n for n in nodes if n not in s.must_rerun and n in base_out and truth_out.get(n) != base_out[n]
    )
    return ScenarioResult(
        name=s.name,
        what=s.what,
        nodes=nodes,
        must_rerun=tuple(sorted(s.must_rerun)),
        skipped={k: tuple(sorted(v)) for k, v in skipped.items()},
        tallies={k: tuple(asdict(tally(nodes, v, s.must_rerun)).values()) for k, v in skipped.items()},
        baton_reasons=reasons,
        corpus_errors=errors,
    )


def _downstream_of(s: Scenario) -> set[str]:
    """Nodes an `invalidate --downstream` drops besides the named one (from the base graph)."""
    steps = baselines.steps_of(yaml.safe_load(BASE_YAML))
    dropped: set[str] = set()
    for node, downstream in s.invalidate:
        if not downstream:
            continue
        frontier = {node}
        while frontier:
            children = {st.id for st in steps if set(st.deps) & frontier} - dropped
            dropped |= children
            frontier = children
    return dropped


async def run_all(only: str | None = None) -> list[ScenarioResult]:
    results = []
    async with openai_endpoint() as url:
        for s in SCENARIOS:
            if only and s.name != only:
                continue
            with tempfile.TemporaryDirectory(prefix=f"bench-score-{s.name}-") as tmp:
                results.append(await run_scenario(s, Path(tmp), url))
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only")
    opts = parser.parse_args()
    results = asyncio.run(run_all(opts.only))
    mapped = asyncio.run(map_runner.run_all(opts.only)) if not opts.only or opts.only.startswith(
        ("map-", "sub-")) else []  # fmt: skip
    emit({"scenarios": [asdict(r) for r in results], "map_scenarios": [asdict(r) for r in mapped]})


if __name__ == "__main__":
    main()
