"""A step that prints without end (a `yes`, a log in a loop) does not fill Baton's disk, and a
glob that matches a whole build does not fill Baton's memory and store.

Its stdout past `BATON_MAX_OUTPUT_BYTES` goes to a file of the run directory, which is on
the disk Baton's database is on; that file stops at `BATON_MAX_OUTPUT_FILE_BYTES`, and the
rest is read and dropped, so the step still runs to its end. A step's artifacts are read into
Baton's memory and kept in its store: past `BATON_MAX_ARTIFACT_BYTES` they fail the step.
Through the real `baton say`.
"""

from __future__ import annotations

import pytest

from core.store.repository import SqlStore
from tests.e2e.console.cli import BatonCli, final_status

PRINTED = 20_000_000


def test_a_runaway_output_stops_at_the_file_cap_and_the_step_runs_to_its_end(baton: BatonCli) -> None:
    (baton.workflows / "flood.yaml").write_text(
        f"name: flood\nnodes:\n  - id: a\n    bash: yes | head -c {PRINTED}; echo finished >&2\n"
    )
    baton.env_extra.update(BATON_MAX_OUTPUT_BYTES="1000", BATON_MAX_OUTPUT_FILE_BYTES="4096")

    replies = baton.say("run flood")

    assert final_status(replies) == "completed"
    shown = str(replies[-1]["text"])
    assert f"1,000 of {PRINTED:,} bytes kept; the first 4,096 are in " in shown
    (run,) = baton.runs()
    (kept,) = (baton.home / ".baton" / "runs" / run.id / ".outputs").iterdir()
    assert kept.read_bytes() == b"y\n" * 2048


@pytest.mark.bwrap  # a sandboxed tool answers through its stdout, as a step prints
def test_a_tool_answer_past_the_file_cap_fails_its_step_with_one_line(baton: BatonCli) -> None:
    (baton.workflows / "tools.py").write_text(
        "from core.engine.tools import tool\n\n\n"
        "@tool(replay='pure')\ndef huge() -> str:\n    return 'x' * 3_000_000\n"
    )
    (baton.workflows / "big.yaml").write_text("name: big\nnodes:\n  - id: a\n    tool: huge\n")
    baton.env_extra.update(BATON_MAX_OUTPUT_BYTES="1000", BATON_MAX_OUTPUT_FILE_BYTES="100000")

    replies = baton.say("run big")

    assert final_status(replies) == "failed"
    shown = str(replies[-1]["text"])
    assert "tool `huge` answered with 3,000,0" in shown and "more than the 100,000 Baton keeps" in shown
    (run,) = baton.runs()
    assert not any((baton.home / ".baton" / "runs" / run.id / ".outputs").iterdir())


def test_artifacts_over_the_limit_fail_their_step_and_nothing_of_them_is_stored(baton: BatonCli) -> None:
    (baton.workflows / "build.yaml").write_text(
        "name: build\nnodes:\n  - id: a\n    bash: head -c 3000 /dev/zero > artifacts/app.bin\n"
        "    artifacts: [artifacts/*]\n"
    )
    baton.env_extra["BATON_MAX_ARTIFACT_BYTES"] = "1000"

    replies = baton.say("run build")

    assert final_status(replies) == "failed"
    shown = str(replies[-1]["text"])
    refusal = "its artifacts cannot be kept: `artifacts/app.bin` takes them over 1,000 bytes"
    assert refusal in shown
    (run,) = baton.runs()
    store = SqlStore(baton.database_url)
    try:
        assert all(not entry.artifacts for entry in store.steps.journal([run.id]))
    finally:
        store.close()

    baton.env_extra["BATON_MAX_ARTIFACT_BYTES"] = "3000"
    assert final_status(baton.say(f"resume {run.id}")) == "completed"
