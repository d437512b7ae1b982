"""`map:` through the real `baton say`, as a user would: one step per item, a resume re-runs
exactly the items that failed, `fail_fast`, `max_parallel`, zero items and `max_items`.

Each item appends a line to `ran.log` in its run's directory (the only place a sandboxed step
may write); the tests count those lines, so "ran" means the item's command really ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tests.e2e.console.cli import BatonCli, final_status

FAN_OUT = """\
name: fan
inputs:
  hosts: {type: array}
nodes:
  - id: hosts
    bash: echo "{{ inputs.hosts }}"
    output: {format: json}
    replay: pure
  - id: deploy
    depends_on: [hosts]
    map: {items: "{{ nodes.hosts.output }}", as: host, max_parallel: 8}
    bash: |
      echo "{{ host }}" >> ran.log
      if grep -qx "{{ host }}" "$BATON_WORKFLOW_DIR/broken.txt"; then
        echo "{{ host }} is down" >&2; exit 1
      fi
      echo "deployed {{ host }}"
    replay: idempotent
  - id: report
    depends_on: [deploy]
    bash: >-
      echo "{{ nodes.deploy.ok_count }} ok, {{ nodes.deploy.failed_count }} failed,
      last {{ nodes.deploy.output[-1] }}"
    replay: pure
"""


def _ran(baton: BatonCli) -> list[str]:
    """Every item that ran, over every run's directory (one line each)."""
    lines: list[str] = []
    for log in sorted((baton.home / ".baton" / "runs").glob("*/ran.log")):
        lines += log.read_text().split()
    return lines


def _last(replies: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [r for r in replies if r["kind"] == kind]
    assert found, f"no {kind} reply in {[r['kind'] for r in replies]}"
    return found[-1]


def _hosts(count: int) -> str:
    return "[" + ",".join(f'"h{i}"' for i in range(count)) + "]"


def test_fifty_items_three_fail_then_resume_runs_exactly_those_three(baton_any_db: BatonCli) -> None:
    baton = baton_any_db  # on SQLite and on PostgreSQL
    (baton.workflows / "fan.yaml").write_text(FAN_OUT)
    (baton.workflows / "broken.txt").write_text("h7\nh23\nh41\n")
    replies = baton.say(f"run fan --set hosts='{_hosts(50)}'")
    assert final_status(replies) == "failed"
    failed = _last(replies, "run_failed")
    run_id = failed["run_id"]
    text = failed["text"]
    assert "3 of 50 items of `deploy` failed: `deploy[7]`, `deploy[23]`, `deploy[41]`" in text
    assert "stderr ends with: h7 is down" in text
    assert sorted(_ran(baton)) == sorted(f"h{i}" for i in range(50))  # every item ran once
    # one line for the map node, never one per item
    progress = [r["text"] for r in replies if r["kind"] == "progress"][-1]
    assert "deploy[" not in progress
    assert "deploy failed · 50/50 · 3 failed" in progress

    (baton.workflows / "broken.txt").write_text("")  # the fix
    [plan] = baton.say(f"plan {run_id}")
    again = "3 of 50 items run again (`deploy[7]`, `deploy[23]`, `deploy[41]`: no result); 47 cached"
    assert again in plan["text"]  # `plan` says which items a resume runs
    resumed = baton.say(f"resume {run_id}")
    assert final_status(resumed) == "completed"
    again = _ran(baton)
    assert len(again) == 53 and _new(again) == ["h23", "h41", "h7"]  # exactly the three that failed
    done = _last(resumed, "run_completed")
    assert "50 ok, 0 failed, last deployed h49" in done["text"]

    store_rows = _item_rows(baton)
    assert len({row for row in store_rows if row.startswith("deploy[")}) == 50


def _new(lines: list[str]) -> list[str]:
    """The items that ran a second time."""
    seen: set[str] = set()
    again = []
    for line in lines:
        if line in seen:
            again.append(line)
        seen.add(line)
    return sorted(again)


def _item_rows(baton: BatonCli) -> list[str]:
    engine = sa.create_engine(baton.database_url)
    try:
        with engine.connect() as conn:
            return [r[0] for r in conn.execute(sa.text("select node_id from journal"))]
    finally:
        engine.dispose()


def test_an_added_item_runs_alone_on_resume_from(baton: BatonCli) -> None:
    (baton.workflows / "fan.yaml").write_text(FAN_OUT)
    (baton.workflows / "broken.txt").write_text("")
    first = baton.say(f"run fan --set hosts='{_hosts(5)}'")
    assert final_status(first) == "completed"
    run_id = _last(first, "run_completed")["run_id"]
    hosts = '["new",' + _hosts(5)[1:]  # one item added before the others: they shift position
    second = baton.say(f"run fan --resume-from {run_id} --set hosts='{hosts}'")
    assert final_status(second) == "completed"
    assert _new(_ran(baton)) == [] and sorted(_ran(baton)) == sorted([*(f"h{i}" for i in range(5)), "new"])
    assert "6 ok, 0 failed, last deployed h4" in _last(second, "run_completed")["text"]


FAIL_FAST = """\
name: ff
nodes:
  - id: each
    map: {items: [1, 2, 3, 4, 5, 6], as: n, max_parallel: 1, on_failure: fail_fast}
    bash: |
      echo "{{ n }}" >> ran.log
      test "{{ n }}" != 3
    replay: idempotent
"""


def test_fail_fast_starts_no_item_after_a_failure(baton: BatonCli) -> None:
    (baton.workflows / "ff.yaml").write_text(FAIL_FAST)
    replies = baton.say("run ff")
    assert final_status(replies) == "failed"
    assert _ran(baton) == ["1", "2", "3"]
    assert "3 not started (on_failure: fail_fast)" in _last(replies, "run_failed")["text"]


PARALLEL = """\
name: par
nodes:
  - id: each
    map: {items: [1, 2, 3, 4, 5, 6], as: n, max_parallel: 2}
    bash: |
      echo "start $(date +%s.%N)" >> ran.log
      sleep 0.3
      echo "end $(date +%s.%N)" >> ran.log
    replay: idempotent
"""


def test_max_parallel_bounds_the_items_running_at_once(baton: BatonCli) -> None:
    (baton.workflows / "par.yaml").write_text(PARALLEL)
    assert final_status(baton.say("run par")) == "completed"
    [log] = (baton.home / ".baton" / "runs").glob("*/ran.log")
    events = sorted(
        (float(at), 1 if what == "start" else -1)
        for what, at in (line.split() for line in log.read_text().splitlines())
    )
    running = peak = 0
    for _, change in sorted(events, key=lambda e: (e[0], e[1])):
        running += change
        peak = max(peak, running)
    assert len(events) == 12
    assert peak == 2  # bounded by max_parallel, and items did overlap


ZERO_AND_TOO_MANY = """\
name: edges
inputs:
  count: {type: integer}
nodes:
  - id: each
    map: {items: "{{ range(inputs.count) | list }}", max_items: 3}
    bash: echo "{{ item }}" >> ran.log
    replay: idempotent
  - id: after
    depends_on: [each]
    when: "{{ nodes.each.skipped }}"
    bash: echo "nothing to do"
    replay: pure
"""


def test_zero_items_skip_the_node_with_its_reason(baton: BatonCli) -> None:
    (baton.workflows / "edges.yaml").write_text(ZERO_AND_TOO_MANY)
    replies = baton.say("run edges --set count=0")
    assert final_status(replies) == "completed"
    assert _ran(baton) == []
    [status] = baton.say(f"status {_last(replies, 'run_completed')['run_id']}")
    assert "`map.items` gave no items" in status["text"]
    assert "nothing to do" in _last(replies, "run_completed")["text"]


def test_more_than_max_items_fails_the_node_with_one_line(baton: BatonCli) -> None:
    (baton.workflows / "edges.yaml").write_text(ZERO_AND_TOO_MANY)
    replies = baton.say("run edges --set count=4")
    assert final_status(replies) == "failed"
    assert _ran(baton) == []
    assert "`map.items` of `each` gave 4 items, more than max_items 3" in _last(replies, "run_failed")["text"]


def test_a_map_error_names_the_line_and_the_fix(baton: BatonCli, tmp_path: Path) -> None:
    (baton.workflows / "bad.yaml").write_text(
        "name: bad\nnodes:\n  - id: each\n    map: {items: [1], as: n}\n    when: '{{ n == 1 }}'\n"
        "    bash: echo {{ n }}\n"
    )
    [reply] = baton.say("run bad")
    assert "bad.yaml:5:" in reply["text"]
    assert "uses the item `n`" in reply["text"]


def test_the_fan_out_example_runs(baton: BatonCli) -> None:
    example = Path(__file__).resolve().parents[3] / "workflows" / "fan-out.yaml"
    (baton.workflows / "fan-out.yaml").write_text(example.read_text())
    replies = baton.say("run fan-out")
    assert final_status(replies) == "completed"
    assert "3 of 3 hosts are up" in _last(replies, "run_completed")["text"]
