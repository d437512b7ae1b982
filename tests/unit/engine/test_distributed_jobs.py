"""`NodeJob` survives the trip through Procrastinate's JSON job arguments unchanged."""

from __future__ import annotations

import json

from core.engine.distributed.jobs import NodeJob, queueing_lock
from core.engine.nodes import RenderedNode
from core.workflows.model import OutputContract


def _job(rendered: RenderedNode, **kw: object) -> NodeJob:
    values: dict[str, object] = {
        "entry_id": 41,
        "run_id": "3f9a1c2b4d5e",
        "node_id": "draft",
        "attempt": 2,
        "idempotency_key": "k" * 32,
        "timeout": 90.0,
        "rendered": rendered,
        "output": OutputContract(format="json", schema={"type": "object", "required": ["title"]}),
        "artifact_globs": ("dist/*.whl",),
        "restore": {"dist/a.whl": "ab" * 32},
        "workflow_dir": "/srv/baton/workflows",
    }
    values.update(kw)
    return NodeJob(**values)  # type: ignore[arg-type]


def _through_json(job: NodeJob) -> NodeJob:
    return NodeJob.from_args(json.loads(json.dumps(job.to_args())))


def test_a_script_job_keeps_its_source_stdin_bytes_and_contract() -> None:
    stdin = '{"inputs":{"message":"héllo"},"nodes":{}}'.encode()
    job = _job(RenderedNode("script", script_source="print(1)\n", stdin=stdin))

    assert _through_json(job) == job


def test_tool_and_prompt_jobs_keep_their_arguments() -> None:
    tool = _job(
        RenderedNode("tool", tool="post_release", kwargs={"title": "v1", "n": [1, 2]}),
        identity={"tool": {"post_release": "version:2"}},
    )
    prompt = _job(
        RenderedNode("prompt", prompt="Write", provider="fake", output_schema={"type": "object"}),
        idempotency_key=None,
        output=OutputContract(),
        artifact_globs=(),
        restore={},
        workflow_dir=None,
    )

    assert _through_json(tool) == tool
    assert _through_json(prompt) == prompt


def test_one_queueing_lock_per_journal_entry() -> None:
    assert queueing_lock(41) == "baton-entry-41"
    assert queueing_lock(41) != queueing_lock(42)


def test_a_job_carries_env_values_and_secret_names_never_secret_values() -> None:
    job = _job(
        RenderedNode("bash", command="deploy"),
        env={"MODE": "fast", "LEVEL": "3"},
        secrets=("GITHUB_TOKEN", "NPM_TOKEN"),
    )

    args = job.to_args()

    assert _through_json(job) == job
    assert args["env"] == {"MODE": "fast", "LEVEL": "3"}
    assert args["secrets"] == ["GITHUB_TOKEN", "NPM_TOKEN"]  # names: each worker reads its own values


def test_empty_and_unset_arguments_are_left_out_and_read_back_as_defaults() -> None:
    job = NodeJob(
        entry_id=7,
        run_id="3f9a1c2b4d5e",
        node_id="noop",
        attempt=1,
        idempotency_key=None,
        timeout=600.0,
        rendered=RenderedNode("tool", tool="noop"),
        output=OutputContract(),
    )

    args = job.to_args()

    assert args == {
        "entry_id": 7,
        "run_id": "3f9a1c2b4d5e",
        "node_id": "noop",
        "attempt": 1,
        "timeout": 600.0,
        "rendered": {"kind": "tool", "tool": "noop"},
    }
    assert _through_json(job) == job


def test_a_step_without_network_stays_without_it_on_the_worker() -> None:
    offline = _job(RenderedNode("bash", command="make"), network=False)

    assert offline.to_args()["network"] is False
    assert _through_json(offline).network is False
    assert "network" not in _job(RenderedNode("bash", command="make")).to_args()  # the default: on
    assert _through_json(_job(RenderedNode("bash", command="make"))).network is True
