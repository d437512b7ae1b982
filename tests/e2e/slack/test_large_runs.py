"""A 1,000-node run on Slack: one progress message, edited in place as a summary that fits
one message, through the core's edit component (edits showing the run still moving at most
one a second); at most one file in all."""

from __future__ import annotations

import itertools

from core.config import Settings
from tests.e2e.discord.test_large_runs import NODES, write_large_workflow
from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.steps import COMPLETED, start


async def test_a_1000_node_run_has_one_progress_message_and_at_most_one_file(
    e2e: SlackE2E, settings: Settings
) -> None:
    write_large_workflow(settings)
    run = await start(e2e, "run large", rests_with=COMPLETED)
    await e2e.settle()

    progress = [c for c in e2e.mock.calls if run.run_id in c.text and " — " in c.text]
    posted = [c for c in progress if c.method == "chat.postMessage"]
    assert len(posted) == 1  # one progress message …
    edits = [c for c in progress if c.method == "chat.update"]
    assert edits and {c.body["ts"] for c in edits} == {posted[0].ts}  # … edited in place
    assert "completed" in edits[-1].text and f"{NODES} steps" in edits[-1].text
    assert len(e2e.mock.of("files.completeUploadExternal")) <= 1
    moving = [c for c in progress if "— *running*" in c.text]
    # paced: about one edit a second. Times are when the mock received each edit, so one
    # delayed on a loaded machine shortens the gap after it; a burst (no pacing) does not pass
    gaps = [b.at - a.at for a, b in itertools.pairwise(moving)]
    assert all(gap >= 0.5 for gap in gaps), gaps
    assert not gaps or len(gaps) <= (moving[-1].at - moving[0].at) / 0.9 + 1, gaps
