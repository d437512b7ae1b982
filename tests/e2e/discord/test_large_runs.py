"""A 1,000-node run on Discord: one progress message, edited in place as a summary that fits
one message, through the core's edit component (edits showing the run still moving at most
one a second); at most one file in all."""

from __future__ import annotations

import itertools

from core.config import Settings
from tests.e2e.discord.harness import DiscordBot

NODES = 1000


def write_large_workflow(settings: Settings) -> None:
    """`large`: 1,000 prompt steps (the fake provider), in chains of 50."""
    nodes = "\n".join(
        f"  - id: n{i:04d}\n    prompt: \"step {i}\"\n    replay: pure"
        + (f"\n    depends_on: [n{i - 1:04d}]" if i % 50 else "")
        for i in range(NODES))
    text = f"name: large\ndescription: {NODES} steps\nnodes:\n{nodes}\n"
    (settings.workflow_dirs[0] / "large.yaml").write_text(text)


async def test_a_1000_node_run_has_one_progress_message_and_at_most_one_file(
    bot: DiscordBot, settings: Settings
) -> None:
    write_large_workflow(settings)
    run_id, thread, run = await bot.start("run large")
    assert run.status == "completed"
    await bot.posted_in(thread, "completed in")
    await bot.client.sender.delivery.idle()

    in_thread = [c for c in bot.fake.calls if f"channels/{thread}/messages" in c.path]
    posted = [c for c in in_thread if c.method == "POST" and run_id in c.content and "—" in c.content]
    edits = [c for c in in_thread if c.method == "PATCH"]
    assert len(posted) == 1, [c.content[:80] for c in posted]  # one progress message …
    assert edits and len({c.path for c in edits}) == 1  # … edited in place
    assert "completed" in edits[-1].content and f"{NODES} steps" in edits[-1].content
    assert sum(len(c.files) for c in bot.fake.calls) <= 1
    moving = [c for c in [*posted, *edits] if "— **running**" in c.content]
    # paced: about one edit a second. Times are when the mock received each edit, so one
    # delayed on a loaded machine shortens the gap after it; a burst (no pacing) does not pass
    gaps = [b.at - a.at for a, b in itertools.pairwise(moving)]
    assert all(gap >= 0.5 for gap in gaps), gaps
    assert not gaps or len(gaps) <= (moving[-1].at - moving[0].at) / 0.9 + 1, gaps
