"""Concurrency limits through the real `baton say` processes (DESIGN.md, "Concurrency and the
queue"): runs of a `limit: 1` key never overlap and start in arrival order; the others are
shown queued with their position; a paused run holds its slot unless `hold_while_paused:
false`; `cancel_new`, `cancel_running`, `replace_queued`; a key shared by two workflows."""

from __future__ import annotations

import concurrent.futures
import itertools
import time
from pathlib import Path

import pytest

from core.errors import StoreError
from core.store.repository import SqlStore
from tests.e2e.console.cli import CALL_TIMEOUT, BatonCli, run_ids

pytestmark = pytest.mark.timeout(300)

SERIAL = """\
name: serial
concurrency:
  limit: 1
nodes:
  - id: work
    bash: |
      i=0; while [ ! -e {go} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
      echo worked {{{{ inputs.message }}}}
    replay: pure
"""

GATED = """\
name: {name}
concurrency:
  key: deploy-prod
  limit: 1
  on_limit: {on_limit}
  hold_while_paused: {hold}
nodes:
  - id: prepare
    bash: echo prepared
    replay: pure
  - id: review
    depends_on: [prepare]
    approval: "Ship {{{{ inputs.message }}}}?"
  - id: ship
    depends_on: [review]
    bash: echo shipped
    replay: pure
"""


def write(baton: BatonCli, name: str, text: str) -> None:
    (baton.workflows / f"{name}.yaml").write_text(text)


def windows(baton: BatonCli, run_id: str) -> tuple[float, float]:
    """When the run's steps ran: first start, last finish (the journal)."""
    store = SqlStore(baton.database_url)
    try:
        entries = store.steps.journal([run_id])
    finally:
        store.close()
    return min(e.started_at for e in entries), max(e.finished_at or 0.0 for e in entries)


def audit_actions(baton: BatonCli, run_id: str) -> list[str]:
    store = SqlStore(baton.database_url)
    try:
        return [e.action for e in store.events.audit_log(run_id)]
    finally:
        store.close()


def _written(baton: BatonCli) -> int:
    """Runs in the database so far (0 while the first call has not created its schema yet)."""
    try:
        return len(baton.runs())
    except StoreError:
        return 0


def test_three_runs_at_once_run_one_at_a_time_in_arrival_order(baton_any_db: BatonCli) -> None:
    baton = baton_any_db
    go = baton.workflows / "go"  # the steps wait for it (30 s at most), so the first still works
    write(baton, "serial", SERIAL.format(go=go))
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        calls = []
        for i, user in enumerate(("ana", "bob", "cy")):
            calls.append(pool.submit(baton.say, f'run serial "n{i}" --force', user=user))
            # the next arrives once this one's run is written, while the first still waits: a
            # fixed pause let a slow start on a loaded machine arrive after the first had ended
            deadline = time.monotonic() + CALL_TIMEOUT
            while _written(baton) < i + 1 and time.monotonic() < deadline:
                time.sleep(0.05)
        go.touch()  # all three are written: the first may finish, the others follow it one by one
        outputs = [call.result(timeout=CALL_TIMEOUT * 2) for call in calls]

    runs = sorted(baton.runs(), key=lambda r: r.created_at)
    assert [r.status for r in runs] == ["completed"] * 3
    spans = [windows(baton, r.id) for r in runs]
    starts = [s for s, _ in spans]
    assert starts == sorted(starts), "admitted in arrival order"
    for (_, end), (next_start, _) in itertools.pairwise(spans):
        assert next_start >= end, "never two at once"
    # the ones that arrived behind another were told so, with their place in the queue
    firsts = {run_ids([r]).pop(): r for out in outputs for r in out if r["kind"] == "run_started"}
    assert "queued" not in firsts[runs[0].id]["text"]
    told = sorted(firsts[r.id]["text"] for r in runs[1:])
    assert any("queued #1 for serial" in t for t in told) and any("queued #2 for serial" in t for t in told)
    assert "queued" in audit_actions(baton, runs[2].id) and "admitted" in audit_actions(baton, runs[2].id)


def test_paused_run_holds_its_slot_and_the_queue_is_visible(baton: BatonCli) -> None:
    write(baton, "ship-a", GATED.format(name="ship-a", on_limit="queue", hold="true"))
    write(baton, "ship-b", GATED.format(name="ship-b", on_limit="queue", hold="true"))
    (paused,) = run_ids(baton.say('run ship-a "v1"'))
    assert baton.run_record(paused).status == "paused"
    # another workflow naming the same key queues behind it
    waiting = baton.say('run ship-b "v2"', user="bob", wait=False)
    (queued,) = run_ids(waiting)
    assert baton.run_record(queued).status == "queued"
    started = next(r for r in waiting if r["kind"] == "run_started")
    assert f"queued #1 for deploy-prod, behind {paused[:6]} (paused at review for" in started["text"]

    (listing,) = baton.say("queue deploy-prod", wait=False)
    assert listing["kind"] == "queue"
    assert f"{paused} ship-a paused at review" in listing["text"]
    assert f"#1 {queued} ship-b · bob · waiting" in listing["text"]
    (status,) = baton.say(f"status {queued}", wait=False)
    assert "queued #1 for deploy-prod, behind" in status["text"]
    assert any(b["command"] == f"cancel {queued}" for b in status["buttons"])

    # approving the paused run lets it finish; its rest admits the queued run, which runs
    baton.say(f"approve {paused}", user="cy")
    for _ in range(200):
        if baton.run_record(queued).status == "paused":
            break
        time.sleep(0.1)
    assert baton.run_record(paused).status == "completed"
    assert baton.run_record(queued).status == "paused"  # ran to its own gate


def test_hold_while_paused_false_gives_the_slot_back(baton: BatonCli) -> None:
    write(baton, "ship", GATED.format(name="ship", on_limit="queue", hold="false"))
    (first,) = run_ids(baton.say('run ship "v1"'))
    (second,) = run_ids(baton.say('run ship "v2" --force', user="bob"))
    assert baton.run_record(first).status == "paused" and baton.run_record(second).status == "paused"
    # both wait at their gate and neither holds the slot: approving one runs it at once
    baton.say(f"approve {first}", user="cy")
    assert baton.run_record(first).status == "completed"


def test_cancel_new_refuses_naming_the_active_run(baton: BatonCli) -> None:
    write(baton, "ship", GATED.format(name="ship", on_limit="cancel_new", hold="true"))
    (first,) = run_ids(baton.say('run ship "v1"'))
    (refused,) = baton.say('run ship "v2" --force', user="bob", wait=False)
    assert refused["kind"] == "error" and first in refused["text"] and "deploy-prod" in refused["text"]
    assert len(baton.runs()) == 1
    # the active run waits at its gate: the hint is what moves it (`cancel` refuses a paused run)
    assert f"/workflow approve {first}" in refused["text"] and "/workflow cancel" not in refused["text"]


def test_cancel_running_cancels_the_active_run(baton: BatonCli) -> None:
    write(baton, "ship", GATED.format(name="ship", on_limit="cancel_running", hold="true"))
    (first,) = run_ids(baton.say('run ship "v1"'))
    said = baton.say('run ship "v2" --force', user="bob")
    second = next(r["run_id"] for r in said if r["kind"] == "run_started")
    # the cancelled run's thread is told it ended, and why
    assert any(r["run_id"] == first and r["run_status"] == "cancelled" for r in said)
    old = baton.run_record(first)
    assert old.status == "cancelled" and second in (old.reason or "")
    assert baton.run_record(second).status == "paused"
    assert "cancelled_by_limit" in audit_actions(baton, first)


def test_replace_queued_keeps_only_the_newest(baton: BatonCli) -> None:
    write(baton, "ship", GATED.format(name="ship", on_limit="replace_queued", hold="true"))
    (holder,) = run_ids(baton.say('run ship "v1"'))
    queued = [run_ids(baton.say(f'run ship "v{i}" --force', wait=False)).pop() for i in (2, 3, 4)]
    assert [baton.run_record(r).status for r in queued] == ["cancelled", "cancelled", "queued"]
    (cancelled,) = baton.say(f"cancel {queued[2]}", wait=False)
    assert cancelled["kind"] == "run_cancelled" and baton.run_record(queued[2]).status == "cancelled"
    assert baton.run_record(holder).status == "paused"


def test_a_bad_concurrency_block_is_refused_at_load_with_its_line(baton: BatonCli, tmp_path: Path) -> None:
    write(baton, "bad", "name: bad\nconcurrency:\n  limit: 0\nnodes:\n  - id: a\n    bash: echo\n")
    done = baton.run("list")
    assert "bad.yaml:3: `limit` of `concurrency`" in done.stdout and "fix:" in done.stdout


def test_a_chosen_key_never_cancels_another_teams_run(baton: BatonCli) -> None:
    """`grief` may be run by bob, and its key is his to type: `cancel_running` on a key another
    workflow's run holds must not cancel that run (bob's own `cancel` of it is refused)."""
    write(baton, "ship", GATED.format(name="ship", on_limit="queue", hold="true"))
    write(baton, "grief", 'name: grief\ninputs: {k: {type: string}}\n'
          'concurrency: {key: "{{ inputs.k }}", limit: 1, on_limit: cancel_running}\n'
          "nodes:\n  - id: a\n    bash: echo hi\n    replay: pure\n")
    baton.env_extra["BATON_ACCESS"] = (
        '{"admins": ["console:root"], "run": {"grief": ["console:bob"], "*": ["console:root"]},'
        ' "approve": {"*": ["console:root"]}}'
    )
    (held,) = run_ids(baton.say('run ship "v1"', user="root"))
    assert baton.run_record(held).status == "paused"

    (refused,) = baton.say(f"cancel {held}", user="bob", wait=False)
    said = baton.say("run grief --set k=deploy-prod", user="bob", wait=False)

    assert "may not cancel" in refused["text"]
    assert baton.run_record(held).status == "paused"  # still waiting at its gate
    assert "cancelled_by_limit" not in audit_actions(baton, held)
    grief = next(r["run_id"] for r in said if r["run_id"] != held)
    assert baton.run_record(grief).status == "queued"  # it waits its turn instead


def test_a_queued_runs_steps_show_queued_not_skipped(baton: BatonCli) -> None:
    write(baton, "ship", GATED.format(name="ship", on_limit="queue", hold="true"))
    run_ids(baton.say('run ship "v1"'))
    waiting = run_ids(baton.say('run ship "v2" --force', user="bob", wait=False)).pop()
    [status] = baton.say(f"status {waiting}", wait=False)
    assert status["run_status"] == "queued"
    assert "prepare queued" in status["text"] and "skipped" not in status["text"]
