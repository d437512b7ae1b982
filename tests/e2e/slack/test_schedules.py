"""Schedules on Slack (the real Bolt app over signed HTTP, the mock Web API): `/workflow
schedule add notes every 2s` fires while the bot serves; each run opens its own thread in the
channel where it was added with "⏰ Schedule … started …", and its progress and completion go
to that thread, saying which schedule started it; `schedule pause` stops it, `schedule show`
lists its fires."""

from __future__ import annotations

from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import CHANNEL
from tests.e2e.slack.steps import COMPLETED, command, posts, run_id_of, wait_in_thread


async def test_a_schedule_added_in_a_channel_reports_each_run_in_its_own_thread(e2e: SlackE2E) -> None:
    mark = await command(e2e, "schedule add notes every 2s nightly notes")
    added = await e2e.mock.wait_call("chat.postMessage", "added", after=mark)
    sid = added.text.split("Schedule `")[1].split("`")[0]
    fired = [
        await e2e.mock.wait_call("chat.postMessage", f"Schedule `{sid}` started", after=mark, timeout=20)
    ]
    first = fired[0]
    assert first.body["channel"] == CHANNEL and "thread_ts" not in first.body  # a thread of its own
    assert first.ts is not None
    done = await wait_in_thread(e2e, first.ts, COMPLETED, after=mark)
    run_id = run_id_of(first)
    assert run_id in done.text
    progress = [
        c
        for c in e2e.mock.calls[mark:]
        if c.method in ("chat.postMessage", "chat.update")
        and c.body.get("thread_ts") == first.ts
        and "started by schedule" in c.text
    ]
    assert progress, "the progress message says which schedule started the run"
    second = await e2e.mock.wait_call(
        "chat.postMessage", f"Schedule `{sid}` started", after=e2e.mock.calls.index(first) + 1, timeout=20
    )
    assert second.ts != first.ts and run_id_of(second) != run_id

    mark = await command(e2e, f"schedule pause {sid}")
    await e2e.mock.wait_call("chat.postMessage", "paused by", after=mark)
    await e2e.settle()
    runs = [r for r in e2e.baton.store.runs.recent_runs(limit=50) if r.started_by == f"schedule:{sid}"]
    assert len({r.thread for r in runs}) == len(runs)  # each run in its own thread
    assert all(r.conversation == CHANNEL for r in runs)
    mark = await command(e2e, f"schedule show {sid}")
    shown = await e2e.mock.wait_for(
        lambda calls: next((c for c in calls[mark:] if "Last fires" in c.text), None)
    )
    assert run_id in shown.text
    assert len(posts(e2e, f"Schedule `{sid}` started")) == len(runs)
