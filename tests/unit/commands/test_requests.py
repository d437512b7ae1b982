"""A chat platform's requests answered once for every platform (`core.commands.requests`), with
the platform's side (`Asker`), the handler and the delivery service faked at their edges."""

from __future__ import annotations

from typing import Any

from core.commands.messages import ChatMessage, Form, Reply
from core.commands.requests import Origin, Requests
from core.delivery.envelope import Address, Mode
from core.delivery.failures import CallFailed
from core.render import format_of

ORIGIN = Origin(channel="C1", user="U1", follow_up="https://hooks/1", trigger="t1")


class Asker:
    def __init__(self, *, opens: bool = True) -> None:
        self.opens = opens
        self.ops: list[tuple[Any, ...]] = []

    async def tell(self, origin: Origin, text: str) -> None:
        self.ops.append(("tell", text))

    async def open_form(self, form: Form, origin: Origin, place: str) -> bool:
        self.ops.append(("form", form.kind, place))
        return self.opens

    async def ephemeral(self, origin: Origin, channel: str, thread: str | None, message: Any) -> None:
        self.ops.append(("ephemeral", channel, thread, message))


class Buttons:
    def value(self, command: str, limit: int) -> str:
        return command

    def command_of(self, value: str) -> str | None:
        return None if value.startswith("ref:") else value


class Handler:
    def __init__(self, *answer: Reply) -> None:
        self.answer = list(answer)
        self.buttons = Buttons()
        self.finished: list[str] = []

    def accept(self, message: ChatMessage) -> bool:
        return True

    def finish(self, message: ChatMessage) -> None:
        self.finished.append(message.event_id)

    async def handle(self, message: ChatMessage, *, accepted: bool = False) -> list[Reply]:
        return self.answer


class Delivery:
    def __init__(self, *, failing: bool = False) -> None:
        self.failing = failing
        self.answered: list[tuple[Any, ...]] = []

    async def compose(self, reply: Reply, attach: bool) -> str:
        return f"composed {reply.kind}"

    async def answer(self, reply: Reply, place: Any, *, follow_up: Any = None) -> None:
        if self.failing:
            raise CallFailed("Slack refused\nTry again.", method="chat.postMessage", error="fatal_error",
                             channel=place)
        self.answered.append((reply.kind, place, reply.to.thread, follow_up))


class Names:
    def remember(self, user: str, name: str | None) -> None: ...

    def known(self, user: str) -> str | None:
        return None


def _requests(handler: Handler, delivery: Delivery, asker: Asker) -> Requests:
    return Requests(handler, delivery, asker, format_of("slack"), Names(),  # type: ignore[arg-type]
                    follow_up=(1800.0, 5), form_place_limit=3000)


def _message(text: str = "run notes") -> ChatMessage:
    return ChatMessage(platform="slack", conversation="C1", user="U1", text=text, event_id="e1")


async def _ack() -> None: ...


async def test_a_run_where_baton_cannot_post_starts_nothing_and_is_told_to_the_asker() -> None:
    handler, asker = Handler(Reply("run_started")), Asker()

    async def refusal() -> str:
        return "cannot post here"

    await _requests(handler, Delivery(), asker).command(_message(), ORIGIN, _ack, refusal=refusal)
    assert asker.ops == [("tell", "cannot post here")] and handler.finished == ["e1"]


async def test_answers_go_where_they_were_asked_a_form_as_a_form_an_ephemeral_one_to_the_asker() -> None:
    form = Form("inputs", "Run notes", "Run", "run notes")
    answer = (Reply("inputs", form=form), Reply("help", how=Mode(ephemeral=True)),
              Reply("run_started", run_id="r1", how=Mode(starts_thread=True), to=Address(thread="1.2")))
    delivery, asker = Delivery(), Asker()
    await _requests(Handler(*answer), delivery, asker).process(_message(), ORIGIN)
    assert asker.ops == [("form", "inputs", '{"command":"run notes","channel":"C1","thread":null}'),
                         ("ephemeral", "C1", None, "composed help")]
    assert delivery.answered == [("run_started", "C1", "1.2", ("https://hooks/1", 1800.0, 5))]


async def test_a_form_that_cannot_open_is_answered_with_its_text() -> None:
    delivery = Delivery()
    form = Form("inputs", "Run notes", "Run", "run notes")
    requests = _requests(Handler(Reply("inputs", form=form)), delivery, Asker(opens=False))
    await requests.process(_message(), ORIGIN)
    assert [kind for kind, *_ in delivery.answered] == ["inputs"]


async def test_a_refused_answer_is_told_and_a_started_run_is_never_told_to_try_again() -> None:
    asker = Asker()
    answer = (Reply("status"), Reply("run_started", run_id="r1", how=Mode(starts_thread=True)))
    await _requests(Handler(*answer), Delivery(failing=True), asker).process(_message(), ORIGIN)
    (_, refused), (_, started) = asker.ops
    assert refused == "Slack refused\nTry again."
    assert "r1" in started and "fatal_error" in started and started != refused


async def test_a_click_on_a_reference_nobody_kept_is_told_to_the_clicker() -> None:
    asker, handler = Asker(), Handler(Reply("status"))

    def read(command: str) -> tuple[ChatMessage, Origin]:
        return _message(command), ORIGIN

    async def withdraw(origin: Origin, note: str) -> None:
        raise AssertionError("nothing to withdraw")

    await _requests(handler, Delivery(), asker).click("ref:gone", read, _ack, "resume", "Resume", withdraw)
    assert [op for op, _ in asker.ops] == ["tell"]
