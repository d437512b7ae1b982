"""A gate's timeout on Slack: nobody decided within `timeout`, so `on_timeout` ends the run
(reject: cancelled; fail: failed, its reason naming the timeout), the gate message is edited to
say so with its buttons withdrawn, the run's thread is told, and a late click on the old
message's Approve is answered "already decided" and approves nothing. Deadlines are fired with a
controlled time (`GateDeadlines.tick(now)`), as the bot's loop does. Signed requests into the real
Bolt app; what Baton posts, read from the mock Web API."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from core.config import Access, Settings
from tests.e2e.slack.conftest import BOT_TOKEN, SIGNING_SECRET, SlackE2E
from tests.e2e.slack.harness import ANA, BOB
from tests.e2e.slack.mock_slack import Call
from tests.e2e.slack.steps import COMPLETED, WAITING, start, wait_in_thread

CAROL = "U0CAROL"
GATE = """
name: timed
nodes:
  - id: review
    approval:
      question: "Ship it?"
      approvers: [group:sre]
      timeout: 1h
      on_timeout: {on_timeout}
  - id: ship
    depends_on: [review]
    bash: printf shipped
    replay: pure
"""


@pytest.fixture(params=["reject", "fail"])
def on_timeout(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str, on_timeout: str) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "timed.yaml").write_text(textwrap.dedent(GATE.format(on_timeout=on_timeout)))
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=sqlite_url, workflow_dirs=[workflows], data_dir=tmp_path / "data", tool_modules=[],
        access=Access.model_validate({
            "groups": {"sre": [f"slack:{BOB}", f"slack:{CAROL}"]}, "run": {"*": [f"slack:{ANA}"]}}),
        slack_bot_token=BOT_TOKEN,  # type: ignore[arg-type]
        slack_signing_secret=SIGNING_SECRET,  # type: ignore[arg-type]
    )  # fmt: skip


async def test_a_gate_that_times_out_ends_the_run_and_withdraws_its_buttons(
    e2e: SlackE2E, on_timeout: str
) -> None:
    paused = await start(e2e, "run timed", rests_with=WAITING)
    gate_message = paused.rest
    offered = [b["value"] for b in gate_message.buttons]
    assert offered == [f"approve {paused.run_id}", f"reject {paused.run_id}"]
    # a one-hour timeout, read a moment after it was set ("1h" or, on a slow machine, "59m 59s")
    assert "expires in 1h" in gate_message.text or "expires in 59m" in gate_message.text
    await e2e.settle()
    store = e2e.baton.store
    gate = store.gates.get_gate(paused.run_id, "review")
    assert e2e.baton.deadlines is not None

    mark = len(e2e.mock.calls)
    assert await e2e.baton.deadlines.deadlines.tick(now=gate.created_at + 3599) == []  # not yet due
    [fired] = await e2e.baton.deadlines.deadlines.tick(now=gate.created_at + 3600)
    assert fired.action == "timeout"

    run = store.runs.get_run(paused.run_id)
    if on_timeout == "reject":
        assert str(run.status) == "cancelled"
    else:
        assert str(run.status) == "failed"
        assert run.reason and "timed out at `review`" in run.reason and "no decision within 1h" in run.reason
    decided = store.gates.get_gate(paused.run_id, "review")
    assert str(decided.status) == "rejected" and decided.decided_by == "baton"
    assert [e.action for e in store.events.audit_log(paused.run_id)].count("timeout") == 1

    told = await wait_in_thread(e2e, paused.thread, "had no decision within 1h", after=mark)
    outcome = "rejected" if on_timeout == "reject" else "failed"
    assert f"{outcome}; the run ends here" in told.text and paused.run_id in told.text

    def edited(calls: list[Call]) -> Call | None:
        return next((c for c in calls[mark:] if c.method == "chat.update"
                     and c.body.get("ts") == gate_message.ts and "No decision in time" in c.text), None)

    edit: Call = await e2e.mock.wait_for(edited)
    assert edit.buttons == [] and edit.menus == []  # withdrawn
    assert ("cancelled" if on_timeout == "reject" else "failed") in edit.text
    assert "Approved" not in edit.text and "Rejected by" not in edit.text

    # Bob clicks Approve on the old message (his client had not refreshed yet): refused, clearly
    await e2e.settle()
    mark = len(e2e.mock.calls)
    answer = await e2e.slack.click(gate_message, "approve", user=BOB)
    assert answer.status == 200

    def refusal(calls: list[Call]) -> Call | None:
        return next((c for c in calls[mark:] if c.method in ("response_url", "chat.postEphemeral")
                     and c.text), None)

    said: Call = await e2e.mock.wait_for(refusal)
    did = {"reject": "rejected it and cancelled the run", "fail": "failed the run"}[on_timeout]
    assert f"already timed out: nobody decided in time, so its timeout rule {did}" in said.text, said.text
    await e2e.settle()
    assert str(store.runs.get_run(paused.run_id).status) == str(run.status)  # nothing approved
    assert str(store.gates.get_gate(paused.run_id, "review").status) == "rejected"
    assert not [e for e in store.steps.journal([paused.run_id]) if e.node_id == "ship"]
    assert not [c for c in e2e.mock.calls[mark:] if c.method == "chat.postMessage" and "Approved" in c.text]


@pytest.mark.parametrize("on_timeout", ["approve", "skip"])
async def test_a_gate_opened_by_its_timeout_rule_says_so_and_the_run_goes_on(
    e2e: SlackE2E, on_timeout: str
) -> None:
    paused = await start(e2e, "run timed", rests_with=WAITING)
    await e2e.settle()
    store = e2e.baton.store
    gate = store.gates.get_gate(paused.run_id, "review")
    assert e2e.baton.deadlines is not None

    mark = len(e2e.mock.calls)
    [fired] = await e2e.baton.deadlines.deadlines.tick(now=gate.created_at + 3600)
    assert fired.action == "timeout"
    told = await wait_in_thread(e2e, paused.thread, "had no decision within 1h", after=mark)
    assert f"(on_timeout: {on_timeout}); the run continues" in told.text
    await wait_in_thread(e2e, paused.thread, COMPLETED, after=mark)
    states = {n.node_id: n.state.value for n in e2e.baton.engine.summary(paused.run_id).nodes}
    opened = "done" if on_timeout == "approve" else "skipped"  # a skip: the gate and its dependents
    assert states == {"review": opened, "ship": opened}

    def edited(calls: list[Call]) -> Call | None:
        return next((c for c in calls[mark:] if c.method == "chat.update"
                     and c.body.get("ts") == paused.rest.ts and "No decision in time" in c.text), None)

    edit: Call = await e2e.mock.wait_for(edited)
    assert edit.buttons == []
    rule = {"approve": "was approved by its timeout rule", "skip": "skips the gate by its timeout rule"}
    assert rule[on_timeout] in edit.text and "Approved by" not in edit.text

    await e2e.settle()
    mark = len(e2e.mock.calls)
    await e2e.slack.click(paused.rest, "reject", user=BOB)  # too late to reject it
    said: Call = await e2e.mock.wait_call("chat.postEphemeral", "already timed out", after=mark)
    did = {"approve": "approved it", "skip": "skipped it"}[on_timeout]
    assert said.body["user"] == BOB and f"nobody decided in time, so its timeout rule {did}" in said.text
    assert str(store.runs.get_run(paused.run_id).status) == "completed"
