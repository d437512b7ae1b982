"""Progress work is per interval, not per event: a run of many quick steps that each yield to
the event loop (so the reporter could run between any two of them) builds its node table a
handful of times, and its last progress edit and final reply still show every step done."""

from __future__ import annotations

import asyncio
import time

import pytest

from core.engine.events import EngineEvent, RunSummary
from core.store.records import Run
from tests.integration.commands.conftest import Chat

STEPS = 200


def chain(n: int) -> str:
    lines = ["name: quick", "defaults: {replay: pure}", "nodes:"]
    for i in range(n):
        lines += [f"  - id: s{i:03d}", "    tool: hop"]
        if i:
            lines.append(f"    depends_on: [s{i - 1:03d}]")
    return "\n".join(lines) + "\n"


async def test_a_run_of_many_yielding_steps_builds_its_node_table_a_handful_of_times(
    chat: Chat, monkeypatch: pytest.MonkeyPatch
) -> None:
    @chat.engine.tools.tool("hop", replay="pure")
    async def hop() -> str:
        await asyncio.sleep(0)  # every step gives the loop (and the reporter) a turn
        return "ok"

    (chat.root / "workflows" / "quick.yaml").write_text(chain(STEPS))
    builds: list[str] = []
    summary = chat.engine.summary

    def counted(run: str | Run) -> RunSummary:
        built = summary(run)
        builds.append(built.status)
        return built

    monkeypatch.setattr(chat.engine, "summary", counted)
    events: list[EngineEvent] = []

    async def count(event: EngineEvent) -> None:
        events.append(event)

    chat.engine.subscribe(count)
    began = time.monotonic()

    [started] = await chat.say("run quick")
    final = await chat.final(started.run_id or "")
    elapsed = time.monotonic() - began
    await chat.handler.drain()

    assert final.kind == "run_completed"
    assert len(events) >= 3 * STEPS  # queued, started, completed: each one reached the reporter
    # one per interval (the first at once) and one for the final state; built per event (or
    # per step) this would be ~200-600
    interval = chat.handler.progress.interval
    reporter_builds = len(builds)
    assert 1 <= reporter_builds <= elapsed / interval + 2, (reporter_builds, elapsed)
    assert reporter_builds < STEPS // 4, builds  # far from per step, however slow the machine
    edits = [r for r in chat.outbox if r.kind == "progress" and r.run_id == started.run_id]
    assert 1 <= len(edits) <= reporter_builds
    assert edits[0].data["status"] == "running"  # the first edit went out while the run ran
    # a run this large is summed up (counts per state): the latest counts
    assert edits[-1].data["status"] == "completed" and ["done", STEPS] in edits[-1].data["counts"]
    assert len(final.data["ran"]) == STEPS
