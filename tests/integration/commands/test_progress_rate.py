"""One progress message per run, edited at most once per `interval`, with the final state at once."""

from __future__ import annotations

import time

from tests.integration.commands.conftest import Chat

STEPS = 30


def chain(n: int) -> str:
    lines = ["name: many", "nodes:"]
    for i in range(n):
        lines += [f"  - id: s{i}", "    bash: 'true'", "    replay: pure"]
        if i:
            lines.append(f"    depends_on: [s{i - 1}]")
    return "\n".join(lines) + "\n"


async def test_a_run_of_many_quick_steps_edits_its_progress_at_a_bounded_rate(chat: Chat) -> None:
    (chat.root / "workflows" / "many.yaml").write_text(chain(STEPS))
    interval = chat.handler.progress.interval
    began = time.monotonic()

    [started] = await chat.say("run many")
    final = await chat.final(started.run_id or "")
    elapsed = time.monotonic() - began

    assert final.kind == "run_completed"
    edits = [r for r in chat.outbox if r.kind == "progress" and r.run_id == started.run_id]
    # 3 events per step would be 90 edits unthrottled; the rate bound allows one per interval,
    # plus the first one and the final edit
    assert 1 <= len(edits) <= elapsed / interval + 2, (len(edits), elapsed)
    assert {r.how.replace_key for r in edits} == {f"progress:{started.run_id}"}
    last = edits[-1].data
    assert last["status"] == "completed"
