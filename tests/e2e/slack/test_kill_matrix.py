"""Commands killed at each point of their way through a real `baton run` (Slack over HTTP, the
mock Web API): for each point, N slash commands are typed, the process is killed with SIGKILL
while all of them stand at that point, and one process is started in its place. Every command
must end with exactly one run and exactly one completion posted, and nothing twice. Prints
"messages lost: 0 of N" per point and over the whole matrix.

The points, each held in place by what the process waits on at that moment:

- before the ack: the database is write-locked by the test, so recording the command (the
  step before the acknowledgement) waits; Slack gets no acknowledgement and tells the user the
  command failed (a slash command is never redelivered). Nothing of it may be left behind to
  run later as a surprise; the user types it again and it runs once;
- after the ack, before handling: `conversations.info` (the check that Baton may post in the
  channel) hangs; the next process handles each command from its record, once, saying so;
- after the run is created, before its reply: the "Started" post hangs; the next process must
  not start the command again (its record was closed with the run) and delivers the replies;
- after the completion was posted, before its outbox row was marked: Slack takes the completion
  but its answer never comes; the next process finds it by its metadata, never posts it twice.

Commands only: a plain reply in a thread ("lgtm") is not recorded before Bolt acknowledges it,
by design (docs/operations.md: a restart never replays an approval late), so a kill right after
its acknowledgement loses it; the person types it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from core.store.records import RunStatus
from core.store.repository import SqlStore
from tests.e2e.process import BatonProcess
from tests.e2e.slack.conftest import WORKFLOWS
from tests.e2e.slack.harness import Answer, SlackHarness
from tests.e2e.slack.mock_slack import Call, MockSlack
from tests.e2e.slack.steps import COMPLETED, STARTED
from tests.e2e.slack.test_fault_processes import _serve
from tests.e2e.slack.test_process import slack_env

pytestmark = pytest.mark.timeout(420)

N = 3  # commands per kill point
#: the late-event loop's period with BATON_EVENT_STALE_SECONDS=1 (bot/app.py: max(1, stale/2))
EVENT_TICK = 1.0
LATE = "handled after a restart"


@dataclass
class Point:
    place: Path
    url: str
    env: dict[str, str]
    mock: MockSlack
    name: str
    texts: list[str]

    def runs(self) -> dict[str, list[str]]:
        """message typed -> ids of the runs started for it."""
        with SqlStore(self.url) as store:
            found: dict[str, list[str]] = {t: [] for t in self.texts}
            for run in store.runs.recent_runs(limit=100):
                message = json.loads(store.blobs.get_blob(run.args_digest)).get("message", "")
                found.setdefault(message, []).append(run.id)
            return found

    def statuses(self) -> list[RunStatus]:
        with SqlStore(self.url) as store:
            return [r.status for r in store.runs.recent_runs(limit=100)]

    def open_events(self) -> int:
        with SqlStore(self.url) as store:
            return len(store.events.open_events(before=2e9))


async def _typed(slack: SlackHarness, texts: list[str]) -> list[asyncio.Task[Answer]]:
    return [asyncio.create_task(slack.command(f'run notes "{t}"')) for t in texts]


async def _until(check: Callable[[], bool], timeout: float = 60) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


async def _kill(process: BatonProcess, slack: SlackHarness, typed: list[asyncio.Task[Answer]]) -> None:
    process.kill()
    await process.exited()
    for task in typed:  # a request the process never answered ends with the connection
        with contextlib.suppress(aiohttp.ClientError):
            await task
    await slack.close()


async def _before_the_ack(p: Point) -> BatonProcess:
    first, slack = await _serve(p.env, p.place, p.mock)
    lock = sqlite3.connect(p.place / "baton.db", isolation_level=None, timeout=30)
    lock.execute("BEGIN IMMEDIATE")  # recording a command (before its ack) now waits
    try:
        typed = await _typed(slack, p.texts)
        await asyncio.sleep(1.5)  # the requests are in; none can be acknowledged
        assert not any(t.done() for t in typed), "a command was acknowledged with the database locked"
        await _kill(first, slack, typed)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert p.open_events() == 0 and not any(p.runs().values())  # nothing left to surprise anyone
    second, slack = await _serve(p.env, p.place, p.mock)
    # a negative check, as short as the late-event loop allows: its tick at start ran before
    # Slack was served (nothing to do for no platform); the next, the first that could take a
    # command of Slack's, starts within its `every` (1 s with BATON_EVENT_STALE_SECONDS=1)
    await asyncio.sleep(EVENT_TICK)
    assert not any(p.runs().values()), "a command nobody acknowledged ran by itself"
    try:
        for answer in await asyncio.gather(*await _typed(slack, p.texts)):  # Slack said it failed:
            assert answer.status == 200  # the user types it again
    finally:
        await slack.close()
    return second


async def _after_the_ack(p: Point) -> BatonProcess:
    p.mock.hold("conversations.info", "")
    first, slack = await _serve(p.env, p.place, p.mock)
    try:
        typed = await _typed(slack, p.texts)
        answers = await asyncio.gather(*typed)
        assert all(a.status == 200 for a in answers)  # acknowledged: Slack never sends them again
        await p.mock.wait_for(lambda _: p.mock.held, 60)
        await _until(lambda: p.open_events() == N)
        await _kill(first, slack, typed)
    finally:
        p.mock.release()
    assert not any(p.runs().values())
    second, unused = await _serve(p.env, p.place, p.mock)
    await unused.close()  # nothing is typed again
    return second


async def _after_the_run_is_created(p: Point) -> BatonProcess:
    p.mock.hold("chat.postMessage", STARTED)
    first, slack = await _serve(p.env, p.place, p.mock)
    try:
        typed = await _typed(slack, p.texts)
        await _until(lambda: all(p.runs()[t] for t in p.texts))
        await p.mock.wait_for(lambda _: p.mock.held, 60)
        await _kill(first, slack, typed)
    finally:
        p.mock.release()
    second, unused = await _serve(p.env, p.place, p.mock)
    await unused.close()
    return second


async def _after_the_completion_was_posted(p: Point) -> BatonProcess:
    p.mock.hold("chat.postMessage", COMPLETED, taken=True)
    first, slack = await _serve(p.env, p.place, p.mock)
    try:
        typed = await _typed(slack, p.texts)
        await _until(lambda: p.statuses().count(RunStatus.COMPLETED) == N)
        await p.mock.wait_for(lambda _: p.mock.held, 60)
        await _kill(first, slack, typed)
    finally:
        p.mock.release()
    second, unused = await _serve(p.env, p.place, p.mock)
    await unused.close()
    return second


Scenario = Callable[[Point], Awaitable[BatonProcess]]
POINTS: tuple[tuple[str, Scenario], ...] = (
    ("before the ack", _before_the_ack),
    ("after the ack, before handling", _after_the_ack),
    ("after the run is created, before its reply", _after_the_run_is_created),
    ("after the completion was posted, before its outbox row was marked", _after_the_completion_was_posted),
)


def _lost(p: Point, calls: list[Call]) -> list[str]:
    """Each command's story: one run, one completion posted for it (never two)."""
    lost = []
    runs = p.runs()
    for text in p.texts:
        ids = runs.get(text, [])
        if len(ids) != 1:
            lost.append(f"{text}: {len(ids)} runs")
            continue
        posted = [c for c in calls if c.method == "chat.postMessage"]
        done = [c for c in posted if COMPLETED in c.text and ids[0] in c.text]
        if len(done) != 1:
            lost.append(f"{text}: completion posted {len(done)} times")
    return lost


async def test_commands_killed_at_each_point_are_neither_lost_nor_doubled(
    mock_slack: MockSlack, tmp_path: Path
) -> None:
    total, lost = 0, []
    for n, (name, scenario) in enumerate(POINTS):
        place = tmp_path / f"point-{n}"
        workflows = place / "workflows"
        shutil.copytree(WORKFLOWS, workflows)
        url = f"sqlite:///{place / 'baton.db'}"
        env = slack_env(mock_slack, place, url)
        env.update(BATON_WORKFLOW_DIRS=str(workflows), BATON_LEASE_SECONDS="2", BATON_EVENT_STALE_SECONDS="1",
                   BATON_OUTBOX_LEASE_SECONDS="3", BATON_OUTBOX_POLL_SECONDS="0.5")  # fmt: skip
        point = Point(place, url, env, mock_slack, name, [f"p{n}-c{i}" for i in range(N)])
        mark = len(mock_slack.calls)
        last = await scenario(point)
        try:
            with contextlib.suppress(TimeoutError):  # what is still missing is counted below
                await _until(lambda p=point, m=mark: not _lost(p, mock_slack.calls[m:]), 60)  # type: ignore[misc]
            # a negative check: one more tick of every loop that could post a duplicate (the
            # late-event loop's every EVENT_TICK, two of the outbox's 0.5 s polls)
            await asyncio.sleep(EVENT_TICK)
        finally:
            assert await last.stop() == 0, last.output
        calls = mock_slack.calls[mark:]
        missing = _lost(point, calls)
        late = [c for c in calls if c.method == "chat.postMessage" and LATE in c.text]
        if name.startswith("after the ack"):  # each told once that it was handled late
            missing += [f"late notice posted {len(late)} times for {N} commands"] if len(late) != N else []
        elif late:
            missing.append(f"{len(late)} late notices for commands handled in time")
        print(f"\nkill point {name!r}: messages lost: {len(missing)} of {N}")
        total += N
        lost += [f"{name}: {what}" for what in missing]
    print(f"\nkill matrix ({len(POINTS)} points): messages lost: {len(lost)} of {total}")
    assert not lost, lost
