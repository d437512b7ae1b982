"""What a person mistypes, through the real handler: every mistake is one reply with one line
of cause and one line of next step, on every platform, and nothing runs or is lost."""

from __future__ import annotations

import logging

import pytest

from core.commands.messages import ChatMessage, Reply
from core.redaction import Redactor
from core.render import platforms, render
from core.store.records import RunStatus
from tests.factories import create_run
from tests.integration.commands.conftest import Chat

PLAIN = Redactor(())  # these tests are about templates; redaction has its own

DEEP = "[" * 3000 + "]" * 3000


def assert_two_lines(reply: Reply, cause: str) -> None:
    """One error reply: the cause (containing `cause`) and the next step, on every platform."""
    assert reply.is_error and reply.kind == "error", reply
    assert cause in reply.data["message"], reply.data
    assert "\n" not in reply.data["message"] and reply.data["hint"] and "\n" not in reply.data["hint"]
    for platform in platforms():
        text = "\n".join(render(reply, platform, PLAIN))
        lines = [line for line in text.splitlines() if line.strip()]
        assert len(lines) == 2 and "Traceback" not in text, (platform, text)


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("run", "`run` needs <name>"),
        ("run nope", "no workflow named `nope`"),
        ("run flaky --args {bad", "not valid JSON"),
        ("run flaky --args @nohandle", "not an args handle"),
        ("run flaky --args @abcd1234", "No args of a run you may view match that handle"),
        ("run flaky --args '[1, 2]'", "must be a JSON object"),
        (f"run flaky --args '{DEEP}'", "levels"),
        ("run flaky --set " + ".".join(["a"] * 500) + "=1", "levels"),
        ("run flaky --set", "`--set` needs a value"),
        ("run flaky --sett x=1", "did you mean `--set`?"),
        ('run flaky "it\'s `open', "unbalanced quote"),
        ("plan", "`plan` needs <run>"),
        ("audit", "`audit` needs <run>"),
        ("args", "`args` needs <run>"),
        ("invalidate", "`invalidate` needs <run>"),
        ("resolve r1 n maybe", "`maybe` is not one of done, retry, fail"),
        ("resume nosuchrun", "nosuchrun"),
        ("help nosuch", "unknown command `nosuch`"),
        ("statsu", "did you mean `status`?"),
    ],
)
async def test_a_mistyped_command_is_one_cause_and_one_next_step(chat: Chat, text: str, cause: str) -> None:
    [reply] = await chat.say(text)
    assert_two_lines(reply, cause)
    assert chat.runs() == []  # nothing ran


async def test_a_command_typed_without_its_prefix_and_misspelt_gets_a_suggestion(chat: Chat) -> None:
    [reply] = await chat.say("runn flaky hi", command=False)  # the console sends it as plain text
    assert_two_lines(reply, "did you mean `run`?")
    assert "/workflow run <name>" in reply.data["hint"]
    [plain] = await chat.say("ship it", command=False)  # an ordinary word is not a near miss
    assert plain.kind == "no_gate_hint"


async def test_a_prefix_of_two_runs_names_both(chat: Chat) -> None:
    digest = chat.store.blobs.put_blob(b"{}")
    made = [create_run(chat.store, workflow="flaky", platform="console", conversation="c1", thread=None,
                                  requester="console:ana", args_digest=digest, status=RunStatus.FAILED)
            for _ in range(17)]  # 17 ids, 16 hex digits: two share a first character
    first = {r.id[0] for r in made}
    prefix = next(c for c in sorted(first) if sum(r.id[0] == c for r in made) > 1)
    sharing = [r.id for r in made if r.id[0] == prefix]

    [reply] = await chat.say(f"resume {prefix}")

    assert_two_lines(reply, "matches several runs")
    named = [run_id for run_id in sharing if run_id in reply.data["message"]]
    assert len(named) == min(len(sharing), 5)  # the first five of them, then "…"
    assert ("…" in reply.data["message"]) == (len(sharing) > 5)
    assert {chat.store.runs.get_run(r).status for r in sharing} == {RunStatus.FAILED}  # none resumed


async def test_invalidate_downstream_and_wrong_steps(chat: Chat) -> None:
    [started] = await chat.say("run gated --force v1")
    assert started.run_id
    await chat.rest(started.run_id)
    [approved] = await chat.say(f"approve {started.run_id}")
    assert approved.kind == "gate_decided"
    assert (await chat.rest(started.run_id)).status is RunStatus.COMPLETED

    [dropped] = await chat.say(f"invalidate {started.run_id} prepare --downstream")
    assert dropped.kind == "invalidated" and dropped.data["nodes"][0] == "prepare"
    assert set(dropped.data["nodes"]) >= {"prepare", "ship"}
    text = "\n".join(render(dropped, "console", PLAIN))  # a completed run is not resumed: say what is
    assert f"/workflow run gated --resume-from {started.run_id}" in text
    [plan] = await chat.say(f"plan {started.run_id}")
    actions = {n["node_id"]: n["action"] for n in plan.data["nodes"]}
    assert actions["prepare"] == "runs" and actions["ship"] == "runs"

    [wrong] = await chat.say(f"invalidate {started.run_id} nosuch")
    assert_two_lines(wrong, "no step `nosuch`")
    assert wrong.data["hint"] == "Usage: /workflow invalidate <run> <node> [--downstream]"  # as the parser's
    [done] = await chat.say(f"resolve {started.run_id} ship done")
    assert_two_lines(done, "only a run that needs attention")


async def test_an_unexpected_failure_is_one_generic_line_and_its_traceback_only_in_the_log(
    chat: Chat, caplog: pytest.LogCaptureFixture
) -> None:
    # An adapter bug is the unexpected case the handler must survive: a message whose text
    # is not text. Nothing of ours is replaced; the message itself is the trigger.
    broken = ChatMessage(platform="console", conversation="c1", user="ana", text=None,  # type: ignore[arg-type]
                         event_id="broken-1")
    with caplog.at_level(logging.ERROR, logger="baton.handler"):
        [reply] = await chat.handler.handle(broken)

    assert_two_lines(reply, "Something unexpected went wrong")
    [record] = [r for r in caplog.records if r.name == "baton.handler"]
    assert record.exc_info is not None and getattr(record, "action", None) == "handle"
    assert getattr(record, "event_id", None) == "broken-1"
    [ok] = await chat.say("help")  # the handler goes on serving
    assert ok.kind == "help"
