"""Steps the Slack end-to-end tests share: start runs the way a person would, and read what
Baton posted from the calls the mock Slack Web API recorded."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import ANA
from tests.e2e.slack.mock_slack import Call

ACK_LIMIT = 3.0  # seconds Slack waits for an acknowledgement
# How the slack templates open each kind of message (templates/_shared/*.j2).
STARTED = "▶️ Started"
COMPLETED = " completed in "  # run_completed, not a node's ✅ in a progress table
FAILED = "Next: fix the step"  # run_failed
WAITING = "waits for approval at"  # gate_waiting
PROMPT = "already has an unfinished run"
_RUN_REF = re.compile(r"run `([0-9A-Za-z_-]+)`")


def run_id_of(call: Call) -> str:
    match = _RUN_REF.search(call.text)
    assert match, f"no run id in {call.text!r}"
    return match.group(1)


def posts(e2e: SlackE2E, contains: str = "", *, thread: str | None = None) -> list[Call]:
    """Messages Baton posted (not edits) containing `contains`, in `thread` when given."""
    return [
        c for c in e2e.mock.of("chat.postMessage")
        if contains in c.text and (thread is None or c.body.get("thread_ts") == thread)
    ]


@dataclass(frozen=True)
class StartedRun:
    run_id: str
    thread: str  # ts of the run's first message: the run's thread
    rest: Call  # the message posted when the run came to rest


async def command(e2e: SlackE2E, text: str, *, user: str = ANA) -> int:
    """Type `/workflow <text>`; check Slack got its acknowledgement in time. Returns the
    index of the first Web API call made after it (to wait for what follows)."""
    mark = len(e2e.mock.calls)
    answer = await e2e.slack.command(text, user=user)
    assert answer.status == 200, answer
    assert answer.seconds < ACK_LIMIT, f"acknowledged after {answer.seconds:.2f}s; {answer.stalls}"
    return mark


async def start(e2e: SlackE2E, text: str, *, rests_with: str, user: str = ANA) -> StartedRun:
    """`/workflow run …` that starts a run; wait for its message saying it came to rest."""
    mark = await command(e2e, text, user=user)
    first = await e2e.mock.wait_call("chat.postMessage", STARTED, after=mark)
    assert "thread_ts" not in first.body, "a run's first message opens its thread in the channel"
    assert first.ts is not None
    rest = await wait_in_thread(e2e, first.ts, rests_with, after=mark)
    return StartedRun(run_id_of(first), first.ts, rest)


async def wait_in_thread(e2e: SlackE2E, thread: str, contains: str, *, after: int = 0) -> Call:
    def found(calls: list[Call]) -> Call | None:
        for call in calls[after:]:
            in_thread = call.body.get("thread_ts") == thread
            if call.method == "chat.postMessage" and in_thread and contains in call.text:
                return call
        return None

    return await e2e.mock.wait_for(found)  # type: ignore[no-any-return]


async def failed_run(e2e: SlackE2E, message: str = "A") -> StartedRun:
    """A run of `flaky` that failed (its marker file does not exist)."""
    marker = e2e.tmp / f"marker-{message}"
    return await start(e2e, f'run flaky "{message}" --set marker={marker}', rests_with=FAILED)


def fix_flaky(e2e: SlackE2E, message: str = "A") -> None:
    """Make `flaky` runs started with `message` succeed from now on."""
    (e2e.tmp / f"marker-{message}").write_text("fixed")
