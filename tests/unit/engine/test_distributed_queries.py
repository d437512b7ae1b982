"""`baton worker` folds its claim into Procrastinate's fetch and skips Procrastinate's finish
of a job its result statement finished (`WorkerConnector`, issue 34). Both recognise
Procrastinate's queries by their text: if an upgrade changes them, these tests fail, rather
than the worker silently claiming in a statement of its own (or finishing a job twice)."""

from __future__ import annotations

import re

from procrastinate.sql import queries as pq_queries

from core.engine.distributed import queue
from core.store import worker_journal


def _sql(text: str) -> str:
    """`text` without comment lines, its whitespace collapsed and its trailing `;` dropped."""
    lines = [line for line in text.splitlines() if not line.strip().startswith("--")]
    return " ".join(" ".join(lines).split()).rstrip(";").strip()


def test_the_fetch_the_worker_recognises_is_procrastinates_and_the_claim_wraps_the_same_fetch() -> None:
    assert queue._FETCH_JOB is pq_queries["fetch_job"]
    fetch = _sql(pq_queries["fetch_job"])
    assert fetch == (
        "SELECT id, status, task_name, priority, lock, queueing_lock, args, scheduled_at, queue_name, "
        "attempts, worker_id FROM procrastinate_fetch_job_v2(%(queues)s::varchar[], %(worker_id)s)"
    )
    wrapped = _sql(queue._FETCH_AND_CLAIM)
    # the columns and the function of Procrastinate's fetch, with its parameters
    columns = fetch.split(" FROM ")[0].removeprefix("SELECT ")
    function = "procrastinate_fetch_job_v2(%(queues)s::varchar[], %(worker_id)s)"
    assert f"SELECT {columns} FROM {function}" in wrapped


def test_the_finish_the_worker_skips_is_procrastinates_and_the_result_statement_calls_it() -> None:
    assert queue._FINISH_JOB is pq_queries["finish_job"]
    finish = _sql(pq_queries["finish_job"])
    called = re.search(r"(procrastinate_finish_job_v\d+)\(", finish)
    assert called is not None and called.group(1) == "procrastinate_finish_job_v1"
    for statement in (worker_journal._SETTLE_AND_FINISH, worker_journal._SETTLE_ONE_BLOB_AND_FINISH):
        assert "procrastinate_finish_job_v1(%(job_id)s, 'succeeded', true)" in statement
    # the one-blob statement is the general one with its blob as plain parameters
    assert "unnest" in worker_journal._SETTLE and "unnest" not in worker_journal._SETTLE_ONE_BLOB
    assert "%(blob_data)s" in worker_journal._SETTLE_ONE_BLOB_AND_FINISH
