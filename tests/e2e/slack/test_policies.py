"""A two-approver gate with a form, through Slack: the gate message shows the policy and a button
per choice; Approve opens a modal (views.open with the click's trigger_id), its submission
(view_submission) is checked by the core and counts as one vote, whose values become the
gate's proposal; the message is edited as votes arrive; a second approver's other values are
not counted (told privately how they differ), their click on Approve approves the proposal and
opens the gate; the branch on `hotfix` is not taken; the gate message's headline becomes the
outcome, naming both approvers.
Signed requests into the real Bolt app; what Baton posts, read from the mock Web API."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from core.config import Access, Settings
from tests.e2e.slack.conftest import BOT_TOKEN, SIGNING_SECRET, SlackE2E
from tests.e2e.slack.harness import ANA, BOB
from tests.e2e.slack.mock_slack import Call
from tests.e2e.slack.steps import COMPLETED, WAITING, start, wait_in_thread

CAROL = "U0CAROL"
RELEASE = """
name: release
nodes:
  - id: review
    approval:
      question: "Ship it?"
      approvers: [group:sre]
      required: 2
      requester_may_approve: false
      timeout: 4h
      form:
        replicas: {type: integer, default: 3}
        window: {type: string, enum: [now, tonight]}
      choices: [approve, hotfix, reject]
  - id: deploy
    depends_on: [review]
    when: "{{ nodes.review.decision == 'approve' }}"
    bash: printf 'deploy x%s %s' {{ nodes.review.values.replicas }} {{ nodes.review.values.window }}
    replay: pure
  - id: hotfix
    depends_on: [review]
    when: "{{ nodes.review.decision == 'hotfix' }}"
    bash: printf hotfix
    replay: pure
"""


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "release.yaml").write_text(textwrap.dedent(RELEASE))
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=sqlite_url, workflow_dirs=[workflows], data_dir=tmp_path / "data", tool_modules=[],
        access=Access.model_validate({
            "groups": {"sre": [f"slack:{BOB}", f"slack:{CAROL}"]}, "run": {"*": [f"slack:{ANA}"]}}),
        slack_bot_token=BOT_TOKEN,  # type: ignore[arg-type]
        slack_signing_secret=SIGNING_SECRET,  # type: ignore[arg-type]
    )  # fmt: skip


def _view(call: Call) -> dict[str, object]:
    view = call.body["view"]
    return json.loads(view) if isinstance(view, str) else view  # type: ignore[no-any-return]


async def _approve_in_modal(e2e: SlackE2E, message: Call, user: str, values: dict[str, str]) -> int:
    mark = len(e2e.mock.calls)
    clicked = await e2e.slack.click(message, "approve", user=user)
    assert clicked.status == 200
    opened = await e2e.mock.wait_call("views.open", after=mark)
    assert opened.body["trigger_id"] == e2e.slack.last_trigger  # the click's own trigger_id
    blocks = {b["block_id"]: b for b in _view(opened)["blocks"]}  # type: ignore[attr-defined]
    assert blocks["field:replicas"]["element"]["initial_value"] == "3"  # the default, shown
    assert [o["value"] for o in blocks["field:window"]["element"]["options"]] == ["now", "tonight"]
    mark = len(e2e.mock.calls)
    done = await e2e.slack.submit(opened, values, user=user)
    assert done.status == 200 and done.body == ""
    return mark


async def test_a_two_approver_gate_with_a_form_through_modals(e2e: SlackE2E) -> None:
    paused = await start(e2e, "run release", rests_with=WAITING, user=ANA)
    gate_message = paused.rest
    assert [b["value"] for b in gate_message.buttons] == [
        f"approve {paused.run_id}", f"approve {paused.run_id} hotfix", f"reject {paused.run_id}"]
    assert "0/2 · needs *@sre* · requester excluded · expires in 4h" in gate_message.text

    mark = len(e2e.mock.calls)  # the requester's click is refused, privately; no modal
    await e2e.slack.click(gate_message, "approve", user=ANA)
    refused = await e2e.mock.wait_call("chat.postEphemeral", "requested run", after=mark)
    assert refused.body["user"] == ANA and not e2e.mock.of("views.open")

    mark = await _approve_in_modal(e2e, gate_message, BOB, {"window": "tonight"})
    edit = await e2e.mock.wait_for(lambda calls: next(
        (c for c in calls[mark:] if c.method == "chat.update" and c.body.get("ts") == gate_message.ts
         and "1/2" in c.text), None))
    assert len(edit.buttons) == 3  # still open: its buttons stay
    assert str(e2e.baton.store.runs.get_run(paused.run_id).status) == "paused"

    assert f"proposed by name-of-{BOB}: `replicas=3` `window=tonight`" in edit.text  # the proposal, shown

    # other values are not counted toward the proposal: Carol is told how they differ, privately
    mark = len(e2e.mock.calls)
    typed = await e2e.slack.command(f"approve {paused.run_id} replicas=5 window=now", user=CAROL)
    assert typed.status == 200
    differs = await e2e.mock.wait_call("chat.postEphemeral", "Not counted", after=mark)
    assert differs.body["user"] == CAROL
    assert "*replicas*: proposed `3`, yours `5`" in differs.text
    assert "*window*: proposed `tonight`, yours `now`" in differs.text
    assert [b["value"] for b in differs.buttons] == [f"approve {paused.run_id}", f"reject {paused.run_id}"]
    assert str(e2e.baton.store.runs.get_run(paused.run_id).status) == "paused"

    # a click on Approve with no values approves the proposal: no modal this time
    mark = len(e2e.mock.calls)
    assert (await e2e.slack.click(gate_message, "approve", user=CAROL)).status == 200
    await wait_in_thread(e2e, paused.thread, COMPLETED, after=mark)
    assert not [c for c in e2e.mock.calls[mark:] if c.method == "views.open"]
    store = e2e.baton.store
    [deploy] = [e for e in store.steps.journal([paused.run_id]) if e.node_id == "deploy"]
    assert deploy.output_digest and store.blobs.get_blob(deploy.output_digest) == b"deploy x3 tonight"
    states = {n.node_id: n.state.value for n in e2e.baton.engine.summary(paused.run_id).nodes}
    assert states == {"review": "done", "deploy": "done", "hotfix": "skipped"}
    gate = store.gates.get_gate(paused.run_id, "review")
    assert [a["user"] for a in gate.outcome["approvers"]] == [f"slack:{BOB}", f"slack:{CAROL}"]

    # the gate message, edited once decided: its headline is the outcome, naming both approvers
    headline = f"✅ Approved by name-of-{BOB} and name-of-{CAROL} (2/2)"
    decided = await e2e.mock.wait_for(lambda calls: next(
        (c for c in calls[mark:] if c.method == "chat.update" and c.body.get("ts") == gate_message.ts
         and headline in c.text), None))
    assert decided.text.startswith(headline) and decided.buttons == []
    assert "waits for approval" not in decided.text and "1/2" not in decided.text
