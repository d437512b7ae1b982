"""The fault matrix's process rows on Discord: a Baton process (`bot_process.py`, wired as
`baton run` is) is stopped with SIGTERM mid-run, or killed with SIGKILL mid-run or after its run
came to rest but before Discord took its final edit. For each, the run's state-carrying
messages (it started, the final edit of its progress message, its completion) reach Discord:
from the same process within its grace period, or from the next process, which takes the
outbox row over once the dead one's claim lapses and edits the progress message the dead one
posted. Prints "messages lost: 0 of N"."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.store.records import RunStatus
from core.store.repository import SqlStore
from tests.e2e.discord.fake_discord import Call, FakeDiscord
from tests.e2e.discord.gateway import slash_command
from tests.e2e.discord.harness import settings_for
from tests.e2e.discord.test_process import fake_discord_url
from tests.e2e.process import REPO, BatonProcess, clean_env

pytestmark = pytest.mark.timeout(300)

SLOW = """
name: slow
description: One step that takes a few seconds (stopped or killed while it runs)
nodes:
  - id: wait
    bash: sleep 3; echo slept
    replay: pure
"""


@dataclass
class Trial:
    fake: FakeDiscord
    place: Path
    url: str
    mark: int = 0

    outbox_lease: float = 3.0

    async def bot(self, command: str | None = None) -> BatonProcess:
        args = [fake_discord_url(self.fake), self.url, str(self.place)]
        if command is not None:
            interaction = self.place / "interaction.json"
            interaction.write_text(json.dumps(slash_command(self.fake, command)))
            args.append(str(interaction))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.e2e.discord.bot_process", *args, cwd=REPO,
            env=clean_env(OUTBOX_LEASE_SECONDS=str(self.outbox_lease)),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        baton = BatonProcess(proc)
        await baton.wait_log("action=discord_ready")
        return baton

    def run_id(self) -> str | None:
        with SqlStore(self.url) as store:
            runs = store.runs.recent_runs(platform="discord")
            return runs[0].id if runs else None

    def status(self, run_id: str) -> RunStatus:
        with SqlStore(self.url) as store:
            return store.runs.get_run(run_id).status

    async def progress_kept(self, run_id: str) -> None:
        """Until the process has kept its progress message's id (a kill before that leaves the
        next process nothing to edit: it posts the progress anew, a duplicate, not a loss)."""
        async with asyncio.timeout(30):
            while True:
                with SqlStore(self.url) as store:
                    if store.state.get_state("discord", f"message:progress:{run_id}"):
                        return
                await asyncio.sleep(0.05)

    def undelivered(self, run_id: str) -> int:
        with SqlStore(self.url) as store:
            return len([r for r in store.outbox.deliveries(run_id) if r.delivered_at is None])

    async def running(self) -> str:
        """The run's id once its progress message says it is running."""
        mark = self.mark
        await self.fake.wait_for(lambda calls: [c for c in calls[mark:] if "**running**" in c.content], 60)
        run_id = self.run_id()
        assert run_id is not None
        return run_id


async def _kill_before_the_final_edit_is_delivered(trial: Trial) -> tuple[str, BatonProcess]:
    fake = trial.fake
    fake.hold("PATCH", "**completed**")  # Discord hangs on the progress message's final edit
    first = await trial.bot('run notes "outbox"')
    try:
        await fake.wait_for(lambda _: fake.held, 60)
        run_id = trial.run_id()
        assert run_id is not None
        assert trial.status(run_id) is RunStatus.COMPLETED and trial.undelivered(run_id) == 1
    finally:
        first.kill()
        await first.exited()
        fake.release()
    return run_id, await trial.bot()


async def _kill_mid_run(trial: Trial) -> tuple[str, BatonProcess]:
    first = await trial.bot("run slow")
    try:
        run_id = await trial.running()
        await trial.progress_kept(run_id)
    finally:
        first.kill()
        await first.exited()
    assert trial.status(run_id) is RunStatus.RUNNING
    return run_id, await trial.bot()


async def _sigterm_mid_run(trial: Trial) -> tuple[str, BatonProcess]:
    first = await trial.bot("run slow")
    run_id = await trial.running()
    assert await first.stop() == 0, first.output
    assert trial.undelivered(run_id) == 0, first.output  # all sent before it exited
    return run_id, first


Scenario = Callable[[Trial], Awaitable[tuple[str, BatonProcess]]]
ROWS: tuple[tuple[str, Scenario], ...] = (
    ("SIGTERM mid-run", _sigterm_mid_run),
    ("kill -9 mid-run", _kill_mid_run),
    ("kill -9 after rest, before delivery", _kill_before_the_final_edit_is_delivered),
)


def _lost(fake: FakeDiscord, calls: list[Call], run_id: str) -> list[str]:
    """What of the run's story Discord did not take: it started, its progress message's final
    edit (an edit of the one message posted for it), its completion (once)."""
    texts = {str(m["id"]): str(m["content"]) for m in fake.messages.values()}
    progress = [{"id": i} for i, text in texts.items() if run_id in text and "— **" in text]
    lost = []
    if not any("Started" in c.content and run_id in c.content and c.status < 300 for c in calls):
        lost.append("started")
    edited = [c for c in calls if c.method == "PATCH" and c.status < 300 and progress
              and c.path.endswith(f"/messages/{progress[0]['id']}") and "**completed**" in c.content]
    if len(progress) != 1 or not edited:
        lost.append("final progress edit")
    completions = [c for c in calls if c.method == "POST" and c.status < 300 and "completed in" in c.content
                   and run_id in c.content]
    if len(completions) != 1:
        lost.append(f"completion (sent {len(completions)} times)")
    return lost


async def test_stopped_and_killed_processes_lose_no_message(
    fake_discord: FakeDiscord, tmp_path: Path
) -> None:
    total, lost = 0, []
    for n, (name, scenario) in enumerate(ROWS):
        place = tmp_path / f"trial-{n}"
        place.mkdir()
        settings_for(place, "sqlite://")  # copies the workflows
        (place / "workflows" / "slow.yaml").write_text(SLOW)
        trial = Trial(fake_discord, place, f"sqlite:///{place / 'baton.db'}", mark=len(fake_discord.calls))
        run_id, last = await scenario(trial)
        if last.proc.returncode is None:  # the next process: it must finish the story while it runs
            mark = trial.mark
            with contextlib.suppress(TimeoutError):  # what is still missing is counted below
                await fake_discord.wait_for(
                    lambda calls, r=run_id, m=mark: not _lost(fake_discord, calls[m:], r), 30  # type: ignore[misc]
                )
        missing = _lost(fake_discord, fake_discord.calls[trial.mark:], run_id)
        if last.proc.returncode is None:
            assert await last.stop() == 0, last.output
        total += 3
        lost += [f"{name}: {what}" for what in missing]
    print(f"\ndiscord process faults ({len(ROWS)}): messages lost: {len(lost)} of {total}")
    assert not lost, lost


async def test_a_restarted_process_delivers_what_the_killed_one_had_claimed_at_once(
    fake_discord: FakeDiscord, tmp_path: Path
) -> None:
    """kill -9 while Discord hangs on the final edit the process claimed, under the default
    60 s outbox lease: the restarted process (same replica id) takes the claim over at once,
    not after the lease, and the story is told once."""
    settings_for(tmp_path, "sqlite://")  # copies the workflows
    trial = Trial(fake_discord, tmp_path, f"sqlite:///{tmp_path / 'baton.db'}", outbox_lease=60.0)
    fake = trial.fake
    fake.hold("PATCH", "**completed**")
    first = await trial.bot('run notes "outbox"')
    try:
        await fake.wait_for(lambda _: fake.held, 60)
        run_id = trial.run_id()
        assert run_id is not None and trial.undelivered(run_id) == 1
    finally:
        first.kill()
        await first.exited()
        fake.release()
    restarted = asyncio.get_running_loop().time()
    second = await trial.bot()
    try:
        await fake.wait_for(lambda calls: not _lost(fake, calls, run_id), 60)
        seconds = asyncio.get_running_loop().time() - restarted
        print(f"\nkill -9 with a claimed delivery: restart to delivery {seconds:.1f}s (outbox lease 60 s)")
        assert seconds < 30, seconds  # well before the 60 s lease: not waited out
        async with asyncio.timeout(10):  # settled once Discord answered
            while trial.undelivered(run_id):
                await asyncio.sleep(0.05)
        assert _lost(fake, fake.calls, run_id) == []  # once each: nothing doubled
    finally:
        assert await second.stop() == 0, second.output
