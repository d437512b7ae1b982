"""DESIGN.md's cache traps, each against a real engine, real subprocesses and a real database."""

from __future__ import annotations

import json

from core.engine.events import EventKind, NodeState
from core.store.records import NodeStatus, RunStatus
from tests.integration.engine.harness import Harness

PRODUCER = """
name: report
nodes:
  - id: produce
    script: produce.py
    replay: pure
    output: {format: json, schema: {type: object, required: [count]}}
  - id: consume
    depends_on: [produce]
    bash: echo "count={{ nodes.produce.output.count }}"
    replay: pure
"""


async def test_malformed_json_fails_at_the_producer_and_is_never_cached(db_harness: Harness) -> None:
    h = db_harness
    h.write("report.yaml", PRODUCER)
    h.write("produce.py", "print('{count: 3')  # exits 0, but this is not JSON\n")

    run = await h.run("report")

    assert run.status is RunStatus.FAILED
    assert "`produce` broke its output contract" in (run.reason or "")
    [entry] = h.entries(run.id, "produce")
    assert entry.status is NodeStatus.FAILED
    assert entry.output_digest is not None  # kept for inspection
    assert h.store.blobs.get_blob(entry.output_digest).decode().strip() == "{count: 3"
    assert h.entries(run.id, "consume") == []  # the consumer never saw the bad output
    summary = h.engine.summary(run.id)
    assert [n.state for n in summary.nodes] == [NodeState.FAILED, NodeState.SKIPPED]
    assert "output contract" in summary.nodes[0].error

    # fixing the producer's script (not the YAML, no renaming) and resuming re-runs it
    h.write("produce.py", "import json; print(json.dumps({'count': 3}))\n")
    plan = h.engine.plan(run.id)
    assert [(n.node_id, n.action, n.reason) for n in plan.nodes] == [
        ("produce", "runs", "definition changed"),
        ("consume", "runs", "no earlier result"),
    ]
    await h.engine.resume(run.id, actor="console:ana")
    resumed = await h.engine.wait(run.id, timeout=30)

    assert resumed.status is RunStatus.COMPLETED
    assert h.output(run.id, "consume").strip() == "count=3"
    assert h.executed(run.id, "produce") == 2


async def test_a_dependency_re_run_with_identical_output_leaves_dependents_cached(
    db_harness: Harness,
) -> None:
    h = db_harness
    h.write(
        "early.yaml",
        """
        name: early
        nodes:
          - id: fetch
            bash: echo same-bytes
            replay: pure
            memoize: false
          - id: build
            depends_on: [fetch]
            bash: echo "built from {{ nodes.fetch.output }}"
            replay: pure
        """,
    )
    first = await h.run("early")
    second = await h.run("early", resume_from=first.id)

    assert second.status is RunStatus.COMPLETED
    assert h.executed(second.id, "fetch") == 1  # memoize: false always re-runs
    [build] = h.entries(second.id, "build")
    assert build.cached_from == first.id  # same upstream bytes: early cutoff
    assert h.kinds(second.id, EventKind.NODE_CACHED) == ["build"]


async def test_re_ordered_or_re_indented_args_still_hit(harness: Harness) -> None:
    h = harness
    h.write(
        "args.yaml",
        """
        name: args
        nodes:
          - id: show
            bash: echo {{ inputs.config.mode }} {{ inputs.config.level }}
            replay: pure
        """,
    )
    typed_once = json.loads('{"config": {"mode": "fast", "level": 2}, "message": "go"}')
    typed_again = json.loads(
        '{\n    "message": "go",\n    "config": {\n        "level": 2,\n        "mode": "fast"\n    }\n}'
    )
    first = await h.run("args", typed_once)
    second = await h.run("args", typed_again, resume_from=first.id)

    assert first.args_digest == second.args_digest
    [show] = h.entries(second.id, "show")
    assert show.cached_from == first.id


async def test_a_changed_unrelated_input_does_not_bust_a_node(db_harness: Harness) -> None:
    h = db_harness
    h.write(
        "rel.yaml",
        """
        name: rel
        nodes:
          - id: notes
            bash: echo notes for {{ inputs.version }}
            replay: pure
          - id: greet
            bash: echo hello {{ inputs.audience }}
            replay: pure
        """,
    )
    first = await h.run("rel", {"version": "1.0", "audience": "team"})
    second = await h.run("rel", {"version": "1.0", "audience": "everyone"}, resume_from=first.id)

    assert [e.cached_from for e in h.entries(second.id, "notes")] == [first.id]
    [greet] = h.entries(second.id, "greet")
    assert greet.cached_from is None
    assert greet.notes.reason == "input `inputs.audience` changed"
    summary = h.engine.summary(second.id)
    assert [(n.node_id, n.state) for n in summary.nodes] == [
        ("notes", NodeState.CACHED),
        ("greet", NodeState.DONE),
    ]


async def test_reformatting_the_yaml_changes_no_key(harness: Harness) -> None:
    h = harness
    h.write(
        "fmt.yaml",
        """
        name: fmt
        nodes:
          - id: a
            bash: echo a
            replay: pure
          - id: b
            depends_on: [a]
            bash: echo b {{ nodes.a.output }}
            replay: pure
        """,
    )
    first = await h.run("fmt")
    h.write(
        "fmt.yaml",
        """
        # the same workflow, edited for humans
        name: fmt
        description: now with words
        nodes:
          - id: b
            description: the second step, listed first
            depends_on:
              - a
            replay: pure
            bash: echo b {{ nodes.a.output }}
          - {id: a, replay: pure, bash: echo a, description: first}
        """,
    )
    second = await h.run("fmt", resume_from=first.id)
    assert [e.cached_from for e in h.entries(second.id)] == [first.id, first.id]


async def test_a_fresh_run_reuses_nothing_and_memoize_false_always_reruns(harness: Harness) -> None:
    h = harness
    h.write(
        "fresh.yaml",
        """
        name: fresh
        nodes:
          - id: stamp
            bash: echo stamp
            replay: pure
            memoize: false
          - id: same
            bash: echo same
            replay: pure
        """,
    )
    first = await h.run("fresh")
    fresh = await h.run("fresh")
    assert all(e.cached_from is None for e in h.entries(fresh.id))

    resumed = await h.run("fresh", resume_from=first.id)
    plan = {n.node_id: (n.action, n.reason) for n in h.engine.plan(resumed.id).nodes}
    assert plan["stamp"] == ("runs", "memoize: false")
    assert plan["same"] == ("done", "completed in this run")
    assert h.executed(resumed.id, "stamp") == 1
    assert h.executed(resumed.id, "same") == 0


async def test_a_step_that_reads_run_id_is_reused_by_its_own_run_only(harness: Harness) -> None:
    """`{{ run.id }}` renders differently per run: a --resume-from run must not serve the old text."""
    h = harness
    flag = h.root / "ok.flag"
    h.write(
        "stamped.yaml",
        """
        name: stamped
        nodes:
          - id: label
            bash: echo "built by {{ run.id }}"
            replay: pure
          - id: other
            bash: echo same
            replay: pure
          - id: check
            depends_on: [label]
            bash: test -e {{ inputs.flag }} && echo ok
            replay: pure
        """,
    )
    first = await h.run("stamped", {"flag": str(flag)})
    assert first.status is RunStatus.FAILED
    flag.write_text("")

    await h.engine.resume(first.id, actor="console:ana")
    assert (await h.engine.wait(first.id, timeout=30)).status is RunStatus.COMPLETED
    assert h.executed(first.id, "label") == 1  # a resume of the same run re-uses it

    second = await h.run("stamped", {"flag": str(flag)}, resume_from=first.id)

    assert second.status is RunStatus.COMPLETED
    assert h.output(second.id, "label") == f"built by {second.id}\n"
    (label,) = h.entries(second.id, "label")
    assert label.cached_from is None
    assert label.notes.reason == "it reads `run.id`, which differs in this run"
    assert [e.cached_from for e in h.entries(second.id, "other")] == [first.id]
