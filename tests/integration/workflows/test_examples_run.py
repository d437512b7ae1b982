"""The shipped examples run end to end on a bare machine through the real engine (SQLite, the
`fake` provider, workflows/tools.py), each well under 2 s including its approval."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.store.records import RunStatus

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
async def harness(tmp_path: Path, sqlite_url: str) -> AsyncIterator[Any]:
    tools_module = pytest.importorskip("core.engine.tools")
    harness_module = pytest.importorskip("tests.integration.engine.harness")
    shutil.copytree(ROOT / "workflows", tmp_path / "workflows")
    tools = tools_module.ToolRegistry()
    tools.load(["workflows/tools.py"], ROOT)
    h = harness_module.make_harness(tmp_path, sqlite_url, tools=tools)
    await h.engine.start()
    try:
        yield h
    finally:
        await h.engine.stop()


async def _run_to_end(h: Any, name: str, args: dict[str, Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    run = await h.run(name, args)
    if run.status is RunStatus.PAUSED:
        await h.engine.approve(run.id, actor="console:ana")
        run = await h.engine.wait(run.id, timeout=30)
    return run, time.perf_counter() - started


async def test_hello(harness: Any) -> None:
    run, seconds = await _run_to_end(harness, "hello", {"message": "hi $(id); 'x'"})
    assert run.status is RunStatus.COMPLETED
    assert harness.output(run.id, "greet") == "Hello from Baton: hi $(id); 'x'\n"
    assert seconds < 10  # not waiting on anything (a speed target would be make bench's)


async def test_build_report(harness: Any) -> None:
    run, seconds = await _run_to_end(harness, "build-report", {"targets": "4"})
    assert run.status is RunStatus.COMPLETED
    assert json.loads(harness.output(run.id, "build")) == {"passed": 3, "project": "baton", "targets": 4}
    assert harness.output(run.id, "announce") == "baton: 3/4 targets passed (3 passed)\n"
    assert seconds < 10  # not waiting on anything (a speed target would be make bench's)


async def test_build_report_reads_its_matrix_file_and_an_edit_re_runs_it(harness: Any) -> None:
    """`files: [scripts/build_matrix.txt]` is both the step's identity and what it reads."""
    first, _ = await _run_to_end(harness, "build-report", {"targets": 5})
    assert json.loads(harness.output(first.id, "build"))["targets"] == 4  # the matrix has 4 rows
    with (harness.workflows / "scripts" / "build_matrix.txt").open("a", encoding="utf-8") as fh:
        fh.write("freebsd-x86_64\n")

    second = await harness.run("build-report", {"targets": 5}, resume_from=first.id)

    assert second.status is RunStatus.COMPLETED
    assert harness.executed(second.id, "build") == 1
    assert json.loads(harness.output(second.id, "build")) == {"passed": 4, "project": "baton", "targets": 5}
    assert harness.output(second.id, "announce") == "baton: 4/5 targets passed (4 passed)\n"


async def test_release_notes_pauses_at_review_then_publishes(harness: Any) -> None:
    first = await harness.run("release-notes", {"version": "1.4.0"})
    assert first.status is RunStatus.PAUSED
    run, seconds = await _run_to_end(harness, "release-notes", {"version": "1.4.0"})
    assert run.status is RunStatus.COMPLETED
    draft = json.loads(harness.output(run.id, "draft"))
    assert json.loads(harness.output(run.id, "publish"))["published"] == draft["title"]
    assert seconds < 10  # not waiting on anything (a speed target would be make bench's)


async def test_deploy(harness: Any) -> None:
    run, seconds = await _run_to_end(harness, "deploy", {"service": "api", "environment": "production"})
    assert run.status is RunStatus.COMPLETED
    shipped = json.loads(harness.output(run.id, "ship"))
    assert shipped["status"] == "deployed" and shipped["environment"] == "production"
    assert seconds < 10  # not waiting on anything (a speed target would be make bench's)


async def test_fan_out_checks_each_host_as_its_own_step(harness: Any) -> None:
    run, _ = await _run_to_end(harness, "fan-out", {"hosts": ["web-1", "$(id)", "db-1"]})
    assert run.status is RunStatus.COMPLETED
    assert json.loads(harness.output(run.id, "check")) == ["web-1 is up\n", "$(id) is up\n", "db-1 is up\n"]
    assert harness.output(run.id, "check[1]") == "$(id) is up\n"  # a value, never code
    assert harness.output(run.id, "report") == "3 of 3 hosts are up\n"


async def test_release_train_deploys_each_service_through_a_child_run(harness: Any) -> None:
    import asyncio

    from core.engine.events import EngineEvent, EventKind

    parent = await harness.run("release-train", {"services": ["api", "web"]})
    assert parent.status is RunStatus.PAUSED  # each child asks for approval
    children = sorted(harness.store.runs.child_runs([parent.id]), key=lambda r: r.parent_node or "")
    assert [(c.workflow, c.parent_node, c.status) for c in children] == [
        ("deploy", "each[0]", RunStatus.PAUSED), ("deploy", "each[1]", RunStatus.PAUSED)]
    done = asyncio.Event()

    async def watch(event: EngineEvent) -> None:
        if event.kind is EventKind.RUN_FINISHED and event.run_id == parent.id:
            done.set() if event.run_status == "completed" else None

    harness.engine.subscribe(watch)
    for child in children:
        await harness.engine.approve(child.id, actor="console:ana")
    await asyncio.wait_for(done.wait(), timeout=30)
    assert harness.output(parent.id, "report") == "2 of 2 services deployed\n"
    shipped = json.loads(harness.output(parent.id, "each"))
    assert [json.loads(s["outputs"]["ship"])["service"] for s in shipped] == ["api", "web"]
