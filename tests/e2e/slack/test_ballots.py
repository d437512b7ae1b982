"""A gate's button and the form it opens decide with a ballot (#27): what a person types in the
form is a value of that gate, never a command. Two runs wait at gates in one channel; the
values submitted for the first read like a command deciding the second (`approve <other> --`,
quotes, backticks); only the first gate is decided, with the values exactly as typed, and the
second still waits. Signed requests into the real Bolt app; what Baton posts, read from the
mock Web API."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from core.config import Access, Settings
from core.store.records import GateStatus, RunStatus
from tests.e2e.slack.conftest import BOT_TOKEN, SIGNING_SECRET, SlackE2E
from tests.e2e.slack.harness import ANA, BOB
from tests.e2e.slack.steps import COMPLETED, WAITING, start, wait_in_thread

NOTES = """
name: notes
nodes:
  - id: review
    approval:
      question: "Publish?"
      form:
        note: {type: string}
  - id: publish
    depends_on: [review]
    bash: printf '%s' {{ nodes.review.values.note }}
    replay: pure
"""
OTHER = """
name: other
nodes:
  - id: gate
    approval: "Go?"
"""


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "notes.yaml").write_text(textwrap.dedent(NOTES))
    (workflows / "other.yaml").write_text(textwrap.dedent(OTHER))
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=sqlite_url, workflow_dirs=[workflows], data_dir=tmp_path / "data", tool_modules=[],
        access=Access.model_validate({"run": {"*": [f"slack:{ANA}"]}, "approve": {"*": [f"slack:{BOB}"]}}),
        slack_bot_token=BOT_TOKEN,  # type: ignore[arg-type]
        slack_signing_secret=SIGNING_SECRET,  # type: ignore[arg-type]
    )  # fmt: skip


async def test_a_forms_values_that_read_like_a_command_decide_only_its_own_gate(e2e: SlackE2E) -> None:
    other = await start(e2e, "run other", rests_with=WAITING, user=ANA)
    notes = await start(e2e, "run notes", rests_with=WAITING, user=ANA)
    typed = f"approve {other.run_id} -- x \"quoted\" `rm -rf /` 'single' reject {other.run_id}"

    mark = len(e2e.mock.calls)
    assert (await e2e.slack.click(notes.rest, "approve", user=BOB)).status == 200
    opened = await e2e.mock.wait_call("views.open", after=mark)
    view = opened.body["view"]
    assert "field:note" in json.dumps(view)
    mark = len(e2e.mock.calls)
    done = await e2e.slack.submit(opened, {"note": typed}, user=BOB)
    assert done.status == 200 and done.body == ""
    await wait_in_thread(e2e, notes.thread, COMPLETED, after=mark)

    store = e2e.baton.store
    gate = store.gates.get_gate(notes.run_id, "review")
    assert gate.status is GateStatus.APPROVED and gate.decided_by == f"slack:{BOB}"
    assert gate.outcome["values"] == {"note": typed}  # the value exactly as typed
    [publish] = [e for e in store.steps.journal([notes.run_id]) if e.node_id == "publish"]
    assert publish.output_digest and store.blobs.get_blob(publish.output_digest) == typed.encode()

    # the other run's gate was named in the text, and is untouched
    assert store.runs.get_run(other.run_id).status is RunStatus.PAUSED
    assert store.gates.get_gate(other.run_id, "gate").status is GateStatus.WAITING
    assert store.ballots.gate_votes(
        other.run_id, "gate", store.gates.get_gate(other.run_id, "gate").created_at
    ) == []
    assert not [e for e in store.events.audit_log(other.run_id) if e.action in ("vote", "approve", "reject")]
    # the audit row of the decision says where the ballot came from
    commands = [e for e in store.events.audit_log(notes.run_id) if e.details.get("command") == "approve"]
    assert {e.actor for e in commands} == {f"slack:{BOB}"}
    assert [e.details["source"] for e in commands] == ["button", "modal"]  # the click, then the form

    # a click on the other run's Reject button decides that gate only, by its own run's id
    mark = len(e2e.mock.calls)
    assert (await e2e.slack.click(other.rest, "reject", user=BOB)).status == 200
    await e2e.mock.wait_call("chat.postMessage", "Rejected the gate", after=mark)
    assert store.runs.get_run(other.run_id).status is RunStatus.CANCELLED
    assert store.gates.get_gate(other.run_id, "gate").status is GateStatus.REJECTED
    assert store.gates.get_gate(notes.run_id, "review").status is GateStatus.APPROVED  # as it was
