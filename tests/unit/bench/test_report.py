"""The report never invents a figure: a side that failed shows its error, ratios are peer ÷ Baton."""

from __future__ import annotations

from bench import report
from bench.protocol import emit, error_tail, parse


def _row(per_step: float) -> dict[str, object]:
    return {"per_step_ms": per_step, "min_ms": per_step, "max_ms": per_step, "samples": 1, "durability": "d"}


STEPS = {
    "n": 10,
    "rounds": 1,
    "shapes": {
        "chain": {
            "baton-normal": _row(0.5),
            "dbos-default": _row(2.0),
            "prefect": {"error": "RuntimeError: Timed out while attempting to connect"},
        }
    },
}


def test_a_failed_peer_is_reported_with_its_exact_error_and_no_number() -> None:
    text = "\n".join(report.steps_section(STEPS))
    assert "| prefect | – | not measured: `RuntimeError: Timed out while attempting to connect` |" in text
    assert "| dbos-default | d | 2.00 | 2.00–2.00 | 1 | 4.0× |" in text


def test_summary_compares_with_targets_and_says_what_was_not_measured() -> None:
    text = "\n".join(report.summary_section({"steps": STEPS}))
    expected = "| step overhead, chain, WAL NORMAL | 0.50 ms | ≤ 0.25 ms | dbos-default 4.0× | **missed** |"
    assert expected in text
    assert "| peak RSS, 1,000 paused runs | not measured |" in text


def test_ratio_and_number_formatting() -> None:
    assert report.ratio(3.0, 1.5) == "2.0×"
    assert report.ratio(3.0, 0.0) == "–"
    assert report.ms(None) == "–"
    assert report.ms(1.234, 1) == "1.2"


def test_child_result_line_round_trips(capsys) -> None:  # type: ignore[no-untyped-def]
    emit({"b": 2, "a": 1})
    out = "noise\n" + capsys.readouterr().out + "more noise\n"
    assert parse(out) == {"a": 1, "b": 2}
    assert parse("nothing here") is None


def test_error_tail_is_the_last_meaningful_line() -> None:
    assert error_tail("Traceback\n  File x\nValueError: boom\n\n") == "ValueError: boom"
    assert error_tail("") == "(no output)"


def _recovery(to_running: float) -> dict[str, object]:
    return {
        "to_running_s": to_running,
        "to_complete_s": to_running + 0.01,
        "engine_to_running_s": 0.02,
        "engine_to_complete_s": 0.03,
        "executions": 100,
        "samples": 1,
        "durability": "d",
    }


RECOVERY = {
    "n": 200,
    "kill_at": 100,
    "baton": _recovery(0.82),
    "baton-outer": _recovery(0.95),
    "baton-supervised": _recovery(0.06),
    "dbos": {"error": "ModuleNotFoundError: dbos"},
}


def test_recovery_shows_the_cold_relaunch_and_the_supervised_restart_each_with_its_verdict() -> None:
    text = "\n".join(report.recovery_section(RECOVERY))
    assert "| baton, cold relaunch | d | spawn of a new process | 0.82 | 0.83 |" in text
    assert text.count("**missed** |") == 2
    assert "| baton, restarted by systemd (unsupervised) | d | SIGKILL of the process | 0.95 | 0.96 |" in text
    assert "| baton, supervised restart (`--supervise`) | d | SIGKILL of the child | 0.06 | 0.07 |" in text
    assert "| 100 | met |" in text
    assert "| dbos, cold relaunch | – | spawn of a new process | not measured:" in text
    summary = "\n".join(report.summary_section({"recovery": RECOVERY}))
    cold = "| recovery: cold relaunch (spawn) → running again | 0.82 s |"
    assert f"{cold} ≤ 0.35 s |  | **missed** |" in summary
    outer = "| recovery: restarted by systemd (SIGKILL of the process) → running again | 0.95 s |"
    assert f"{outer} ≤ 0.35 s |  | **missed** |" in summary
    supervised = "| recovery: supervised restart (SIGKILL of the child) → running again | 0.06 s |"
    assert f"{supervised} ≤ 0.35 s |  | met |" in summary


def test_distributed_shows_the_share_against_the_same_connector_and_the_default_beside_it() -> None:
    from bench.report_user import distributed_rows, distributed_section

    data = {
        "steps": 500,
        "concurrency": 4,
        "1": {"baton_steps_per_s": 441.3, "procrastinate_jobs_per_s": 710.6,
              "procrastinate_default_jobs_per_s": 600.1, "share_pct": 62.1},
        "2": {"baton_steps_per_s": 400.0, "procrastinate_jobs_per_s": 800.0, "share_pct": 50.0},
    }  # fmt: skip
    text = "\n".join(distributed_section(data))
    assert "| 1 | 711 | 441 | 62 % | 600 |" in text
    assert "| 2 | 800 | 400 | 50 % | – |" in text  # a result from before the column: no number made up
    [one, two] = distributed_rows(data)
    assert one[1] == 62.1 and "(its default connector: 600)" in one[4]
    assert "default connector" not in two[4]


def test_retention_rows_judge_command_p99_during_the_prune_against_50_ms() -> None:
    from bench import report_user

    during = {
        "status": {"p50_ms": 2.0, "p99_ms": 21.0, "samples": 900},
        "run": {"p50_ms": 1.0, "p99_ms": 64.0, "samples": 900},
    }
    data = {"runs": 20000, "pruned": 19600, "prune_s": 9.8, "runs_per_s": 2000.0, "batches": 196,
            "batch": 100, "kept": 400, "left_prunable": 0, "during": during, "baseline": during,
            "size_before_mb": 38.0, "size_after_mb": 19.0, "size_vacuumed_mb": 5.1,
            "vacuum_s": 0.2}  # fmt: skip
    summary = report_user.summary_rows({"retention": data})
    rows = {what: (value, target) for what, value, _, target, _ in summary}
    assert rows["`status` p99 while 20,000 runs are pruned (SQLite)"] == (21.0, 50.0)
    assert rows["`run` p99 while 20,000 runs are pruned (SQLite)"] == (64.0, 50.0)
    text = "\n".join(report_user.retention_section(data))
    assert "19,600 finished runs pruned" in text and "5.1 MB after `baton prune --vacuum`" in text
    assert "400 paused runs kept" in text
    loaded = {**data, "paused_before": 400, "load_avg_1m": {"start": 7.5, "pruned": 11.4}}
    text = "\n".join(report_user.retention_section(loaded))
    assert "400 of 400 paused runs kept" in text and "(load average start 7.5, pruned 11.4)" in text
    assert report_user.retention_section({"error": "boom"})[2] == "not measured: `boom`"


def test_the_map_row_judges_per_item_overhead_against_its_target() -> None:
    from bench import report_user

    data = {"n": 10_000, "seconds": 1.4, "per_item_ms": 0.14, "journaled_items": 10_000,
            "progress_messages": 1, "progress_edits": 2, "peak_rss_mb": 105.0}  # fmt: skip
    [(what, value, unit, target, note)] = report_user.summary_rows({"map": data})
    assert (what, value, unit, target) == ("per-item overhead, a 10,000-item map of no-op steps (SQLite)",
                                           0.14, "ms", 0.2)  # fmt: skip
    assert note == "1 progress message (2 edits), peak RSS 105 MB"
    text = "\n".join(report_user.map_section(data))
    assert "0.140 ms per item" in text and "1 progress message (2 edits)" in text
    assert report_user.map_section({"error": "boom"})[2] == "not measured: `boom`"


def test_the_map_section_reports_the_100_child_fan_out() -> None:
    from bench import report_user

    data = {"n": 10_000, "seconds": 1.4, "per_item_ms": 0.14, "journaled_items": 10_000,
            "progress_messages": 1, "progress_edits": 2, "peak_rss_mb": 105.0, "children": 100,
            "children_completed": 100, "fan_out_seconds": 5.2, "per_child_ms": 52.0,
            "fan_out_messages": 2}  # fmt: skip
    text = "\n".join(report_user.map_section(data))
    assert "**100 child runs**" in text and "52.0 ms per child run, 100 completed; 2 chat messages" in text


def test_the_four_worker_row_and_the_targets_of_issue_34() -> None:
    from bench.report_user import distributed_rows, distributed_section

    data = {"steps": 500, "concurrency": 4,
            "1": {"baton_steps_per_s": 600.0, "procrastinate_jobs_per_s": 700.0, "share_pct": 86.0},
            "2": {"baton_steps_per_s": 600.0, "procrastinate_jobs_per_s": 700.0, "share_pct": 86.0},
            "4": {"baton_steps_per_s": 700.0, "procrastinate_jobs_per_s": 700.0,
                  "share_pct": 100.0}}  # fmt: skip
    one, two, four = distributed_rows(data)
    assert (one[0], one[3]) == ("distributed no-op steps ÷ Procrastinate's no-op jobs, one worker", 85.0)
    assert two[3] == 95.0 and four[0].endswith("four workers") and four[1] == 100.0
    assert "| 4 | 700 | 700 | 100 % | – |" in "\n".join(distributed_section(data))
    summary = "\n".join(report.summary_section({"distributed": data}))
    assert "| 86.00 % | ≥ 85 % |" in summary and "| 86.00 % | ≥ 95 % |" in summary


def test_mcp_and_run_page_rows_have_targets() -> None:
    mcp = {"stdio": {"p50_ms": 8.1, "p99_ms": 29.7, "max_ms": 40.0, "samples": 200},
           "http": {"p50_ms": 52.4, "p99_ms": 77.3, "max_ms": 90.0, "samples": 200}}  # fmt: skip
    pages = {"page_time": {"5000": {"median_ms": 120.0, "max_ms": 130.0, "bytes": 250 * 1024}},
             "live_latency": {"local_ms": {"median": 49.3, "max": 51.0}}}  # fmt: skip
    text = "\n".join(report.summary_section({"mcp": mcp, "web_pages": pages}))
    stdio = "| MCP `get_run` round trip p50 (stdio, `baton mcp`) | 8.10 ms | ≤ 20 ms |"
    assert f"{stdio} p99 29.70 ms, 200 calls | met |" in text
    assert "| MCP `get_run` round trip p50 (streamable HTTP, bearer token) | 52.40 ms | ≤ 40 ms |" in text
    assert "**missed**" in text.split("streamable HTTP")[1].splitlines()[0]
    assert "| run page of a completed 5,000-node run, first paint (median) | 120.00 ms | ≤ 150 ms |" in text
    size = "| run page of a completed 5,000-node run, size of the first paint |"
    assert f"{size} 250.00 KB | ≤ 300 KB |" in text
    assert "(a step finishing → its event stream, median) | 49.30 ms | ≤ 100 ms |" in text


def test_a_feature_cost_whose_section_failed_still_has_its_row_not_measured() -> None:
    from bench import report_user

    rows = report_user.summary_rows({"mcp": {"error": "TimeoutError: no answer"}, "map": {"error": "boom"},
                                     "queue": {"overhead": {}}})  # fmt: skip
    assert {what for what, *_ in rows} == {
        "MCP `get_run` round trip p50 (stdio, `baton mcp`)",
        "MCP `get_run` round trip p50 (streamable HTTP, bearer token)",
        "per-item overhead, a 10,000-item map of no-op steps (SQLite)",
        "admission overhead per run (sqlite)",
    }
    assert all(value is None for _, value, *_ in rows)
    text = "\n".join(report.summary_section({"mcp": {"error": "TimeoutError: no answer"}}))
    assert "| not measured | ≤ 20 ms | not measured: `TimeoutError: no answer` | – |" in text


def test_the_schedules_section_is_rendered_with_what_another_connection_saw() -> None:
    from bench import report_user

    row = {"schedules": 1000, "runs": 1000, "fired_once": True, "fires_per_replica": [600, 400],
           "lateness_p50_s": 0.31, "lateness_p99_s": 0.74, "lateness_max_s": 0.9,
           "visible_p50_s": 0.33, "visible_p99_s": 0.8}  # fmt: skip
    lines = report_user.schedules_section({"sqlite": row, "postgres": {"error": "boom"}})
    text = "\n".join(lines)
    assert "p99 0.74 s" in text and "visible to another connection p50 0.33 s, p99 0.80 s." in text
    assert "- postgres: " in text and "boom" in text


def test_every_section_is_in_the_report_even_when_it_cannot_be_rendered() -> None:
    """A builder that returned nothing made `make bench` fail after 44 minutes of measuring."""
    from bench import report_user

    machine = {"date": "today", "cores": "2"}
    results = {name: {"error": "boom"} for name in report_user.BUILDERS}
    text = report.document(results, machine, "make bench", "")
    assert text.count("\n## ") >= len(report_user.BUILDERS)
    assert "not rendered: `KeyError: 'n'`" in text  # real_steps' builder wants its figures
