"""Approval policies through the Handler on a real Engine (SQLite and PostgreSQL): a quorum of
distinct eligible people, a repeat counting once, the requester excluded, an ineligible "lgtm"
refused politely, a form's values typed as text or asked for, a choice that takes a branch,
and two people completing the quorum at once."""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.commands import voting
from core.commands.actions import Context
from core.commands.messages import ChatMessage, Reply
from core.config import Access
from core.engine.ballots import Ballot
from core.redaction import Redactor
from core.render import render_text
from core.store.records import RunStatus
from tests.integration.commands.conftest import Chat, make_chat

RELEASE = """
name: release
inputs:
  version: {type: string, default: "1.0"}
nodes:
  - id: build
    bash: printf 'built %s' {{ inputs.version }}
    replay: pure
  - id: review
    depends_on: [build]
    approval:
      question: "Ship {{ inputs.version }}?"
      approvers: [group:sre]
      required: 2
      requester_may_approve: false
      form:
        replicas: {type: integer, default: 3}
        window: {type: string, enum: [now, tonight]}
      choices: [approve, hotfix, reject]
  - id: deploy
    depends_on: [review]
    when: "{{ nodes.review.decision == 'approve' }}"
    bash: printf 'deploy x%s %s' {{ nodes.review.values.replicas }} {{ nodes.review.values.window }}
    replay: pure
  - id: hotfix
    depends_on: [review]
    when: "{{ nodes.review.decision == 'hotfix' }}"
    bash: printf 'hotfix by %s' {{ nodes.review.approvers[1].user }}
    replay: pure
"""

ACCESS = Access.model_validate(
    {
        "admins": ["console:root"],
        "groups": {"sre": ["console:sam", "console:sue", "console:rita"]},
        "run": {"*": ["console:rita", "console:bob"]},
    }
)


@pytest.fixture
async def chat(tmp_path: Path, database_url: str) -> AsyncIterator[Chat]:
    c = await make_chat(tmp_path, database_url, access=ACCESS)
    (tmp_path / "workflows" / "release.yaml").write_text(textwrap.dedent(RELEASE))
    yield c
    await c.engine.stop(grace=5)
    await c.handler.drain()
    c.store.close()


async def _paused(chat: Chat) -> str:
    [started] = await chat.say("run release --set version=2.0", user="rita")
    assert started.kind == "run_started" and started.run_id
    assert (await chat.rest(started.run_id)).status is RunStatus.PAUSED
    return started.run_id


def _text(reply: Reply) -> str:
    return render_text(reply, "console", Redactor(()))


def _output(chat: Chat, run_id: str, node: str) -> str:
    [entry] = [e for e in chat.store.steps.journal([run_id]) if e.node_id == node and e.output_digest]
    assert entry.output_digest is not None
    return chat.store.blobs.get_blob(entry.output_digest).decode()


async def test_a_quorum_of_two_distinct_approvers_with_values_opens_the_gate_once(chat: Chat) -> None:
    run_id = await _paused(chat)
    [first] = await chat.say(f"approve {run_id} replicas=5 window=now first look", user="sam")
    assert first.kind == "vote_counted" and first.data["counted"]
    assert first.data["state"]["have"] == 1 and first.data["state"]["need"] == 2
    assert "1/2 · needs @sre · requester excluded" in _text(first)
    assert "proposed by sam: replicas=5 window=now" in _text(first)
    [again] = await chat.say(f"approve {run_id} window=now", user="sam")  # the same person: once
    assert again.kind == "vote_counted" and not again.data["counted"]
    [lgtm] = await chat.say("lgtm", user="sam", command=False)  # their vote is in: not asked for values
    assert lgtm.kind == "vote_counted" and not lgtm.data["counted"]
    told = _text(lgtm)
    assert "Your vote on review of release run " in told and "is in already" in told
    assert "Nothing was recorded" not in told
    assert chat.store.runs.get_run(run_id).status is RunStatus.PAUSED
    # other values are not counted toward the proposal: the voter is told how, and the ways on
    [other] = await chat.say(f"approve {run_id} replicas=4 window=now", user="sue")
    assert other.kind == "vote_differs" and other.how.ephemeral
    assert other.data["differences"] == [{"name": "replicas", "proposed": "5", "yours": "4"}]
    text = _text(other)
    assert "proposal by sam: approve replicas=5 window=now" in text
    assert "replicas: proposed 5, yours 4" in text
    assert f"/workflow approve {run_id}" in text and f"/workflow reject {run_id}" in text
    assert [b.command for b in other.buttons] == [f"approve {run_id}", f"reject {run_id}"]
    gate = chat.store.gates.get_gate(run_id, "review")
    assert [
        v.user for v in chat.store.ballots.gate_votes(run_id, "review", gate.created_at)
    ] == ["console:sam"]
    assert chat.store.runs.get_run(run_id).status is RunStatus.PAUSED
    [decided] = await chat.say(f"approve {run_id} ok", user="sue")  # no values: approves the proposal
    assert decided.kind == "gate_decided" and decided.data["approved"]
    assert (await chat.rest(run_id)).status is RunStatus.COMPLETED
    assert _output(chat, run_id, "deploy") == "deploy x5 now"  # what both approved
    review = json.loads(_output(chat, run_id, "review"))
    assert review["decision"] == "approve" and review["values"] == {"replicas": 5, "window": "now"}
    assert [a["user"] for a in review["approvers"]] == ["console:sam", "console:sue"]
    assert [e.action for e in chat.store.events.audit_log(run_id)].count(
        "vote"
    ) == 5  # refused and repeats too


async def test_the_requester_and_people_not_listed_are_refused_and_nothing_is_recorded(chat: Chat) -> None:
    run_id = await _paused(chat)
    [own] = await chat.say(f"approve {run_id} window=now", user="rita")
    assert own.is_error and "requested run" in own.data["message"]
    [lgtm] = await chat.say("lgtm", user="bob", command=False)
    assert lgtm.is_error and "not an approver" in lgtm.data["message"]
    gate = chat.store.gates.get_gate(run_id, "review")
    assert chat.store.ballots.gate_votes(run_id, "review", gate.created_at) == []
    assert chat.store.runs.get_run(run_id).status is RunStatus.PAUSED


async def test_a_plain_reply_on_a_gate_with_a_form_asks_for_the_values_with_their_defaults(
    chat: Chat,
) -> None:
    run_id = await _paused(chat)
    [asked] = await chat.say("lgtm", user="sam", command=False)
    assert asked.kind == "approval_values" and asked.form is not None
    assert asked.form.command == f"approve {run_id}"
    assert {f.name: f.value for f in asked.form.fields} == {"replicas": "3", "window": ""}
    text = _text(asked)
    assert "default 3" in text and f"/workflow approve {run_id} replicas=3 window=…" in text
    gate = chat.store.gates.get_gate(run_id, "review")
    assert chat.store.ballots.gate_votes(run_id, "review", gate.created_at) == []  # nothing recorded yet
    [missing] = await chat.say(f"approve {run_id}", user="sam")  # `window` has no default
    assert missing.kind == "approval_values" and missing.data["missing"] == ["window"]
    [wrong] = await chat.say(f"approve {run_id} window=later", user="sam")
    assert wrong.is_error and 'field `window` must be one of "now", "tonight"' in wrong.data["message"]
    [typo] = await chat.say(f"approve {run_id} windows=now", user="sam")
    assert typo.is_error and "`windows` is not a field of this gate" in typo.data["message"]


async def test_a_choice_takes_its_branch(chat: Chat) -> None:
    run_id = await _paused(chat)
    await chat.say(f"approve {run_id} hotfix window=now", user="sam")
    [mixed] = await chat.say(f"approve {run_id} approve window=now", user="sue")  # not hotfix: no quorum
    assert mixed.kind == "vote_differs" and "You chose approve, not hotfix" in _text(mixed)
    [decided] = await chat.say(f"approve {run_id} hotfix window=now", user="root")
    assert decided.kind == "gate_decided" and decided.data["decision"] == "hotfix"
    assert (await chat.rest(run_id)).status is RunStatus.COMPLETED
    assert _output(chat, run_id, "hotfix") == "hotfix by console:root"
    states = {n.node_id: n.state.value for n in chat.engine.summary(run_id).nodes}
    assert states["deploy"] == "skipped" and states["hotfix"] == "done"


async def test_one_rejection_ends_the_gate(chat: Chat) -> None:
    run_id = await _paused(chat)
    await chat.say(f"approve {run_id} window=now", user="sam")
    [rejected] = await chat.say(f"reject {run_id} not tonight", user="sue")
    assert rejected.kind == "gate_decided" and not rejected.data["approved"]
    assert chat.store.runs.get_run(run_id).status is RunStatus.CANCELLED


async def test_two_approvers_completing_the_quorum_at_once_both_count_and_it_opens_once(chat: Chat) -> None:
    run_id = await _paused(chat)
    await chat.say(f"approve {run_id} window=now", user="root")
    run = chat.store.runs.get_run(run_id)
    gate, blob = chat.store.views.gate_and_args(run)  # what both read before either decided
    assert gate is not None
    replies = []
    for user in ("sam", "sue"):  # each completes the quorum from the same reading of the gate
        ctx = Context(
            chat.store,
            chat.engine,
            chat.handler.catalog,
            ACCESS,
            ChatMessage("console", "c1", user, "approve", f"race-{user}"),
            f"console:{user}",
            chat.handler.redactor,
        )
        ballot = Ballot(f"console:{user}", run_id, texts={"window": "now"}, node=gate.node_id)
        replies += await voting.cast(ctx, ballot, run=run, gate=gate, args=json.loads(blob))
    assert [r.kind for r in replies] == ["gate_decided", "vote_counted"]
    assert replies[1].data["decided_by"] == "console:sam" and replies[1].data["counted"]
    assert "counted; sam completed the decision at the same moment" in _text(replies[1])
    assert (await chat.rest(run_id)).status is RunStatus.COMPLETED
    assert len(chat.store.ballots.gate_votes(run_id, "review", gate.created_at)) == 3  # every vote kept
    assert [a.action for a in chat.store.events.audit_log(run_id)].count("approve") == 1  # opened once


async def test_the_gate_message_shows_the_policy_and_its_choices_and_is_edited_as_votes_arrive(
    chat: Chat,
) -> None:
    run_id = await _paused(chat)
    waiting = await chat.final(run_id)
    assert waiting.kind == "gate_waiting" and waiting.how.replace_key
    assert [b.command for b in waiting.buttons] == [
        f"approve {run_id}", f"approve {run_id} hotfix", f"reject {run_id}"]
    assert "0/2 · needs @sre · requester excluded" in _text(waiting)
    await chat.say(f"approve {run_id} window=now", user="sam")
    await chat.handler.drain()
    [edited] = [r for r in chat.outbox if r.kind == "gate_waiting" and r.how.edit_only]
    assert edited.how.replace_key == waiting.how.replace_key and edited.buttons == waiting.buttons
    assert "1/2 · needs @sre · requester excluded · proposed by sam: replicas=3 window=now" in _text(edited)
    await chat.say(f"approve {run_id}", user="sue")  # the proposal: the quorum is met
    await chat.rest(run_id)
    await chat.handler.drain()
    settled = [r for r in chat.outbox if r.kind == "gate_waiting" and r.how.edit_only][-1]
    assert settled.how.replace_key == waiting.how.replace_key and settled.buttons == ()
    text = _text(settled)  # the headline is the outcome, naming every voter
    assert text.startswith(f"✅ Approved by sam and sue (2/2): release run {run_id} at review.")
    assert "waits for approval" not in text and "0/2" not in text and "1/2" not in text


async def test_a_decided_choice_and_a_rejection_head_the_gate_message(chat: Chat) -> None:
    chose = await _paused(chat)
    await chat.say(f"approve {chose} hotfix window=now", user="sam")
    await chat.say(f"approve {chose}", user="sue")
    rejected = await _paused(chat)
    await chat.say(f"reject {rejected} too risky", user="sue")
    for run_id in (chose, rejected):
        await chat.rest(run_id)
    await chat.handler.drain()
    edits = {r.run_id: _text(r) for r in chat.outbox
             if r.kind == "gate_waiting" and r.how.edit_only and r.data.get("settled")}  # fmt: skip
    assert edits[chose].startswith(f"🩹 hotfix chosen by sam and sue (2/2): release run {chose} at review.")
    assert edits[rejected].startswith(f"❌ Rejected by sue: release run {rejected} at review: “too risky”.")


async def test_who_approved_names_the_deciders_and_every_vote(chat: Chat) -> None:
    run_id = await _paused(chat)
    await chat.say(f"approve {run_id} window=now careful", user="sam")
    await chat.say(f"approve {run_id} window=now", user="sue")
    await chat.rest(run_id)
    [who] = await chat.say(f"who approved {run_id[:8]}", user="bob")
    assert who.kind == "who_approved"
    [gate] = who.data["gates"]
    assert (gate["node"], gate["status"], gate["by"]) == ("review", "approved", "console:sue")
    assert [(v["user"], v["choice"], v["comment"]) for v in gate["votes"]] == [
        ("console:sam", "approve", "careful"), ("console:sue", "approve", "")]
    text = _text(who)
    lines = text.splitlines()  # one line per vote, with its values and comment
    assert any(line.startswith("• review: approved by sue") for line in lines)
    [sam] = [line for line in lines if line.strip().startswith("sam:")]
    [sue] = [line for line in lines if line.strip().startswith("sue:")]
    assert "approve replicas=3 window=now at" in sam and sam.endswith("“careful”")
    assert "approve replicas=3 window=now at" in sue
    [usage] = await chat.say(f"who rejected {run_id}", user="bob")
    assert usage.is_error and "ask `who approved <run>`" in usage.data["message"]


async def test_a_gate_buttons_ballot_opens_its_form_and_its_text_is_never_read(chat: Chat) -> None:
    """`asking.form_for(message, ballot)`: a gate's Approve clicked is the ballot its button
    stands for; the form is that gate's, whatever the message's text says (#27)."""
    run_id = await _paused(chat)
    [started] = await chat.say("run release --set version=3.0", user="rita", conversation="c2")
    assert started.kind == "run_started" and started.run_id
    assert (await chat.rest(started.run_id)).status is RunStatus.PAUSED
    other_id = started.run_id

    def clicked(user: str, text: str) -> ChatMessage:
        return ChatMessage(platform="console", conversation="c1", user=user, text=text, event_id=f"x-{user}",
                           is_command=True)  # fmt: skip

    asking = chat.handler.asking
    lure = f"approve {other_id} hotfix -- `rm -rf /` \"quoted\""  # never parsed when a ballot is given
    form = asking.form_for(clicked("sam", lure), voting.button_ballot(f"approve {run_id}"))
    assert form is not None and form.command == f"approve {run_id}" and form.title == "Approve review"
    assert [f.name for f in form.fields] == ["replicas", "window"]
    chosen = asking.form_for(clicked("sam", ""), voting.button_ballot(f"approve {run_id} hotfix"))
    assert chosen is not None and chosen.command == f"approve {run_id} hotfix"
    # the same form as typing `approve <run>`, which is a command and is parsed
    assert asking.form_for(clicked("sam", f"approve {run_id}")) == form
    # no form: a voter who may not vote, a gate the ballot does not name, an unknown choice
    assert asking.form_for(clicked("bob", ""), voting.button_ballot(f"approve {run_id}")) is None
    assert asking.form_for(clicked("sam", ""), Ballot("", run_id, node="build")) is None
    assert asking.form_for(clicked("sam", ""), voting.button_ballot(f"approve {run_id} later")) is None
    # once a proposal is made, a click without values approves it: no form
    [first] = await chat.say(f"approve {run_id} replicas=5 window=now", user="sam")
    assert first.kind == "vote_counted"
    assert asking.form_for(clicked("sue", ""), voting.button_ballot(f"approve {run_id}")) is None
    # nothing was read from the lure: the other run's gate has no vote
    gate = chat.store.gates.get_gate(other_id, "review")
    assert chat.store.ballots.gate_votes(other_id, "review", gate.created_at) == []
