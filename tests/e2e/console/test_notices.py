"""Notices through `baton say` (the assembled app, a real SQLite database): a run that fails in
one conversation is told once to the conversation subscribed to its workflow, never to its
own; `unsubscribe` stops it; a workflow's own `notify:` rule is told too; a flood of failures
becomes one notice, then one digest."""

from __future__ import annotations

import math
import re
import sqlite3
import time
from typing import Any

from tests.e2e.console.cli import BatonCli


def _notices(replies: list[dict[str, Any]], kind: str = "notice") -> list[dict[str, Any]]:
    return [r for r in replies if r["kind"] == kind]


def _outbox(baton: BatonCli, kind: str) -> list[tuple[str, str, str | None]]:
    path = baton.database_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT conversation, run_id, delivered_at FROM outbox WHERE kind = ? ORDER BY id",
                          (kind,)).fetchall()
    return [(c, r, d) for c, r, d in rows]


def _sleep_until_due(baton: BatonCli, kind: str) -> None:
    """Until every undelivered row of `kind` is due (its stored `due_at`), and a little more."""
    path = baton.database_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        (due,) = db.execute("SELECT max(due_at) FROM outbox WHERE kind = ? AND delivered_at IS NULL",
                            (kind,)).fetchone()
    assert due is not None, f"no {kind} row is waiting"
    time.sleep(max(0.0, due - time.time()) + 0.2)


def test_a_failure_is_told_once_to_the_subscribed_conversation_never_to_its_own(baton: BatonCli) -> None:
    [answer] = baton.say("subscribe flaky failed", conversation="ops")
    assert answer["kind"] == "subscribed" and "flaky" in answer["text"]
    baton.say("subscribe flaky failed", conversation="dev")  # the run's own conversation: no echo
    out = baton.say("run flaky please fail", conversation="dev")
    run_id = out[0]["run_id"]
    [notice] = _notices(out)
    assert notice["text"].startswith("[to ops] ❌ flaky run ")
    assert f"run {run_id} failed at check: step `check` exited with code 3; stderr ends with: asked to fail" \
        in notice["text"]
    assert "started by ana" in notice["text"] and "in dev" in notice["text"]
    rows = _outbox(baton, "notice")
    assert [(c, r) for c, r, _ in rows] == [("ops", run_id)] and rows[0][2] is not None  # one, delivered
    listed = baton.say("subscriptions", conversation="ops")
    assert "flaky: failed · subscribed by ana" in listed[0]["text"]
    # nothing more is sent for it: another process finds nothing due
    assert _notices(baton.say("status", conversation="ops")) == []
    assert len(_outbox(baton, "notice")) == 1


def test_unsubscribe_stops_the_notices(baton: BatonCli) -> None:
    baton.say("subscribe flaky", conversation="ops")
    assert len(_notices(baton.say("run flaky fail one", conversation="dev"))) == 1
    [gone] = baton.say("unsubscribe flaky", conversation="ops")
    assert gone["kind"] == "unsubscribed" and "2 subscriptions removed" in gone["text"]
    out = baton.say("run flaky --force fail two", conversation="dev")
    assert out[0]["run_status"] in ("running", "pending") and _notices(out) == []
    assert len(_outbox(baton, "notice")) == 1


def test_a_rule_of_the_workflow_tells_its_conversation_when_its_condition_holds(baton: BatonCli) -> None:
    (baton.workflows / "deploy.yaml").write_text(
        "name: deploy\n"
        "inputs:\n  env: {type: string, default: staging}\n"
        "nodes:\n  - id: push\n    bash: echo pushing >&2; exit 4\n    replay: pure\n"
        "notify:\n  - on: [failed]\n    to: console:ops\n    when: \"{{ inputs.env == 'prod' }}\"\n",
        encoding="utf-8")
    assert _notices(baton.say("run deploy --set env=staging", conversation="dev")) == []
    [notice] = _notices(baton.say("run deploy --force --set env=prod", conversation="dev"))
    assert "deploy run" in notice["text"] and "stderr ends with: pushing" in notice["text"]


def test_a_flood_is_one_notice_then_digests_never_a_message_per_run(baton: BatonCli) -> None:
    baton.env_extra["BATON_NOTIFY_DIGEST_SECONDS"] = "8"
    baton.say("subscribe flaky failed", conversation="ops")
    told = []
    began = time.monotonic()
    for n in range(5):
        told += baton.say(f"run flaky --force fail {n}", conversation=f"dev{n}")
    windows = math.ceil((time.monotonic() - began) / 8) + 1  # each `say` is a process: seconds apart
    assert len(_notices(told)) == 1
    assert len(_outbox(baton, "notice")) == 5  # each failure's notice: one sent, four folded
    _sleep_until_due(baton, "notice_digest")  # the last window's digest is due at its end
    told += baton.say("status", conversation="ops")
    digests = _notices(told, "notice_digest")
    assert 1 <= len(digests) <= windows and len(_outbox(baton, "notice_digest")) == len(digests)
    counted = sum(int(re.search(r"flaky: (\d+) more notice", d["text"])[1]) for d in digests)  # type: ignore[index]
    assert counted == 4  # every folded failure told once, in a digest
    assert _notices(baton.say("status", conversation="ops"), "notice_digest") == []


def test_a_say_without_wait_still_prints_the_notice_it_delivers(baton: BatonCli) -> None:
    """Without `--wait` the run's progress is not printed, but a notice this process delivers
    is: marked delivered unprinted, it would reach nobody."""
    baton.say("subscribe flaky failed", conversation="ops")
    out = baton.say("run flaky please fail", conversation="dev", wait=False)
    [notice] = _notices(out)
    assert notice["text"].startswith("[to ops] ❌ flaky run ")
    assert not any(r["kind"] == "progress" for r in out)  # the run's own progress stays unshown
