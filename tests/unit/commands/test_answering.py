"""`answering`: the request steps both chat platforms take (Slack's `requests.py`, Discord's
`interactions.py`): a run refused where Baton cannot post, a click, a form's values, a failure
told, a refused form's answer; the handler faked at its edge."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

from core.commands.answering import clicked, failure_told, form_refused, run_refused, submitted
from core.commands.forms import FormResult
from core.commands.messages import ChatMessage, Form, Reply
from core.commands.replies import FORM_ACTION


class Asking:
    def __init__(self, result: FormResult) -> None:
        self.result = result
        self.read: list[tuple[str, dict[str, str]]] = []

    def read_form(self, message: ChatMessage, values: Mapping[str, str]) -> FormResult:
        self.read.append((message.text, dict(values)))
        return self.result


class Handler:
    def __init__(self, *answer: Reply, form: FormResult | None = None) -> None:
        self.answer = list(answer)
        self.ops: list[tuple[Any, ...]] = []
        self.asking = Asking(form or FormResult(None, {}))

    def accept(self, message: ChatMessage) -> bool:
        self.ops.append(("accept", message.text))
        return True

    def finish(self, message: ChatMessage) -> None:
        self.ops.append(("finish", message.text))

    async def handle(self, message: ChatMessage, *, accepted: bool = False) -> list[Reply]:
        self.ops.append(("handle", message.text, accepted))
        return self.answer

    async def decide(self, ballot: Any, message: ChatMessage, *, accepted: bool = False) -> list[Reply]:
        self.ops.append(("decide", ballot.run, ballot.choice, accepted))
        return self.answer


def _message(text: str) -> ChatMessage:
    return ChatMessage(platform="slack", conversation="C1", user="U1", text=text, event_id="e1")


def _acknowledge(answer: bool, ops: list[tuple[Any, ...]]) -> Any:
    async def acknowledge() -> bool:
        ops.append(("ack",))
        return answer
    return acknowledge


def test_a_refused_form_is_a_private_error_with_its_button() -> None:
    form = Form(kind="run", title="Run deploy", submit="Run", command="run deploy")
    reply = form_refused(form, {"replicas": "not a number", "": "one more thing"})
    assert reply.is_error and reply.how.ephemeral
    assert reply.data["message"] == "replicas: not a number · one more thing"
    assert [b.action for b in reply.buttons] == [FORM_ACTION]


async def test_a_run_where_baton_cannot_post_is_refused_and_told_and_other_commands_are_not_checked() -> None:
    told: list[str] = []
    asked: list[str] = []

    async def tell(text: str) -> None:
        told.append(text)

    async def refusal() -> str | None:
        asked.append("checked")
        return "Nothing was started."

    assert await run_refused("run notes", refusal, tell, "C1")
    assert told == ["Nothing was started."]
    assert not await run_refused("status", refusal, tell, "C1")  # starts no run: never checked
    assert asked == ["checked"]

    async def allowed() -> str | None:
        return None

    assert not await run_refused("run notes", allowed, tell, "C1")
    assert told == ["Nothing was started."]


async def test_a_click_is_a_gates_ballot_or_the_clickers_command_and_may_retire_its_buttons() -> None:
    done = Reply(kind="text", data={"text": "ok"})
    handler = Handler(done)
    vote = await clicked(handler, _message("approve 3f9a"), "approve", "approve 3f9a",
                         _acknowledge(True, handler.ops))
    assert vote is not None and vote.answer == [done]
    assert handler.ops == [("accept", "approve 3f9a"), ("ack",), ("decide", "3f9a", "approve", True)]
    assert not vote.retires  # it decided a gate: the core edits every message offering it

    handler.ops.clear()
    force = await clicked(handler, _message("run flaky --force"), "force", "run flaky --force",
                          _acknowledge(True, handler.ops))
    assert force is not None and force.retires
    assert handler.ops == [("accept", "run flaky --force"), ("ack",), ("handle", "run flaky --force", True)]


async def test_a_click_whose_acknowledgement_is_refused_is_finished_and_never_handled() -> None:
    handler = Handler(Reply(kind="text", data={"text": "ok"}))
    assert await clicked(handler, _message("run notes"), "force", "run notes",
                         _acknowledge(False, handler.ops)) is None
    assert handler.ops == [("accept", "run notes"), ("ack",), ("finish", "run notes")]


async def test_a_forms_values_complete_its_command_or_are_refused_with_their_errors() -> None:
    refused: list[Mapping[str, str]] = []

    async def refuse(errors: Mapping[str, str]) -> None:
        refused.append(errors)

    handler = Handler(form=FormResult("run deploy --set replicas=3", {}))
    completed = await submitted(handler, _message("run deploy"), {"replicas": "3"}, refuse)
    assert completed is not None
    message, ballot = completed
    assert (message.text, message.user, ballot) == ("run deploy --set replicas=3", "U1", None)
    assert handler.asking.read == [("run deploy", {"replicas": "3"})]

    handler = Handler(form=FormResult(None, {"replicas": "not a number"}))
    assert await submitted(handler, _message("run deploy"), {"replicas": "x"}, refuse) is None
    assert refused == [{"replicas": "not a number"}]


async def test_a_failure_is_logged_and_told_in_one_line_even_when_telling_it_is_refused(
        caplog: pytest.LogCaptureFixture) -> None:
    told: list[str] = []

    async def tell(text: str) -> None:
        told.append(text)

    async def refused(text: str) -> None:
        raise ConnectionError("expired")

    with caplog.at_level(logging.INFO):
        await failure_told(RuntimeError("boom"), tell, "Something went wrong.", event_id="e1")
        await failure_told(RuntimeError("boom"), refused, "Something went wrong.", untold=(ConnectionError,))
    assert told == ["Something went wrong."]
    actions = [getattr(r, "action", None) for r in caplog.records]
    assert actions == ["command_failed", "command_failed", "command_failed_untold"]
