"""The fault matrix's process rows: a real `baton run` (Slack over HTTP, the mock Web API) is
stopped mid-run with SIGTERM, or killed with SIGKILL mid-run, after its run came to rest but
before Slack took its completion, or after Slack took the completion but before the process
heard back and settled its outbox row. For each, the run's state-carrying messages (it started, the
final edit of its progress message, its completion) reach Slack: from the same process within
its grace period, or from the next process, which takes the outbox row over once the dead one's
claim lapses and edits the progress message the dead one posted; a completion Slack already
holds is found by its metadata and not posted again. Prints
"messages lost: 0 of N"."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.store.records import RunStatus
from core.store.repository import SqlStore
from tests.e2e.process import BatonProcess, free_port
from tests.e2e.slack.conftest import SIGNING_SECRET, WORKFLOWS
from tests.e2e.slack.harness import SlackHarness
from tests.e2e.slack.mock_slack import Call, MockSlack
from tests.e2e.slack.steps import COMPLETED, STARTED
from tests.e2e.slack.test_process import slack_env

pytestmark = pytest.mark.timeout(300)

#: the step runs until the test opens its gate (a file in the workflow directory, which a step
#: sees at the same path, sandboxed or not): it is surely still running when the process is
#: stopped or killed, and ends the moment the test lets it (a fixed `sleep 3` cost its 3 s in
#: each of the two rows using it, and a loaded machine could have let it end before the signal)
SLOW = """
name: slow
description: One step that runs until the test lets it end (stopped or killed while it runs)
nodes:
  - id: wait
    bash: until [ -e {gate} ]; do sleep 0.02; done; echo slept
    replay: pure
"""
GATE = "gate"


async def _serve(env: dict[str, str], cwd: Path, mock: MockSlack) -> tuple[BatonProcess, SlackHarness]:
    env = {**env, "BATON_WEB_PORT": str(free_port())}  # its own port
    baton = await BatonProcess.start(env, cwd=cwd, forked=True)  # many starts: from the zygote
    started = await baton.wait_log(r"action=slack_started .*port=(\d+)")
    url = f"http://127.0.0.1:{started.group(1)}/slack/events"
    return baton, SlackHarness(url, SIGNING_SECRET, mock)


@dataclass
class Trial:
    mock: MockSlack
    env: dict[str, str]
    cwd: Path
    url: str
    mark: int = 0

    def run_id(self) -> str:
        with SqlStore(self.url) as store:
            return store.runs.recent_runs(platform="slack")[0].id

    def rested(self, run_id: str) -> RunStatus:
        with SqlStore(self.url) as store:
            return store.runs.get_run(run_id).status

    async def progress_kept(self, run_id: str) -> None:
        """Until the process has kept its progress message's id (a kill before that leaves the
        next process nothing to edit: it posts the progress anew, a duplicate, not a loss)."""
        async with asyncio.timeout(30):
            while True:
                with SqlStore(self.url) as store:
                    if store.state.get_state("slack", f"message:progress:{run_id}"):
                        return
                await asyncio.sleep(0.05)

    def open_gate(self) -> None:
        """Let the slow step end (`SLOW`)."""
        (self.cwd / "workflows" / GATE).touch()

    def undelivered(self, run_id: str) -> int:
        with SqlStore(self.url) as store:
            return len([r for r in store.outbox.deliveries(run_id) if r.delivered_at is None])


def _progress(calls: list[Call], run_id: str) -> list[Call]:
    return [c for c in calls if run_id in c.text and "—" in c.text and c.method.startswith("chat.")]


async def _kill_before_the_completion_is_delivered(trial: Trial) -> tuple[str, BatonProcess]:
    """The run completes in the database; Slack hangs on the final edit; the bot is killed."""
    mock = trial.mock
    mock.hold("chat.update", "completed")
    first, slack = await _serve(trial.env, trial.cwd, mock)
    try:
        await slack.command('run notes "outbox"')
        await mock.wait_for(lambda _: mock.held, 60)
        run_id = trial.run_id()
        assert trial.rested(run_id) is RunStatus.COMPLETED and trial.undelivered(run_id) == 1
        first.kill()
        await first.exited()
    finally:
        await slack.close()
        mock.release()
    second, unused = await _serve(trial.env, trial.cwd, mock)
    await unused.close()  # nothing is typed to the next process: it only delivers
    return run_id, second


async def _kill_after_slack_took_the_completion(trial: Trial) -> tuple[str, BatonProcess]:
    """The run completes; Slack takes its completion but its answer never comes; the bot is
    killed before it settles the row. The next process delivers the row again."""
    mock = trial.mock
    held = len(mock.held)
    mock.hold("chat.postMessage", COMPLETED, taken=True)
    first, slack = await _serve(trial.env, trial.cwd, mock)
    try:
        await slack.command('run notes "outbox"')
        await mock.wait_for(lambda _: len(mock.held) > held, 60)
        run_id = trial.run_id()
        assert trial.rested(run_id) is RunStatus.COMPLETED and trial.undelivered(run_id) == 1
        first.kill()
        await first.exited()
    finally:
        await slack.close()
        mock.release()
    second, unused = await _serve(trial.env, trial.cwd, mock)
    await unused.close()  # nothing is typed to the next process: it only delivers
    async with asyncio.timeout(30):  # Slack holds the completion already: only the row is settled
        while trial.undelivered(run_id):
            await asyncio.sleep(0.1)
    return run_id, second


async def _kill_mid_run(trial: Trial) -> tuple[str, BatonProcess]:
    """Killed while the step runs: the next process recovers the run and reports it."""
    mock = trial.mock
    first, slack = await _serve(trial.env, trial.cwd, mock)
    try:
        await slack.command("run slow")
        await mock.wait_for(lambda calls: [c for c in calls[trial.mark:] if "running" in c.text], 60)
        run_id = trial.run_id()
        await trial.progress_kept(run_id)
        first.kill()
        await first.exited()
        assert trial.rested(run_id) is RunStatus.RUNNING
    finally:
        await slack.close()
        trial.open_gate()  # the step the next process runs again ends at once
    second, unused = await _serve(trial.env, trial.cwd, mock)
    await unused.close()  # nothing is typed to the next process: it only delivers
    return run_id, second


async def _sigterm_mid_run(trial: Trial) -> tuple[str, BatonProcess]:
    """Stopped while the step runs: the step finishes within the grace period and the same
    process sends the final edit and the completion before it exits."""
    mock = trial.mock
    first, slack = await _serve(trial.env, trial.cwd, mock)
    try:
        await slack.command("run slow")
        await mock.wait_for(lambda calls: [c for c in calls[trial.mark:] if "running" in c.text], 60)
        run_id = trial.run_id()
        stopped = asyncio.create_task(first.stop())
        await first.wait_log(r"action=shutdown\b")  # SIGTERM taken while the step runs
        assert trial.rested(run_id) is RunStatus.RUNNING
        trial.open_gate()  # the step ends within the grace period
        assert await stopped == 0, first.output
    finally:
        trial.open_gate()
        await slack.close()
    assert trial.undelivered(run_id) == 0, first.output  # all sent before it exited
    return run_id, first


Scenario = Callable[[Trial], Awaitable[tuple[str, BatonProcess]]]
ROWS: tuple[tuple[str, Scenario], ...] = (
    ("SIGTERM mid-run", _sigterm_mid_run),
    ("kill -9 mid-run", _kill_mid_run),
    ("kill -9 after rest, before delivery", _kill_before_the_completion_is_delivered),
    ("kill -9 after Slack took the completion, before it was settled", _kill_after_slack_took_the_completion),
)


def _lost(calls: list[Call], run_id: str) -> list[str]:
    """What of the run's story Slack did not take: it started, its progress message's final
    edit (an edit of the one message posted for it), its completion (once)."""
    progress = _progress(calls, run_id)
    posted = [c for c in progress if c.method == "chat.postMessage"]
    final = [c for c in progress if "completed" in c.text]
    completions = [c for c in calls if c.method == "chat.postMessage" and COMPLETED in c.text
                   and run_id in c.text]
    lost = []
    if not any(STARTED in c.text and run_id in c.text for c in calls):
        lost.append("started")
    edited = bool(posted) and bool(final) and final[-1].method == "chat.update"
    if len(posted) != 1 or not edited or final[-1].body["ts"] != posted[0].ts:
        lost.append("final progress edit")
    if len(completions) != 1:
        lost.append(f"completion (sent {len(completions)} times)")
    return lost


async def test_stopped_and_killed_processes_lose_no_message(mock_slack: MockSlack, tmp_path: Path) -> None:
    total, lost = 0, []
    for n, (name, scenario) in enumerate(ROWS):
        place = tmp_path / f"trial-{n}"
        workflows = place / "workflows"
        shutil.copytree(WORKFLOWS, workflows)
        (workflows / "slow.yaml").write_text(SLOW.format(gate=workflows / GATE))
        url = f"sqlite:///{place / 'baton.db'}"
        env = slack_env(mock_slack, place, url)
        env.update(BATON_WORKFLOW_DIRS=str(workflows), BATON_LEASE_SECONDS="2",
                   BATON_OUTBOX_LEASE_SECONDS="3", BATON_OUTBOX_POLL_SECONDS="0.5", BATON_SHUTDOWN_GRACE="20")
        trial = Trial(mock_slack, env, place, url, mark=len(mock_slack.calls))
        run_id, last = await scenario(trial)
        if last.proc.returncode is None:  # the next process: it must finish the story while it runs
            mark = trial.mark
            with contextlib.suppress(AssertionError):  # what is still missing is counted below
                await mock_slack.wait_for(lambda calls, r=run_id, m=mark: not _lost(calls[m:], r), 30)  # type: ignore[misc]
        missing = _lost(mock_slack.calls[trial.mark:], run_id)
        if last.proc.returncode is None:
            assert await last.stop() == 0, last.output
        assert trial.undelivered(run_id) == 0 or missing, "an undelivered row, yet nothing missing?"
        total += 3
        lost += [f"{name}: {what}" for what in missing]
    print(f"\nslack process faults ({len(ROWS)}): messages lost: {len(lost)} of {total}")
    assert not lost, lost
