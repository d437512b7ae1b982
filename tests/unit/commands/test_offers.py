"""Which replies offer a gate, and what a decided gate leaves of them (pure parts of offers.py)."""

from __future__ import annotations

import json

from core.commands import replies
from core.commands.messages import Button, Reply
from core.commands.model import RunCommand
from core.commands.offers import from_json, offered_runs, retires, to_json, withdrawn
from core.commands.parser import parse
from core.commands.resolution import Prompt, prompt_options
from core.delivery.envelope import Address, Mode, Once
from core.redaction import Redactor
from core.render import render
from core.store.records import Gate, Run, RunStatus
from tests.unit.commands.samples import make_gate, make_run

PLAIN = Redactor(())  # these tests are about templates; redaction has its own

RUN = make_run(id="r1", status=RunStatus.PAUSED)
SETTLED = {"run_id": "r1", "workflow": "release-notes", "node": "review", "approved": True, "by": "slack:U2",
           "how": "approve"}


def _gates(count: int) -> list[tuple[Run, Gate]]:
    runs = [make_run(id=f"r{i}", status=RunStatus.PAUSED) for i in range(count)]
    return [(r, make_gate(r, created_at=float(i))) for i, r in enumerate(runs)]


def test_the_replies_that_offer_a_gate_and_those_that_do_not() -> None:
    gate = make_gate(RUN)
    assert offered_runs(replies.approval_question(RUN, gate)) == ["r1"]
    command = parse("run release-notes x")
    assert isinstance(command, RunCommand)
    prompt = Prompt(RUN)
    for waiting, runs in ((True, ["r1"]), (False, [])):  # approve its gate, or resume it
        options = prompt_options(prompt, command, gate_waiting=waiting)
        assert offered_runs(replies.fresh_run_prompt(prompt, options, "a", "b")) == runs
    assert offered_runs(replies.which_gate(_gates(3), "unclear")) == ["r2", "r1", "r0"]
    assert offered_runs(replies.which_gate(_gates(9), "approve")) == [f"r{i}" for i in range(8, -1, -1)]
    # a button that only looks like one: its action is not a decision
    assert offered_runs(Reply(kind="help", buttons=(Button("x", "approve r1", None, "help"),))) == []


def test_a_decided_gate_leaves_the_other_gates_choices_and_says_who_decided() -> None:
    which = replies.which_gate(_gates(3), "unclear")
    left = withdrawn(which, "r1", SETTLED)
    assert [b.command for b in left.buttons] == ["approve r2", "reject r2", "approve r0", "reject r0"]
    assert left.how.edit_only and left.data["settled"] == [SETTLED]
    [text] = render(left, "slack", PLAIN)
    assert text.endswith("✅ Approved by U2: *release-notes* run `r1`.")  # named, never pinged

    menu = withdrawn(replies.which_gate(_gates(7), "approve"), "r6", {**SETTLED, "run_id": "r6"})
    assert [len(m.options) for m in menu.menus] == [6]
    alone = withdrawn(replies.approval_question(RUN, make_gate(RUN)), "r1", {**SETTLED, "approved": False})
    assert alone.buttons == () and render(alone, "console", PLAIN)[0].endswith("❌ Rejected by slack:U2.")


def test_a_kept_reply_comes_back_the_same() -> None:
    for reply in (replies.which_gate(_gates(7), "unclear"), replies.approval_question(RUN, make_gate(RUN)),
                  withdrawn(replies.which_gate(_gates(2), "approve"), "r1", SETTLED)):
        assert from_json(to_json(reply)) == reply
    asked = replies.approval_question(RUN, make_gate(RUN))
    row_message = asked.sent(once=Once("outbox:7:1", 5.0))
    assert from_json(to_json(row_message)) == row_message


def test_an_offer_kept_before_reply_once_comes_back_with_its_row_key() -> None:
    kept = json.loads(to_json(replies.approval_question(RUN, make_gate(RUN))))
    del kept["once"]
    kept.update(delivery_key="outbox:7:1", redelivery_since=None)  # as kept by the previous version
    assert from_json(json.dumps(kept)).how.once == Once("outbox:7:1", None)


def test_an_offer_kept_before_the_reply_split_reads_its_place_and_mode_from_the_flat_row() -> None:
    # as `to_json` wrote it when `Reply` carried its place and its mode as fields of its own
    kept = json.dumps({
        "kind": "gate_waiting", "data": {"run_id": "r1"}, "buttons": [], "menus": [], "form": None,
        "run_id": "r1", "run_status": "paused", "platform": "slack", "conversation": "C1", "thread": "T1",
        "requester": "slack:U1", "replace_key": "offer:abc", "edit_only": False, "starts_thread": False,
        "ephemeral": False, "is_error": False, "direct": False, "once": {"key": "outbox:7", "since": 5.0},
        "file": None, "pings": ["slack:U2"],
    })
    reply = from_json(kept)
    assert reply.to == Address("slack", "C1", "T1", "slack:U1", direct=False)
    assert reply.how == Mode(replace_key="offer:abc", once=Once("outbox:7", 5.0))
    assert (reply.kind, reply.run_status, reply.pings) == ("gate_waiting", "paused", ("slack:U2",))
    assert json.loads(to_json(reply)) == json.loads(kept)  # and is kept in the same shape


def test_a_thousand_waiting_gates_are_a_list_of_the_newest_25_and_a_count() -> None:
    which = replies.which_gate(_gates(1000), "approve")
    [menu] = which.menus
    assert len(menu.options) == 25 and menu.options[0].command == "approve r999"
    assert which.data["more"] == 975 and len(which.data["gates"]) == 25
    text = "\n".join(render(which, "discord", PLAIN))
    assert "1000 runs wait" in text and "… and 975 older" in text and len(text) < 4000


def test_a_clicked_message_loses_its_buttons_unless_refused_reusable_or_a_decided_gate() -> None:
    answered = [Reply(kind="run_resumed", run_id="r1")]
    refused = [Reply(kind="error", is_error=True)]
    assert retires("resume", "resume r1", answered)
    assert not retires("resume", "resume r1", refused)  # refused: the buttons stay for someone else
    assert not retires("resume", "resume r1", [])  # a duplicate click answered nothing
    assert not retires("open", "open r1", answered)  # "Open run" stays for the next person
    assert not retires("approve", "approve r1", answered)  # the core edits every offer of the gate
    assert not retires("force", "reject r1", answered)  # what decides is the command, not the label
