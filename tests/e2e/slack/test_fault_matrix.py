"""Slack's failures, one after another, against the mock Web API: for each, nothing starts that
the user cannot see, and every state-carrying message (the run started, its gate waiting, its
completion, the progress message's last edit; or the refusal to start) reaches some place the
user is told about. Prints "messages lost: 0 of N".

slack_sdk's retry handlers wait out a 429 and retry a 5xx or a dropped connection; past their
budget the core sends the newest state again (a progress edit at its next turn, a completion
after a backoff). A channel that stops taking messages sends them through the command's
response URL while it lives, then to the requester directly."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.store.records import Run
from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import BOB
from tests.e2e.slack.mock_slack import Call, MockSlack
from tests.e2e.slack.steps import COMPLETED, STARTED, WAITING

Inject = Callable[[MockSlack, str], None]


def _none(mock: MockSlack, channel: str) -> None:
    return None


def _fail(method: str, error: str, *, times: int = 1, status: int = 200, **kw: object) -> Inject:
    def inject(mock: MockSlack, channel: str) -> None:
        mock.fail_next(method, error, times=times, status=status, only={"channel": channel}, **kw)  # type: ignore[arg-type]
    return inject


def _edits_fail(error: str, *, times: int, status: int = 200, **kw: object) -> Inject:
    """The run's progress edits (chat.update) fail mid-run."""
    def inject(mock: MockSlack, channel: str) -> None:
        mock.fail_next("chat.update", error, times=times, status=status, only={"channel": channel}, **kw)  # type: ignore[arg-type]
    return inject


def _removed(error: str) -> Inject:
    """The channel stops taking the bot's messages (removed, gone, archived) mid-run."""
    def inject(mock: MockSlack, channel: str) -> None:
        for method in ("chat.postMessage", "chat.update"):
            mock.fail_next(method, error, times=30, only={"channel": channel})
    return inject


@dataclass(frozen=True)
class Fault:
    name: str
    before: Inject = _none  # before the command
    mid_run: Inject = _none  # while the run waits at its gate
    starts: bool = True  # False: the check before the run refuses it


MATRIX = (
    Fault("none"),
    Fault("429 with Retry-After", _fail("chat.postMessage", "ratelimited", status=429,
                                        headers={"Retry-After": "1"})),
    Fault("429 beyond the retries", _fail("chat.postMessage", "ratelimited", times=4, status=429,
                                          headers={"Retry-After": "0"})),
    Fault("500", _fail("chat.postMessage", "internal_error", status=500)),
    Fault("502", _fail("chat.postMessage", "bad_gateway", status=502)),
    Fault("503", _fail("chat.postMessage", "service_unavailable", status=503)),
    Fault("dropped connection", _fail("chat.postMessage", "", drop=True)),
    Fault("not_in_channel mid-run", mid_run=_removed("not_in_channel")),
    Fault("channel_not_found mid-run", mid_run=_removed("channel_not_found")),
    Fault("is_archived mid-run", mid_run=_removed("is_archived")),
    Fault("not_in_channel at start", _fail("conversations.info", "not_in_channel"), starts=False),
    Fault("channel_not_found at start", _fail("conversations.info", "channel_not_found"), starts=False),
    Fault("invalid_auth at start", _fail("conversations.info", "invalid_auth"), starts=False),
    Fault("429 with Retry-After on a progress edit", mid_run=_edits_fail(
        "ratelimited", times=1, status=429, headers={"Retry-After": "1"})),
    # 8: the progress edit and the decided gate's edit each past slack_sdk's 4 attempts
    Fault("429 beyond the retries on the progress edits", mid_run=_edits_fail(
        "ratelimited", times=8, status=429, headers={"Retry-After": "0"})),
    Fault("500 on a progress edit", mid_run=_edits_fail("internal_error", times=1, status=500)),
    Fault("502 on a progress edit", mid_run=_edits_fail("bad_gateway", times=1, status=502)),
    Fault("503 beyond the retries on the progress edits", mid_run=_edits_fail(
        "service_unavailable", times=8, status=503)),
    Fault("dropped connections on the progress edits", mid_run=_edits_fail("", times=4, drop=True)),
)


def _delivered(calls: list[Call], marker: str) -> bool:
    """Some call that Slack took shows `marker` (a post anywhere, an edit, the user told privately)."""
    return any(marker in c.text and c.ts is not None for c in calls)


async def _run_in(e2e: SlackE2E, channel: str, status: str) -> Run:
    def found(_: list[Call]) -> Run | None:
        runs = [r for r in e2e.baton.store.runs.recent_runs(platform="slack") if r.conversation == channel]
        return runs[0] if runs and runs[0].status == status else None
    return await e2e.mock.wait_for(found)  # type: ignore[no-any-return]


async def _one(e2e: SlackE2E, fault: Fault, channel: str) -> tuple[int, list[str]]:
    """(state-carrying messages expected, those lost) for one fault."""
    mark = len(e2e.mock.calls)
    fault.before(e2e.mock, channel)
    await e2e.slack.command('run gated "v1"', channel=channel)
    if not fault.starts:
        await e2e.mock.wait_call("response_url", "Nothing was started", after=mark)
        runs = [r for r in e2e.baton.store.runs.recent_runs(platform="slack") if r.conversation == channel]
        return 1, ["a run the user cannot see"] if runs else []
    run = await _run_in(e2e, channel, "paused")
    await e2e.settle()
    fault.mid_run(e2e.mock, channel)
    await e2e.slack.command(f"approve {run.id}", user=BOB, channel=channel)
    await _run_in(e2e, channel, "completed")
    await e2e.settle()
    calls = e2e.mock.calls[mark:]
    expected = {"started": (STARTED, "started, but"), "gate waiting": (WAITING,), "completion": (COMPLETED,),
                "progress at rest": (f"{run.id}` — *completed*",)}
    lost = [name for name, markers in expected.items() if not any(_delivered(calls, m) for m in markers)]
    return len(expected), lost


async def test_every_state_carrying_message_reaches_the_user(e2e: SlackE2E) -> None:
    total, lost = 0, []
    for index, fault in enumerate(MATRIX):
        count, missing = await _one(e2e, fault, f"C0FAULT{index:02d}")
        total += count
        lost += [f"{fault.name}: {name}" for name in missing]
    print(f"\nslack fault matrix ({len(MATRIX)} faults): messages lost: {len(lost)} of {total}")
    assert not lost, lost
