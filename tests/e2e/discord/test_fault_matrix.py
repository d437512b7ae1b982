"""Discord's failures, one after another, against the fake HTTP API: for each, nothing starts
that the user cannot see, and every state-carrying message (the run started, its gate waiting,
its completion, the progress message's last edit; or the refusal to start) reaches some place
the user is told about. Prints "messages lost: 0 of N".

Rate limits and server errors are answered as Discord answers them: discord.py waits out a 429
and retries a 500 / 502 itself; a 503 and a dropped connection it does not retry, so the core
sends the newest state again (a progress edit at its next turn, a completion after a backoff)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import discord

from tests.e2e.discord.fake_discord import CHANNEL_ID, Call, FakeDiscord
from tests.e2e.discord.gateway import ALL_PERMISSIONS, BOB
from tests.e2e.discord.harness import DiscordBot

Inject = Callable[[FakeDiscord, str], None]  # (fake, the run's thread)


def _none(fake: FakeDiscord, thread: str) -> None:
    return None


def _thread_fails(status: int, code: int, *, channel_too: bool = False) -> Inject:
    def inject(fake: FakeDiscord, thread: str) -> None:
        fake.fail_channels[thread] = (status, code)
        if channel_too:
            fake.fail_channels[CHANNEL_ID] = (status, code)
    return inject


def _next(method: str, status: int, *, times: int = 1, content: str = "", **kw: object) -> Inject:
    """The next `times` `method` writes in the run's thread fail with `status` (or drop)."""
    def inject(fake: FakeDiscord, thread: str) -> None:
        fake.fail_next(method, f"channels/{thread}/messages", status, times=times, content=content,
                       **kw)  # type: ignore[arg-type]
    return inject


EDIT, POST, COMPLETION = "PATCH", "POST", "completed in"


def _answer_fails(status: int, **kw: object) -> Callable[[FakeDiscord], None]:
    """The command's answer (the edit of its deferred response) fails once."""
    def inject(fake: FakeDiscord) -> None:
        fake.fail_next("PATCH", "/messages/@original", status, content="Started", **kw)  # type: ignore[arg-type]
    return inject


def _without(name: str) -> str:
    granted = discord.Permissions(int(ALL_PERMISSIONS))
    setattr(granted, name, False)
    return str(granted.value)


@dataclass(frozen=True)
class Fault:
    name: str
    mid_run: Inject = _none
    place: dict[str, object] = field(default_factory=dict)  # the interaction's permissions, context
    before: Callable[[FakeDiscord], None] = lambda fake: None  # before the command
    workflow: str = 'gated "v1"'


MATRIX = (
    Fault("none"),
    Fault("10003 thread deleted mid-run", _thread_fails(404, 10003)),
    Fault("50013 in the thread mid-run", _thread_fails(403, 50013)),
    Fault("50001 in thread and channel mid-run", _thread_fails(403, 50001, channel_too=True)),
    Fault("403 50001 at start (no View Channel)", place={"app_permissions": _without("view_channel")}),
    Fault("403 50013 at start (no Send Messages)", place={"app_permissions": _without("send_messages")}),
    Fault("a conversation between people", place={"context": 2}),
    Fault("429 with Retry-After on the progress edits", _next(EDIT, 429, times=2, retry_after=0.3)),
    Fault("429 with Retry-After on the completion", _next(POST, 429, content=COMPLETION, retry_after=0.3)),
    Fault("500 on a progress edit", _next(EDIT, 500)),
    Fault("502 on the completion", _next(POST, 502, content=COMPLETION)),
    Fault("503 on the progress edits", _next(EDIT, 503, times=2)),
    Fault("503 on the completion", _next(POST, 503, times=2, content=COMPLETION)),
    Fault("dropped connection on the progress edits", _next(EDIT, 0, times=2, drop=True)),
    Fault("dropped connection on the completion", _next(POST, 0, content=COMPLETION, drop=True)),
    Fault("503 on the command's answer", before=_answer_fails(503)),
    Fault("dropped connection on the command's answer", before=_answer_fails(0, drop=True)),
)


def _shown(calls: list[Call], text: str) -> bool:
    return any(text in c.content for c in calls if c.method in ("POST", "PATCH"))


async def _one(bot: DiscordBot, fault: Fault) -> tuple[int, list[str]]:
    mark = len(bot.fake.calls)
    before = {r.id for r in bot.baton.store.runs.recent_runs(platform="discord")}
    fault.before(bot.fake)
    payload = bot.command(f"run {fault.workflow}", **fault.place)
    if fault.place:  # the check before the run refuses it
        answer = await bot.acknowledged(payload)
        started = {r.id for r in bot.baton.store.runs.recent_runs(platform="discord")} - before
        told = "Nothing was started" in str((answer.json.get("data") or {}).get("content"))
        return 1, [n for n, bad in (("refusal", not told), ("a run the user cannot see", started)) if bad]
    run_id, thread = await bot.thread_of_next_run(mark)
    await bot.rested(run_id)
    await bot.baton.handler.drain()
    fault.mid_run(bot.fake, thread)
    bot.command(f"approve {run_id}", who=BOB)
    await bot.fake.wait_for(lambda _: bot.baton.store.runs.get_run(run_id).status == "completed")
    await bot.baton.handler.drain()
    await bot.client.sender.delivery.idle()
    # a reply Discord could not take for now waits in the outbox for its retry (after a backoff)
    async with asyncio.timeout(30):
        while bot.baton.store.outbox.undelivered():
            await asyncio.sleep(0.05)
    accepted = [c for c in bot.fake.calls[mark:] if c.status < 300]  # what Discord took
    expected = {"started": "Started", "gate waiting": "waits for approval", "completion": "completed in",
                "progress at rest": "— **completed**"}
    unused = [f"{f.method} {f.status} not injected" for f in bot.fake.faults if f.times > 0]
    return len(expected), [name for name, text in expected.items() if not _shown(accepted, text)] + unused


async def test_every_state_carrying_message_reaches_the_user(bot: DiscordBot) -> None:
    total, lost = 0, []
    for fault in MATRIX:
        count, missing = await _one(bot, fault)
        total += count
        lost += [f"{fault.name}: {name}" for name in missing]
        bot.fake.fail_channels.clear()
        bot.fake.faults.clear()
    print(f"\ndiscord fault matrix ({len(MATRIX)} faults): messages lost: {len(lost)} of {total}")
    assert not lost, lost
