"""Handler behaviours beyond the acceptance cases: authorization, dedupe, NL approval rules,
gates decided twice, progress, arguments and inspection commands."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.commands.model import SPECS
from core.commands.parser import parse
from core.config import Access
from core.redaction import Redactor
from core.render import render
from core.store.records import RunStatus
from tests.integration.commands.conftest import Chat, make_chat

PLAIN = Redactor(())  # these tests are about templates; redaction has its own


async def _paused(chat: Chat, message: str = "x", thread: str | None = "T1", user: str = "ana") -> str:
    [started] = await chat.say(f"run gated --force {message}", user=user)
    assert started.run_id is not None
    if thread:
        await chat.handler.attach_thread(started.run_id, thread)
    assert (await chat.rest(started.run_id)).status is RunStatus.PAUSED
    return started.run_id


@pytest.fixture
async def team(tmp_path: Path, sqlite_url: str) -> AsyncIterator[Chat]:
    access = Access(admins=["slack:UADMIN"], run={"*": ["*"]},
                    approve={"gated": ["slack:UBOSS", "slack:UANA"]}, approver_not_requester=True)
    c = await make_chat(tmp_path, sqlite_url, access, platform="slack")
    yield c
    await c.engine.stop(grace=5)
    await c.handler.drain()
    c.store.close()


async def test_unauthorized_approver_is_refused_politely_and_audited(team: Chat) -> None:
    run_id = await _paused(team)
    [refused] = await team.say("lgtm", user="UEVE", command=False, thread="T1")
    assert refused.is_error and refused.kind == "error"
    assert "not an approver of `gated`" in refused.data["message"] and refused.data["hint"]
    [own] = await team.say(f"approve {run_id}", user="ana")  # the requester, approver_not_requester
    assert own.is_error and "requested run" in own.data["message"]
    assert team.store.runs.get_run(run_id).status is RunStatus.PAUSED
    refusals = [e for e in team.store.events.audit_log(run_id) if e.action == "refused"]
    assert [e.actor for e in refusals] == ["slack:UEVE", "slack:ana"]
    [ok] = await team.say(f"approve {run_id} fine", user="UBOSS")
    assert ok.kind == "gate_decided" and ok.data["by"] == "slack:UBOSS" and ok.data["comment"] == "fine"


async def test_second_decision_is_answered_already_approved_by(team: Chat) -> None:
    run_id = await _paused(team)
    [ok] = await team.say("ship it", user="UBOSS", command=False, thread="T1")
    assert ok.kind == "gate_decided"
    for again in (await team.say(f"approve {run_id}", user="UADMIN"),
                  await team.say(f"reject {run_id}", user="UBOSS"),
                  await team.say("lgtm", user="UBOSS", command=False, thread="T1")):
        [reply] = again
        assert reply.is_error and "already approved by slack:UBOSS" in reply.data["message"]
    await team.rest(run_id)
    assert team.store.runs.get_run(run_id).status is RunStatus.COMPLETED


async def test_duplicate_event_is_processed_once(team: Chat) -> None:
    first = await team.say("run gated --force dup", event_id="evt-1")
    assert [r.kind for r in first] == ["run_started"]
    assert await team.say("run gated --force dup", event_id="evt-1") == []
    assert len(team.runs()) == 1
    await team.rest(team.runs()[0].id)


async def test_nl_approval_counts_in_thread_direct_and_mention_never_in_chatter(team: Chat) -> None:
    run_id = await _paused(team, thread="T1")
    assert await team.say("lgtm", user="UBOSS", command=False) == []  # channel chatter
    assert await team.say("lgtm", user="UBOSS", command=False, thread="other") == []  # unrelated thread
    assert team.store.runs.get_run(run_id).status is RunStatus.PAUSED
    # the adapter removes the bot's own mention from the text
    [by_mention] = await team.say("approve", user="UBOSS", command=False, mentions=True)
    assert by_mention.kind == "gate_decided" and by_mention.run_id == run_id
    await team.rest(run_id)

    second = await _paused(team, thread="T2")
    [direct] = await team.say("reject: too risky", user="UBOSS", command=False, direct=True)
    assert direct.kind == "gate_decided" and not direct.data["approved"]
    assert direct.data["comment"] == "too risky"
    assert team.store.runs.get_run(second).status is RunStatus.CANCELLED

    [hint] = await team.say("lgtm", user="UBOSS", command=False, direct=True)
    assert hint.kind == "no_gate_hint"


async def test_a_reply_in_another_runs_thread_never_decides_this_run(team: Chat) -> None:
    [hello] = await team.say("run flaky --force hi --set marker=/", user="UANA")
    assert hello.run_id is not None
    await team.handler.attach_thread(hello.run_id, "T-hello")
    assert (await team.rest(hello.run_id)).status is RunStatus.COMPLETED
    other = await _paused(team, thread="T-deploy")
    gated_here = await _paused(team, thread=None)  # waits in the channel, no thread of its own

    for text, mentions in (("lgtm", False), ("lgtm", True), ("approve", True), ("ship it", True)):
        answer = await team.say(text, user="UBOSS", command=False, thread="T-hello", mentions=mentions)
        assert all(r.kind != "gate_decided" for r in answer), (text, answer)
        assert [r.kind for r in answer] in ([], ["no_gate_hint"])
    assert team.store.runs.get_run(other).status is RunStatus.PAUSED
    assert team.store.runs.get_run(gated_here).status is RunStatus.PAUSED

    [decided] = await team.say("lgtm", user="UBOSS", command=False, thread="T-deploy", mentions=True)
    assert decided.kind == "gate_decided" and decided.run_id == other  # its own thread: that run only
    assert team.store.runs.get_run(gated_here).status is RunStatus.PAUSED
    await team.rest(other)


async def test_more_than_five_waiting_gates_are_a_choice_list(team: Chat) -> None:
    runs = [await _paused(team, f"n{i}", thread=None) for i in range(7)]
    [which] = await team.say("lgtm", user="UBOSS", command=False, mentions=True)
    assert which.kind == "which_gate" and which.buttons == ()
    [menu] = which.menus
    assert sorted(o.command for o in menu.options) == sorted(f"approve {r}" for r in runs)
    [unclear] = await team.say("hmm", user="UBOSS", command=False, mentions=True)
    assert [len(m.options) for m in unclear.menus] == [7, 7]  # approve which, reject which
    assert {o.command.split()[0] for m in unclear.menus for o in m.options} == {"approve", "reject"}
    assert all(team.store.runs.get_run(r).status is RunStatus.PAUSED for r in runs)


async def test_unclear_reply_gets_a_question_with_buttons(team: Chat) -> None:
    run_id = await _paused(team)
    [question] = await team.say("what does it change?", user="UBOSS", command=False, thread="T1")
    assert question.kind == "approval_question" and question.run_id == run_id
    assert [b.command for b in question.buttons] == [f"approve {run_id}", f"reject {run_id}"]
    [negated] = await team.say("don't approve", user="UBOSS", command=False, thread="T1")
    assert negated.kind == "gate_decided" and not negated.data["approved"]


async def test_several_gates_ask_which_one(team: Chat) -> None:
    first = await _paused(team, "one", thread=None)
    second = await _paused(team, "two", thread=None)
    [which] = await team.say("lgtm", user="UBOSS", command=False, mentions=True)
    assert which.kind == "which_gate"
    assert {b.command for b in which.buttons} == {f"approve {first}", f"approve {second}"}
    assert team.store.runs.get_run(first).status is RunStatus.PAUSED


async def test_paused_gate_prompt_offers_approve_and_resume_is_refused(team: Chat) -> None:
    run_id = await _paused(team, thread=None)
    [prompt] = await team.say("run gated again")
    assert prompt.kind == "fresh_run_prompt"
    assert prompt.buttons[0].command == f"approve {run_id}"
    [refused] = await team.say(f"resume {run_id}")
    assert refused.is_error and "approve" in refused.data["hint"]


async def test_one_progress_message_per_run_then_the_final_reply(chat: Chat) -> None:
    [started] = await chat.say("run gated --force p")
    run_id = started.run_id
    assert run_id is not None
    await chat.rest(run_id)
    progress = [r for r in chat.outbox if r.kind == "progress"]
    assert progress and {r.how.replace_key for r in progress} == {f"progress:{run_id}"}
    assert progress[-1].run_status == "paused"
    last = chat.outbox[-1]
    assert last.kind == "gate_waiting" and last.buttons[0].command == f"approve {run_id}"
    for reply in chat.outbox:
        assert reply.run_id == run_id and reply.run_status and reply.to.platform == "console"
        assert render(reply, "console", PLAIN)


async def test_completed_run_is_not_resumable_and_points_to_resume_from(chat: Chat) -> None:
    marker = chat.root / "m"
    marker.write_text("x")
    [started] = await chat.say(f"run flaky --set marker={marker} hello")
    assert started.run_id
    await chat.rest(started.run_id)
    [refused] = await chat.say(f"resume {started.run_id}")
    assert refused.is_error and f"--resume-from {started.run_id}" in refused.data["hint"]
    assert (refused.run_id, refused.run_status) == (started.run_id, "completed")
    [again] = await chat.say(f"run flaky --resume-from {started.run_id} bye")
    assert again.kind == "run_started" and again.data["resumed_from"] == started.run_id
    args = chat.engine.args_of(chat.store.runs.get_run(again.run_id))  # type: ignore[arg-type]
    assert args["message"] == "bye" and args["marker"] == str(marker)
    await chat.rest(again.run_id)  # type: ignore[arg-type]


async def test_args_handle_set_and_args_from(chat: Chat) -> None:
    [started] = await chat.say("run flaky --set marker=/no --set extra.deep=2 hi")
    assert started.run_id
    await chat.rest(started.run_id)
    [shown] = await chat.say(f"args {started.run_id}")
    assert json.loads(shown.data["json"]) == {"extra": {"deep": 2}, "marker": "/no", "message": "hi"}
    handle = shown.data["handle"]
    [by_handle] = await chat.say(f"run flaky --force --args @{handle}")
    [from_run] = await chat.say(f"run flaky --args-from {started.run_id} --set extra.deep=3")
    for reply in (by_handle, from_run):
        assert reply.kind == "run_started" and reply.run_id
        await chat.rest(reply.run_id)
    assert chat.store.runs.get_run(
        by_handle.run_id
    ).args_digest == chat.store.runs.get_run(started.run_id).args_digest  # type: ignore[arg-type]
    assert chat.engine.args_of(chat.store.runs.get_run(from_run.run_id))["extra"] == {"deep": 3}  # type: ignore[arg-type]


async def test_inputs_are_validated_before_anything_runs(chat: Chat) -> None:
    [bad] = await chat.say("run flaky --args '{\"marker\": {\"not\": \"text\"}}'")
    assert bad.is_error and "marker" in bad.data["message"]
    [typed] = await chat.say("run flaky --set marker='{\"not\": \"text\"}'")  # a string input keeps the text
    assert typed.kind == "run_started"
    await chat.rest(typed.run_id)
    assert chat.engine.args_of(chat.store.runs.get_run(typed.run_id))["marker"] == '{"not": "text"}'  # type: ignore[arg-type]
    assert len(chat.runs()) == 1


async def test_usage_and_unknown_errors_are_one_line_each(chat: Chat) -> None:
    for text, cause in (("rn flaky", "did you mean `run`?"), ("run nope", "nope"), ("resume zzzz", "zzzz"),
                        ('run flaky "open', "unbalanced quote")):
        [reply] = await chat.say(text)
        assert reply.is_error and cause in reply.data["message"], text
        assert "\n" not in reply.data["message"] and reply.data["hint"] and "\n" not in reply.data["hint"]
        assert "Traceback" not in "".join(render(reply, "slack", PLAIN))


async def test_inspection_commands(chat: Chat) -> None:
    (chat.root / "workflows" / "broken.yaml").write_text("name: broken\nnodes: [}\n")
    [listing] = await chat.say("list")
    assert {w["name"] for w in listing.data["workflows"]} == {"flaky", "gated"}
    assert [b["name"] for b in listing.data["broken"]] == ["broken"]
    [none] = await chat.say("status")
    assert none.is_error and "No runs here yet" in none.data["message"]
    run_id = await _paused(chat, thread=None)
    [status] = await chat.say("status")
    assert status.kind == "status" and status.run_id == run_id and status.run_status == "paused"
    [plan] = await chat.say(f"plan {run_id}")
    assert plan.kind == "plan" and [n["node_id"] for n in plan.data["nodes"]] == ["prepare", "review", "ship"]
    [runs] = await chat.say("runs")
    assert [r["id"] for r in runs.data["runs"]] == [run_id]
    [audit] = await chat.say(f"audit {run_id}")
    assert "command" in [e["action"] for e in audit.data["events"]]
    [helped] = await chat.say("help run")
    assert helped.kind == "help_topic" and "--resume-from" in helped.data["usage"]


async def test_help_and_list_show_only_what_the_user_may_use(tmp_path: Path, sqlite_url: str) -> None:
    access = Access(run={"flaky": ["console:ana"]}, approve={})
    chat = await make_chat(tmp_path, sqlite_url, access)
    try:
        [ana_help] = await chat.say("help", user="ana")
        [bob_help] = await chat.say("help", user="bob")
        ana = {c["name"] for c in ana_help.data["commands"]}
        bob = {c["name"] for c in bob_help.data["commands"]}
        assert "run" in ana and "approve" not in ana
        assert "run" not in bob and "status" in bob
        [bob_list] = await chat.say("list", user="bob")
        assert bob_list.data["workflows"] == []
        [ana_list] = await chat.say("list", user="ana")
        assert [w["name"] for w in ana_list.data["workflows"]] == ["flaky"]
        [denied] = await chat.say("run flaky hi", user="bob")
        assert denied.is_error and "may not run `flaky`" in denied.data["message"]
    finally:
        await chat.engine.stop(grace=5)
        chat.store.close()


@pytest.mark.parametrize("sub", sorted(SPECS))
async def test_help_for_each_command_shows_its_usage_and_an_example(chat: Chat, sub: str) -> None:
    [helped] = await chat.say(f"help {sub}")
    assert helped.kind == "help_topic" and helped.how.ephemeral
    assert helped.data["usage"] == SPECS[sub].usage and parse(helped.data["example"])  # the example parses
    for platform in ("console", "slack", "discord"):
        text = "\n".join(render(helped, platform, PLAIN))
        assert "Usage:" in text and "Example:" in text and "/workflow" in text, (platform, text)


async def test_help_on_a_command_the_user_may_not_use_is_refused(tmp_path: Path, sqlite_url: str) -> None:
    chat = await make_chat(tmp_path, sqlite_url, Access(run={"flaky": ["console:ana"]}, approve={}))
    try:
        [refused] = await chat.say("help approve", user="ana")
        assert refused.is_error and "approve" in refused.data["message"] and refused.data["hint"]
    finally:
        await chat.engine.stop(grace=5)
        chat.store.close()


async def test_commands_written_to_the_bot_are_answered_as_commands(team: Chat) -> None:
    run_id = await _paused(team, thread="T1")

    [status] = await team.say("status", user="UBOSS", command=False, direct=True)
    [usage] = await team.say("help abandon", user="UBOSS", command=False, mentions=True)
    [approval] = await team.say(f"approve {run_id} ship it", user="UBOSS", command=False, direct=True)

    assert (status.kind, status.run_id) == ("status", run_id)  # not "Nothing waits for approval here"
    assert usage.kind == "help_topic" and usage.data["name"] == "abandon"
    assert approval.kind == "gate_decided" and approval.data["comment"] == "ship it"
    await team.rest(run_id)


async def test_a_reply_starting_with_reject_still_addresses_the_gate(team: Chat) -> None:
    run_id = await _paused(team, thread="T1")

    [answer] = await team.say("reject it, the title is wrong", user="UBOSS", command=False, direct=True)

    assert not answer.is_error and answer.run_id == run_id  # a reply to the gate, not `reject <run>`
    assert answer.kind in ("gate_decided", "approval_question")


async def test_chatter_in_a_thread_that_holds_no_run_leaves_nothing_behind(team: Chat) -> None:
    await _paused(team, thread="T-run")
    before = team.store.events.forget_events(time.time() + 60)  # the events handled so far

    for n in range(200):
        assert await team.say(f"chatter {n}", user="UBOSS", command=False, thread="T-other") == []

    assert team.store.events.forget_events(time.time() + 60) == 0 and before > 0


async def test_a_first_word_that_names_no_run_is_part_of_the_reason_or_comment(team: Chat) -> None:
    run_id = await _paused(team, "one", thread=None)
    [rejected] = await team.say("reject too risky", user="UBOSS")  # not "No run has the id 'too'"
    assert rejected.kind == "gate_decided" and not rejected.data["approved"]
    assert rejected.run_id == run_id and rejected.data["comment"] == "too risky"
    assert (await team.rest(run_id)).status is RunStatus.CANCELLED
    assert "too risky" in (team.store.runs.get_run(run_id).reason or "")

    approved = await _paused(team, "two", thread=None)
    [ok] = await team.say("approve looks fine", user="UBOSS")
    assert ok.kind == "gate_decided" and ok.run_id == approved and ok.data["comment"] == "looks fine"
    commands = [e for e in team.store.events.audit_log(approved) if e.action == "command"]
    assert commands and commands[-1].details["text"] == "approve looks fine"  # audited on the run


async def test_a_first_word_that_is_a_run_id_prefix_still_addresses_that_run(team: Chat) -> None:
    first, second, third = [await _paused(team, str(n), thread=None) for n in range(3)]
    [ok] = await team.say(f"approve {first[:6]} fine", user="UBOSS")  # a prefix of one run's id
    assert ok.kind == "gate_decided" and ok.run_id == first and ok.data["comment"] == "fine"
    assert team.store.runs.get_run(second).status is RunStatus.PAUSED
    [which] = await team.say("reject too risky", user="UBOSS")  # no run "too", two gates here: which?
    assert which.kind == "which_gate"
    assert {b.command for b in which.buttons} == {f"reject {second}", f"reject {third}"}
    assert team.store.runs.get_run(third).status is RunStatus.PAUSED
    await team.rest(first)


async def test_an_ambiguous_run_id_prefix_asks_and_no_gate_means_no_such_run(team: Chat) -> None:
    [missing] = await team.say("reject too risky", user="UBOSS")  # nothing waits: the run is unknown
    assert missing.is_error and "No run has the id 'too'" in missing.data["message"]
    runs = [await _paused(team, str(n), thread=None) for n in range(17)]
    by_first = {}
    for run_id in runs:
        by_first.setdefault(run_id[0], []).append(run_id)
    shared = next(ids for ids in by_first.values() if len(ids) > 1)  # 17 ids, 16 first characters
    # one character is a comment's first word, never a run id (`approve a small change`):
    # seventeen gates wait here, so Baton asks which
    [asked] = await team.say(f"approve {shared[0][0]} fine", user="UBOSS")
    assert asked.kind == "which_gate" and asked.data["total"] == 17
    assert all(team.store.runs.get_run(r).status is RunStatus.PAUSED for r in runs)


async def test_help_approve_shows_the_choice_and_the_values_syntax(chat: Chat) -> None:
    [helped] = await chat.say("help approve")
    text = "\n".join(render(helped, "console", PLAIN))
    assert "/workflow approve <run> [choice] [name=value …] [comment]" in text
    assert "replicas=5" in text and "proposed" in text
    assert parse(helped.data["example"]) == parse("approve 3f9a hotfix replicas=5 looks good")
