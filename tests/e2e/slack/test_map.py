"""`map:` and `workflow:` on Slack (the real Bolt app over signed HTTP, the mock Web API): a
50-item map run from chat has one progress message whose map line counts the items (never a
line per item); three items fail; after the fix, the run's Resume button runs exactly those
three again (counted by the log every item appends to). A sub-workflow's gate is asked in the
parent's thread, and its Approve button there continues the child and then the parent.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from core.config import Access, Settings
from core.store.records import RunStatus
from tests.e2e.slack.conftest import BOT_TOKEN, SIGNING_SECRET, SlackE2E
from tests.e2e.slack.steps import COMPLETED, FAILED, WAITING, command, start, wait_in_thread

FAN = """\
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
      echo "{{ host }}" >> "$BATON_WORKFLOW_DIR/ran.log"
      if grep -qx "{{ host }}" "$BATON_WORKFLOW_DIR/broken.txt"; then
        echo "{{ host }} is down" >&2; exit 1
      fi
      echo "deployed {{ host }}"
    replay: idempotent
  - id: report
    depends_on: [deploy]
    bash: 'echo "{{ nodes.deploy.ok_count }} ok"'
    replay: pure
"""

SHIP = """\
name: ship
inputs:
  service: {type: string, required: true}
nodes:
  - id: review
    approval: "Ship {{ inputs.service }}?"
  - id: push
    depends_on: [review]
    bash: 'echo "pushed {{ inputs.service }}"'
    replay: pure
"""

RELEASE = """\
name: release
nodes:
  - id: api
    workflow: ship
    with: {service: api}
  - id: announce
    depends_on: [api]
    bash: 'echo "released: {{ nodes.api.output.outputs.push }}"'
    replay: pure
"""


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str, access: Access) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    for name, text in {"fan": FAN, "ship": SHIP, "release": RELEASE}.items():
        (workflows / f"{name}.yaml").write_text(text)
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=sqlite_url, workflow_dirs=[workflows], data_dir=tmp_path / "data", tool_modules=[],
        access=access, slack_bot_token=BOT_TOKEN,  # type: ignore[arg-type]
        slack_signing_secret=SIGNING_SECRET,  # type: ignore[arg-type]
        step_sandbox="none",  # the items append to a log in the workflow directory the test reads
    )


def _ran(settings: Settings) -> Counter[str]:
    return Counter((settings.workflow_dirs[0] / "ran.log").read_text().split())


async def test_a_50_item_map_fails_3_then_resume_runs_exactly_those_3(
    e2e: SlackE2E, settings: Settings
) -> None:
    workflows = settings.workflow_dirs[0]
    (workflows / "broken.txt").write_text("h7\nh23\nh41\n")
    hosts = "[" + ",".join(f'"h{i}"' for i in range(50)) + "]"
    run = await start(e2e, f"run fan --set hosts='{hosts}'", rests_with=FAILED)
    await e2e.settle()
    assert "3 of 50 items of `deploy` failed: `deploy[7]`, `deploy[23]`, `deploy[41]`" in run.rest.text
    assert _ran(settings) == Counter({f"h{i}": 1 for i in range(50)})  # every item ran once

    progress = [c for c in e2e.mock.calls if run.run_id in c.text and " — " in c.text]
    posted = [c for c in progress if c.method == "chat.postMessage"]
    assert len(posted) == 1  # one progress message, edited in place
    edits = [c for c in progress if c.method == "chat.update"]
    assert edits and {c.body["ts"] for c in edits} == {posted[0].ts}
    assert all("deploy[" not in c.text for c in progress)  # never a line per item
    assert "50/50 · 3 failed" in edits[-1].text  # the one map line counts the items

    (workflows / "broken.txt").write_text("")  # the fix
    mark = len(e2e.mock.calls)
    answer = await e2e.slack.click(run.rest, "resume")
    assert answer.status == 200
    done = await wait_in_thread(e2e, run.thread, COMPLETED, after=mark)
    assert run.run_id in done.text
    await e2e.settle()
    ran = _ran(settings)
    assert sum(ran.values()) == 53
    assert sorted(h for h, n in ran.items() if n == 2) == ["h23", "h41", "h7"]  # exactly those three
    assert e2e.baton.store.runs.get_run(run.run_id).status is RunStatus.COMPLETED
    after = [c for c in e2e.mock.calls[mark:] if run.run_id in c.text and " — " in c.text]
    assert all("deploy[" not in c.text for c in after)


async def test_a_childs_gate_is_asked_in_the_parents_thread_and_its_button_continues_both(
    e2e: SlackE2E,
) -> None:
    parent = await start(e2e, "run release", rests_with="is paused at step")
    store = e2e.baton.store
    (child,) = store.runs.child_runs([parent.run_id])
    assert child.status is RunStatus.PAUSED
    assert f"waiting on child {child.id} at `review`" in parent.rest.text  # what the parent waits on
    gate = await wait_in_thread(e2e, parent.thread, WAITING)  # the child's gate, in the parent's thread
    assert child.id in gate.text and "Ship api?" in gate.text
    assert store.runs.get_run(child.id).thread == parent.thread
    in_channel = [c for c in e2e.mock.of("chat.postMessage") if "thread_ts" not in c.body]
    assert not [c for c in in_channel if child.id in c.text]  # the child never opens a thread of its own
    mark = await command(e2e, "status")  # nothing decided by looking
    assert store.runs.get_run(parent.run_id).status is RunStatus.PAUSED
    answer = await e2e.slack.click(gate, "approve")
    assert answer.status == 200
    done = await wait_in_thread(e2e, parent.thread, "released: pushed api", after=mark)
    assert parent.run_id in done.text
    await e2e.settle()
    assert store.runs.get_run(child.id).status is RunStatus.COMPLETED
    assert store.runs.get_run(parent.run_id).status is RunStatus.COMPLETED
