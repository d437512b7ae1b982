"""How long a state-carrying reply takes to reach Slack: from the engine's "the run came to
rest" to the chat.postMessage of its completion, over several runs. A completion goes out at
once; only progress edits are paced."""

from __future__ import annotations

from tests.e2e.latency import Rested, percentiles
from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.mock_slack import Call
from tests.e2e.slack.steps import COMPLETED, start

RUNS = 12


async def test_a_completion_reaches_slack_at_once(e2e: SlackE2E) -> None:
    rested = Rested(e2e.baton.engine)
    samples = []
    for index in range(RUNS):
        run = await start(e2e, f'run notes "v{index}"', rests_with=COMPLETED)
        [shown] = [c for c in e2e.mock.of("chat.postMessage") if _completes(c, run.run_id)]
        samples.append(shown.at - rested.at[run.run_id])
        await e2e.settle()
    p50, p99 = percentiles(samples)
    print(f"\nslack delivery latency (run at rest -> completion posted), {RUNS} runs: "
          f"p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    assert p50 < 250, samples  # not behind the progress edits' pace (one a second)


def _completes(call: Call, run_id: str) -> bool:
    return COMPLETED in call.text and run_id in call.text
