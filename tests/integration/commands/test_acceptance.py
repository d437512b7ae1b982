"""DESIGN.md's five acceptance cases, through the Handler on a real Engine and SQLite."""

from __future__ import annotations

from core.commands.model import RunCommand
from core.commands.parser import parse
from core.store.records import RunStatus
from tests.integration.commands.conftest import Chat


async def _failed_run(chat: Chat, message: str = "A") -> str:
    [reply] = await chat.say(f"run flaky {message}")
    assert reply.kind == "run_started" and reply.how.starts_thread and reply.run_id
    run = await chat.rest(reply.run_id)
    assert run.status is RunStatus.FAILED
    assert (await chat.final(run.id)).kind == "run_failed"
    return run.id


async def test_1_fresh_run_with_a_failed_run_prompts_and_runs_nothing(chat: Chat) -> None:
    failed = await _failed_run(chat)
    before = len(chat.runs())
    [prompt] = await chat.say('run flaky "B"')
    assert prompt.kind == "fresh_run_prompt" and prompt.run_id == failed
    assert prompt.run_status == "failed"
    assert len(chat.runs()) == before  # nothing executes
    assert [b.command for b in prompt.buttons] == [
        f"resume {failed}", f"run flaky --replace {failed} B", "run flaky --force B"]
    assert parse(prompt.buttons[2].command) == RunCommand("flaky", message="B", force=True)
    assert prompt.data["preview"] == "A"


async def test_2_force_starts_fresh_and_leaves_the_failed_run_untouched(chat: Chat) -> None:
    failed = await _failed_run(chat)
    old = chat.store.runs.get_run(failed)
    [reply] = await chat.say('run flaky --force "B"')
    assert reply.kind == "run_started" and reply.run_id != failed
    assert chat.engine.args_of(chat.store.runs.get_run(reply.run_id))["message"] == "B"
    await chat.rest(reply.run_id)
    assert chat.store.runs.get_run(failed) == old


async def test_3_abandon_failed_run_then_run_no_longer_prompts(chat: Chat) -> None:
    failed = await _failed_run(chat)
    [reply] = await chat.say(f"abandon {failed[:8]}")
    assert reply.kind == "run_cancelled" and reply.run_status == "cancelled"
    assert chat.store.runs.get_run(failed).status is RunStatus.CANCELLED
    [again] = await chat.say("run flaky B")
    assert again.kind == "run_started"
    [refused] = await chat.say(f"abandon {failed}")
    assert refused.is_error and "already cancelled" in refused.data["message"]


async def test_4_approval_by_reply_or_button_continues_that_run_without_prompt(chat: Chat) -> None:
    for how in ("reply", "button"):
        [started] = await chat.say(f"run gated --force {how}")
        run_id = started.run_id
        assert run_id is not None
        await chat.handler.attach_thread(run_id, f"thread-{how}")
        assert (await chat.rest(run_id)).status is RunStatus.PAUSED
        waiting = await chat.final(run_id)
        assert waiting.kind == "gate_waiting" and waiting.data["question"] == f"Ship prepared {how}?"
        assert waiting.to.thread == f"thread-{how}"
        before = len(chat.runs())
        if how == "reply":
            [decided] = await chat.say("lgtm", command=False, thread=f"thread-{how}", direct=False)
        else:
            [decided] = await chat.say(waiting.buttons[0].command)
        assert decided.kind == "gate_decided" and decided.run_id == run_id
        assert (await chat.rest(run_id)).status is RunStatus.COMPLETED
        assert (await chat.final(run_id)).kind == "run_completed"
        assert len(chat.runs()) == before  # no fresh run, no prompt


async def test_5_resume_continues_that_run_with_no_prompt_and_no_fresh_run(chat: Chat) -> None:
    marker = chat.root / "marker"
    [started] = await chat.say(f"run flaky --set marker={marker} A")
    run_id = started.run_id
    assert run_id is not None
    assert (await chat.rest(run_id)).status is RunStatus.FAILED
    marker.write_text("now it exists")
    before = len(chat.runs())
    [resumed] = await chat.say(f"resume {run_id}")
    assert resumed.kind == "run_resumed" and resumed.run_id == run_id
    assert (await chat.rest(run_id)).status is RunStatus.COMPLETED
    assert len(chat.runs()) == before
    [done] = [r for r in chat.outbox if r.kind == "run_completed" and r.run_id == run_id]
    assert done.data["output"] == "A"
