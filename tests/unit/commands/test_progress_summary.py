"""A large run's progress message is a summary whose size does not grow with the run."""

from __future__ import annotations

import pytest

from core.commands import replies
from core.engine.events import NodeState, NodeSummary
from core.redaction import Redactor
from core.render import render
from tests.unit.commands.samples import make_run, make_summary


@pytest.mark.parametrize("platform", ["slack", "discord", "console"])
@pytest.mark.parametrize("nodes", [30, 1_000, 20_000])
def test_a_large_run_is_summed_up_in_one_message(platform: str, nodes: int) -> None:
    states = [NodeState.RUNNING, NodeState.DONE, NodeState.FAILED, NodeState.WAITING, NodeState.QUEUED]
    table = tuple(NodeSummary(f"step-with-a-long-name-{i:05d}", "bash", states[i % 5], reason="x" * 40)
                  for i in range(nodes))
    reply = replies.progress(make_run(), make_summary("running", nodes=table))

    [text] = render(reply, platform, Redactor(()))

    assert f"{nodes} steps" in text and f"{nodes // 5} running" in text
    assert "step-with-a-long-name-00000" in text  # the nodes running, failed, waiting are named
    assert len(text) < 2_000  # one message on every platform, however large the run


def test_a_small_run_shows_its_whole_table() -> None:
    table = tuple(NodeSummary(f"s{i}", "bash", NodeState.DONE) for i in range(replies.SUMMARY_OVER))
    [text] = render(replies.progress(make_run(), make_summary(nodes=table)), "console", Redactor(()))
    assert all(f"s{i}" in text for i in range(replies.SUMMARY_OVER))
