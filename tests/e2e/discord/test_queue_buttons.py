"""A queued run on Discord: the answer to `run` says it is queued and behind whom, the run's
progress message in its thread carries a Cancel button, a click by someone who may not is
refused and one by its requester takes it out of the queue; `queue` lists the key. Gateway
payloads into the real discord.py client; what Discord received, from the fake."""

from __future__ import annotations

from pathlib import Path

from core.delivery.button_refs import command_of, parse
from core.store.records import RunStatus
from tests.e2e.discord.gateway import ANA, BOB
from tests.e2e.discord.harness import DEADLINE, DiscordBot, custom_ids

SHIP = """\
name: ship
concurrency: {key: deploy-prod, limit: 1}
nodes:
  - id: prepare
    bash: echo prepared
    replay: pure
  - id: review
    depends_on: [prepare]
    approval: "Ship it?"
"""


async def test_a_queued_runs_cancel_button_and_the_queue(bot: DiscordBot, tmp_path: Path) -> None:
    (tmp_path / "workflows" / "ship.yaml").write_text(SHIP)
    held, _, run = await bot.start('run ship "v1"')
    assert run.status == "paused"

    mark = len(bot.fake.calls)
    (answer,) = await bot.answers(bot.command('run ship "v2" --force', who=BOB))
    assert "queued #1 for `deploy-prod`" in answer.content and f"behind `{held[:6]}`" in answer.content
    queued, thread = await bot.thread_of_next_run(mark)
    assert bot.baton.store.runs.get_run(queued).status is RunStatus.QUEUED
    await bot.posted_in(thread, "queued #1 for")
    progress = bot.message_with(thread, "queued #1 for")
    kept = bot.client.interactions._kept
    shown = custom_ids(progress["components"], enabled=True)
    by_command = {command_of(parse(cid), kept): cid for cid in shown}
    cancel = by_command[f"cancel {queued}"]

    (listing,) = await bot.answers(bot.command("queue deploy-prod"))
    assert held in listing.content and queued in listing.content and "#1" in listing.content

    bot.click(cancel, who=ANA)  # not hers: refused, nothing changes
    await bot.acknowledged(bot.click(cancel, who=BOB))

    def cancelled(_: object) -> bool | None:
        return bot.baton.store.runs.get_run(queued).status is RunStatus.CANCELLED or None

    await bot.fake.wait_for(cancelled, DEADLINE)
    assert bot.baton.store.runs.get_run(held).status is RunStatus.PAUSED
    actions = [(e.actor, e.action) for e in bot.baton.store.events.audit_log(queued)]
    assert (f"discord:{BOB['id']}", "cancel") in actions
    assert (f"discord:{ANA['id']}", "cancel") not in actions
