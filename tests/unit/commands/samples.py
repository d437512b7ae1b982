"""Factories of domain records for the pure conversation-layer tests."""

from __future__ import annotations

from typing import Any

from core.commands import replies, schedule_replies
from core.commands.messages import Form, FormField, Reply
from core.commands.model import SPECS
from core.commands.pages import PageLink
from core.commands.parser import parse
from core.commands.resolution import Prompt, prompt_options
from core.engine.events import NodePlan, NodeState, NodeSummary, Plan, RunSummary
from core.errors import RunNotResumable, VoteDiffers
from core.store.records import (
    AuditEvent,
    Fire,
    FireOutcome,
    Gate,
    GateStatus,
    GateVote,
    Run,
    RunStatus,
    Schedule,
    Subscription,
)
from core.workflows.approval_spec import ApprovalSpec
from core.workflows.input_spec import InputSpec


def make_run(**kw: Any) -> Run:
    base: dict[str, Any] = dict(
        id="r-0123456789abcdef", workflow="release-notes", platform="slack", conversation="C1",
        thread=None, requester="slack:U1", args_digest="3f9a1c2b" + "0" * 56,
        status=RunStatus.FAILED, version=3, created_at=1_700_000_000.0, updated_at=1_700_000_100.0,
    )
    base.update(kw)
    return Run(**base)


def make_gate(run: Run, **kw: Any) -> Gate:
    base: dict[str, Any] = dict(run_id=run.id, node_id="review", prompt="Publish 'v1.4'?",
                                status=GateStatus.WAITING, created_at=1_700_000_050.0)
    base.update(kw)
    return Gate(**base)


def make_summary(status: str = "completed", **kw: Any) -> RunSummary:
    nodes = (
        NodeSummary("collect", "bash", NodeState.CACHED, 0.0, 0, 0, "no change since r-old"),
        NodeSummary("draft", "prompt", NodeState.DONE, 2.5, 120, 0, "input `inputs.version` changed"),
        NodeSummary("publish", "tool", NodeState.FAILED if status == "failed" else NodeState.DONE, 0.3,
                    error="Traceback ...\nValueError: boom" if status == "failed" else ""),
    )
    base: dict[str, Any] = dict(run_id="r-0123456789abcdef", workflow="release-notes", status=status,
                                nodes=nodes, seconds=2.8, tokens=120, tokens_saved=300, output="Title\nBody")
    base.update(kw)
    return RunSummary(**base)


def every_reply_kind(text: str = "hi") -> list[Reply]:
    """One reply of each kind, with `text` wherever user text goes."""
    run = make_run()
    gate = make_gate(run, prompt=text)
    command = parse("run release-notes x")
    prompt = Prompt(run)
    return [
        replies.error(RunNotResumable(text, hint=text)),
        replies.unexpected(),
        replies.help_list(list(SPECS.values())),
        replies.help_topic(SPECS["run"]),
        replies.fresh_run_prompt(prompt, prompt_options(prompt, command, gate_waiting=False), text, text),  # type: ignore[arg-type]
        replies.run_started(run.evolve(status=RunStatus.RUNNING), text),
        replies.run_resumed(run, "slack:U1"),
        replies.gate_decided(run, gate, True, "slack:U2", text),
        replies.run_cancelled(run, "slack:U1", text),
        replies.node_resolved(run, "publish", "done", "slack:U1"),
        replies.invalidated(run, ["draft", "publish"], True),
        replies.plan(run, Plan(run.id, run.workflow, (NodePlan("draft", "prompt", "runs", text),))),
        replies.status(run, make_summary(reason=text)),
        replies.runs([run]),
        replies.workflows([{"name": "release-notes", "description": text, "inputs": ["version"]}],
                          [{"name": "bad", "path": "workflows/bad.yaml", "error": text}]),
        replies.args(run, '{"message":' + repr(text) + "}"),
        replies.audit(run, [AuditEvent(1, 1_700_000_000.0, "slack:U1", "run", run.id, {"text": text})]),
        replies.progress(run, make_summary("running")),
        replies.final(run, make_summary("completed", output=text), None, None),
        replies.final(run, make_summary("failed", failed_node="publish"), None, None),
        replies.final(run, make_summary("paused"), gate, None),
        replies.final(run.evolve(status=RunStatus.PAUSED, reason=f"waiting on child c0ffee at `{text}`"),
                      make_summary("paused"), None, None,
                      child=make_run(id="c0ffee000000", workflow="ship", parent_run=run.id,
                                     parent_node=text)),
        replies.final(run, make_summary("needs_attention", reason=text), None, "publish"),
        replies.final(run.evolve(status=RunStatus.CANCELLED), make_summary("cancelled"), None, None),
        replies.approval_question(run, gate),
        replies.which_gate([(run, gate), (make_run(id="r-2"), gate)], "unclear"),
        replies.no_gate_hint(),
        replies.page_link(PageLink("http://127.0.0.1:8080/r/eyJ1Ijo.abc_-", 1_700_043_200.0, 43_200.0),
                          "slack:U1", run),
        replies.page_link(PageLink("http://127.0.0.1:8080/c/eyJ1Ijo.abc_-", 1_700_043_200.0, 43_200.0),
                          "slack:U1", platform="slack", conversation="C1"),
        replies.input_form(Form("run_inputs", "Run release-notes", "Run", "run release-notes", (
            FormField("version", "version", "string", required=True, description=text),
            FormField("channel", "channel", "string", value="web", choices=("web", text)))),
            "release-notes", ["version"]),
        replies.home("slack:U1", [{"run_id": run.id, "workflow": run.workflow, "status": "failed",
                                    "conversation": "C1", "created_at": run.created_at, "url": None}],
                     [{"run_id": run.id, "workflow": run.workflow, "status": "paused", "conversation": "C1",
                       "created_at": run.created_at, "url": "http://127.0.0.1:8080/r/x", "node": "review",
                       "question": text}], 2, [{"conversation": "C1", "url": "http://127.0.0.1:8080/c/x"}],
                     pages=True),
        replies.vote_counted(run, gate, None, {
            "have": 1, "need": 2, "groups": ["sre"], "requester_excluded": True, "humans_only": True,
            "expires_in": 14_340.0,
            "voters": ["slack:U2"], "choices": [text],
            "proposal": {"by": "slack:U2", "choice": "hotfix", "values": {"replicas": 5, "window": text}}},
            True, comment=text),
        replies.vote_differs(run, gate, VoteDiffers(run_id=run.id, node_id="review", by="slack:U2",
                                                    choice="approve", values={"replicas": 5, "window": text}),
                             "approve", {"replicas": 4, "window": text}),
        replies.approval_values(run, gate, ApprovalSpec(question=text, form={
            "replicas": InputSpec(type="integer", default=3), "window": InputSpec(enum=["now", text])}),
            "approve", {"replicas": 3}, ["window"]),
        replies.gate_reminder(run, gate, ["slack:U2"], 3_600.0),
        replies.gate_escalated(run, gate, ["slack:U3"], None),
        replies.gate_timed_out(run, gate, "reject", "4h"),
        replies.who_approved(run, [(
            gate.evolve(status=GateStatus.APPROVED, decision="hotfix", decided_by="slack:U2",
                        decided_at=1_700_000_100.0),
            [GateVote(run.id, "review", 1.0, "slack:U2", "hotfix", 1_700_000_090.0, text,
                      {"window": text})])]),
        replies.audit_export(3, "7d", "csv", "baton-audit-20260921T141320Z.csv", text.encode()),
        replies.unmet_gate(text, {"node": "review", "required": 2, "people": 0, "groups": ["sre"]}),
        *schedule_kinds(run, text),
        replies.queue([{"key": text, "limit": 1, "active": [QUEUE_AHEAD], "queued": [
            {"position": 1, "id": "r-2", "workflow": text, "requester": "slack:U2", "waited": 90.0}]}], text),
        replies.progress(run.evolve(status=RunStatus.QUEUED), make_summary("queued"), queue=queued(text)),
        replies.run_started(run.evolve(status=RunStatus.QUEUED), text, queue=queued(text)),
        replies.status(run.evolve(status=RunStatus.QUEUED), make_summary("queued"), queued(text)),
        replies.run_resumed(run.evolve(status=RunStatus.QUEUED), "slack:U1", queued(text)),
        replies.gate_decided(run.evolve(status=RunStatus.QUEUED), gate, True, "slack:U2", text,
                             queue=queued(text)),
        replies.subscribed("slack", "C0OPS", text, ["failed", "needs_attention"], "slack:U1"),
        replies.unsubscribed("slack", "C0OPS", text, ["failed"], 1, 2),
        replies.subscriptions("discord", "1130001112223334445", [
            Subscription("discord", "1130001112223334445", text, "failed", "slack:U1", 1.0)],
            [{"workflow": text, "events": ["failed"], "when": "{{ inputs.env == 'prod' }}"}]),
        replies.notice(run, "failed", {"node": "build", "error": text, "thread_url": None}, page=True),
        replies.notice(run, "gate_waiting", {"node": "review", "question": text, "deciders": ["slack:U2"],
                                             "thread_url": "https://slack.com/archives/C1/p1"}, page=False),
        replies.notice_digest(text, 600.0, [(run.id, "failed"), ("b2", "failed")]),
        replies.subscription_stopped("slack", "C0OPS", text, "slack:U1"),
    ]


def make_schedule(text: str = "hi", **kw: Any) -> Schedule:
    fields: dict[str, Any] = dict(
        id="release-notes-ab12", workflow="release-notes", source="chat", cron="0 2 * * 1-5", every=None,
        timezone="Europe/Paris", args={"message": text}, overlap="skip", catchup="latest",
        catchup_window=3600.0, platform="slack", conversation="C1", principal="slack:U1", owner="slack:U1",
        created_at=1_700_000_000.0, updated_at=1_700_000_000.0, evaluated_until=1_700_000_000.0)
    fields.update(kw)
    return Schedule(**fields)


def schedule_kinds(run: Run, text: str) -> list[Reply]:
    """One reply of each schedule kind (`schedule_replies.py`), with `text` where user text goes."""
    s = make_schedule(text)
    paused = s.evolve(paused=True, note=text, paused_by="slack:U2")
    now = 1_700_000_000.0
    rid = run.id
    fires = [Fire(s.id, now - 86400 * i, outcome, now, "r1", rid if outcome is FireOutcome.STARTED else None,
                  {"active": [run.id]} if outcome is FireOutcome.SKIPPED else {"error": text, "reason": text})
             for i, outcome in enumerate(FireOutcome)]
    return [
        schedule_replies.added(s, now),
        schedule_replies.added(s, now, args=schedule_replies.shown_args(
            s.evolve(args={"message": text, "version": text}), lambda t: t)),
        schedule_replies.listed([s, paused, make_schedule(text, id="release-notes.nightly", source="yaml",
                                                          owner=None, every=300.0, cron=None)], now),
        schedule_replies.shown(s, fires, now, args='{"version":' + repr(text) + "}"),
        schedule_replies.shown(paused, [], now),
        schedule_replies.changed(paused, "paused", "slack:U2"),
        schedule_replies.changed(s, "resumed", "slack:U2"),
        schedule_replies.changed(s, "removed", "slack:U2"),
        schedule_replies.changed(s, "fired", "slack:U2", run=run, outcome="started",
                                 detail={"behind": ["abc"]}),
        schedule_replies.changed(s, "fired", "slack:U2", run=run.evolve(status=RunStatus.QUEUED),
                                 outcome="started", detail={"behind": [rid]}, queue=queued(text)),
        schedule_replies.changed(s, "fired", "slack:U2", outcome="skipped", detail={"active": [run.id]}),
        schedule_replies.changed(s, "fired", "slack:U2", outcome="failed", detail={"error": text}),
        schedule_replies.fired(run.evolve(started_by=f"schedule:{s.id}"), s, now,
                               {"catchup": True, "by": "slack:U2", "behind": [rid], "cancelled": [rid]}),
        schedule_replies.fired(run.evolve(started_by=f"schedule:{s.id}", status=RunStatus.QUEUED), s, now,
                               {"by": "slack:U2", "behind": [rid]}),
        *schedule_replies.refused(paused, text),
    ]


#: the run a queued run waits behind, as `queueing.holder` shows it
QUEUE_AHEAD = {"id": "a1b2c3d4e5f6", "workflow": "deploy", "status": "paused", "requester": "slack:U1",
               "node": "review", "for": 10_800.0}


def queued(key: str) -> dict[str, Any]:
    """A queued run's place, as `queueing.waiting` gives it."""
    return {"key": key, "position": 2, "queued": 2, "limit": 1, "active": 1, "waited": 60.0,
            "ahead": QUEUE_AHEAD}
