"""A run that needs inputs asks for them in a Slack modal: opened with the request's trigger_id,
checked by the core when submitted (errors onto the fields), then started with those values."""

from __future__ import annotations

import json

from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import BOB
from tests.e2e.slack.mock_slack import Call
from tests.e2e.slack.steps import ACK_LIMIT, STARTED, command


def opened_view(call: Call) -> dict[str, object]:
    view = call.body["view"]
    return json.loads(view) if isinstance(view, str) else view  # type: ignore[no-any-return]


async def test_a_run_missing_inputs_opens_a_modal_and_the_submission_starts_it(e2e: SlackE2E) -> None:
    mark = await command(e2e, 'run deploy "go" --set replicas=3')
    trigger = e2e.slack.last_trigger

    opened = await e2e.mock.wait_call("views.open", after=mark)

    assert opened.body["trigger_id"] == trigger  # the slash command's own trigger_id
    view = opened_view(opened)
    blocks = {b["block_id"]: b for b in view["blocks"]}  # type: ignore[attr-defined]
    assert list(blocks) == ["field:service", "field:replicas", "field:environment"]
    assert blocks["field:service"]["optional"] is False
    assert blocks["field:replicas"]["element"]["initial_value"] == "3"  # what was typed, kept
    options = blocks["field:environment"]["element"]["options"]
    assert [o["value"] for o in options] == ["staging", "production"]
    await e2e.settle()
    assert not e2e.mock.of("chat.postMessage", "chat.postEphemeral")  # the modal asks, nothing else

    refused = await e2e.slack.submit(opened, {"service": "web", "replicas": "three"}, user=BOB)
    assert refused.status == 200 and refused.seconds < ACK_LIMIT, refused.stalls
    assert json.loads(refused.body) == {"response_action": "errors", "errors": {
        "field:replicas": 'input `replicas` must be an integer, got text "three"'}}
    assert e2e.baton.store.runs.recent_runs() == []

    done = await e2e.slack.submit(opened, {"service": "web", "replicas": "5", "environment": "production"},
                                  user=BOB)
    assert done.status == 200 and done.body == ""
    started = await e2e.mock.wait_call("chat.postMessage", STARTED, after=mark)
    [run] = e2e.baton.store.runs.recent_runs()
    assert run.id in started.text and run.requester == f"slack:{BOB}"  # the person who submitted
    assert e2e.baton.engine.args_of(run) == {"service": "web", "replicas": 5, "environment": "production",
                                             "message": "go"}
    await e2e.baton.engine.wait(run.id, timeout=30)


async def test_when_the_modal_cannot_open_the_reply_says_what_to_type_and_run_opens_it(e2e: SlackE2E) -> None:
    e2e.mock.fail_next("views.open", "expired_trigger_id")
    mark = await command(e2e, "run deploy")

    told = await e2e.mock.wait_call("chat.postEphemeral", "needs this input", after=mark)
    assert "/workflow run deploy --set service=…" in told.text
    mark = len(e2e.mock.calls)
    answer = await e2e.slack.click(told, "form")
    assert answer.status == 200

    opened = await e2e.mock.wait_call("views.open", after=mark)
    assert opened.body["trigger_id"] == e2e.slack.last_trigger  # the click's trigger_id
    assert e2e.baton.store.runs.recent_runs() == []
