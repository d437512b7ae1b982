"""Option 2 of the fresh-run prompt: abandon that run, then start the new one, each a CAS."""

from __future__ import annotations

from core.commands.parser import parse
from core.commands.quoting import quote_word
from core.store.records import RunStatus
from tests.integration.commands.conftest import Chat

TYPED = 'B said "ship it" \\ then `echo`  twice'


async def _failed(chat: Chat) -> str:
    [started] = await chat.say('run flaky "A"')
    assert started.run_id is not None
    assert (await chat.rest(started.run_id)).status is RunStatus.FAILED
    return started.run_id


async def _option_2(chat: Chat, failed: str) -> str:
    [prompt] = await chat.say(f"run flaky {quote_word(TYPED)}")
    assert prompt.kind == "fresh_run_prompt" and prompt.run_id == failed
    [abandon_then_run] = [b for b in prompt.buttons if b.action == "abandon"]
    return abandon_then_run.command


async def test_option_2_abandons_the_run_then_starts_the_new_one_with_the_typed_message(chat: Chat) -> None:
    failed = await _failed(chat)
    button = await _option_2(chat, failed)

    cancelled, started = await chat.say(button)

    assert (cancelled.kind, cancelled.run_id, cancelled.run_status) == ("run_cancelled", failed, "cancelled")
    assert started.kind == "run_started" and started.run_id not in (None, failed)
    assert started.run_id is not None
    assert chat.engine.args_of(
        chat.store.runs.get_run(started.run_id)
    )["message"] == TYPED  # exactly as typed
    assert chat.store.runs.get_run(failed).status is RunStatus.CANCELLED
    await chat.rest(started.run_id)


async def test_option_2_clicked_again_starts_nothing_and_says_who_won(chat: Chat) -> None:
    failed = await _failed(chat)
    button = await _option_2(chat, failed)
    _, first = await chat.say(button)  # the first click won
    before = {r.id for r in chat.runs()}

    [lost] = await chat.say(button)  # a double click, or a second person

    assert lost.is_error
    assert lost.data["message"] == (
        f"run {failed} is cancelled (cancelled by console:ana), so it was not abandoned; nothing was started")
    assert {r.id for r in chat.runs()} == before  # nothing started
    assert parse(lost.data["hint"].split("`/workflow ")[-1].rstrip("`.")).message == TYPED  # the way on
    assert first.run_id is not None
    await chat.rest(first.run_id)


async def test_option_2_is_one_compare_and_swap_on_the_run_as_it_was_read(chat: Chat) -> None:
    failed = await _failed(chat)
    seen = chat.store.runs.get_run(failed)
    await chat.engine.resume(failed, actor="console:bob")  # between the read and the abandon
    await chat.rest(failed)

    try:
        await chat.engine.abandon(seen, actor="console:ana")
    except Exception as exc:  # the stale read loses, naming who changed the run
        assert "changed while you acted on it" in str(exc)
    else:
        raise AssertionError("abandon of a stale read succeeded")
    assert chat.store.runs.get_run(failed).status is RunStatus.FAILED  # bob's resume stands (it failed again)
