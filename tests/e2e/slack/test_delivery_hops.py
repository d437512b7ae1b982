"""A reply crosses from the core to the adapter once (#27): from a `/workflow run` to its
delivered completion, every call between `core/` and `adapters/slack/` is recorded; the adapter
never calls a delivery decision (places, edits, threads, follow-ups) back in the core, and the
core calls it once per message it posts or edits."""

from __future__ import annotations

from tests.e2e.crossings import recorded
from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.steps import COMPLETED, start


async def test_a_run_to_its_completion_crosses_to_the_adapter_once_per_message(e2e: SlackE2E) -> None:
    mark = len(e2e.mock.calls)
    with recorded("adapters.slack") as crossings:
        run = await start(e2e, 'run notes "v2"', rests_with=COMPLETED)
        await e2e.settle()
    assert run.run_id
    sent = [c for c in e2e.mock.calls[mark:] if c.method in ("chat.postMessage", "chat.update")]
    # the adapter hands the request to the core once (which accepts, handles it and hands its
    # answer to the delivery service); it never calls a delivery decision back
    assert crossings.decisions() == {}, crossings.callbacks()
    assert crossings.callbacks().get("core.commands.requests.Requests.command") == 1
    assert "core.delivery.service.DeliveryService.answer" not in crossings.callbacks()
    transport = crossings.to_adapter("adapters.slack.sender.SlackSender")
    assert transport.get("post", 0) + transport.get("edit", 0) == len(sent), (transport, sent)
    print(f"\nslack: {len(sent)} messages; core -> adapter {transport}; "
          f"adapter -> core {crossings.callbacks()}")
