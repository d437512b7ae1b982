"""The benchmark sections: each runs its children and returns plain data for the report.

A side that cannot be installed or run here is recorded with its exact error (`error`),
never with an invented figure. Step overhead is interleaved: every round runs each Baton
and DBOS configuration once, in turn, and the report takes medians over rounds.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import recovery
from bench.protocol import ChildFailed, run_child


@dataclass(frozen=True)
class Plan:
    """How much to measure: the full run or `--quick`."""

    steps: int = 1000
    rounds: int = 3
    prefect_rounds: int = 1
    recovery_rounds: int = 3
    kill_at: int = 500
    resume_sizes: tuple[int, ...] = (100, 1000, 5000)
    history: int = 100_000
    latency_samples: int = 200
    memory_runs: int = 1000
    definition_sizes: tuple[int, ...] = (1000, 5000)
    definition_samples: int = 7
    real_steps: int = 200
    cold_samples: int = 7
    distributed_steps: int = 500
    scale_paused: int = 10_000
    scale_history: int = 1_000_000
    page_sizes: tuple[int, ...] = (10, 1000, 5000)
    page_samples: int = 10
    approval_due: int = 2000  # deadlines falling due over 10 s
    approval_pending: int = 5000  # gates with two pending deadlines each
    outbox_changes: int = 2000  # state changes per way (outbox overhead)
    outbox_runs: int = 200  # runs whose delivery latency is measured
    queue_overhead_runs: int = 1000  # runs created and rested, unlimited and keyed (interleaved)
    queue_drain: int = 1000  # queued runs of one key (limit 4) drained through the Engine
    mcp_samples: int = 200  # get_run calls per MCP transport
    prune_history: int = 1_000_000  # runs of history pruned while commands are timed
    schedules: int = 1000  # schedules due in the same minute, two replicas (fire lateness)
    map_items: int = 10_000  # items of the map whose per-item overhead is measured

    @classmethod
    def quick(cls) -> Plan:
        return cls(steps=200, rounds=1, prefect_rounds=1, recovery_rounds=1, kill_at=100,
                   resume_sizes=(100, 1000), history=10_000, latency_samples=30, memory_runs=200,
                   definition_sizes=(1000,), definition_samples=3, real_steps=50, cold_samples=3,
                   distributed_steps=100, scale_paused=500, scale_history=20_000,
                   page_sizes=(10, 1000), page_samples=3, approval_due=300,
                   approval_pending=1000, outbox_changes=300, outbox_runs=30, mcp_samples=50,
                   prune_history=20_000, schedules=200, queue_overhead_runs=300,
                   queue_drain=200, map_items=1000)  # fmt: skip


Log = Callable[[str], None]


def _tmp(prefix: str) -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix=f"bench-{prefix}-")


def _median_samples(samples: list[dict[str, Any]]) -> dict[str, Any]:
    per_step = [s["per_step_ms"] for s in samples]
    return {
        "per_step_ms": statistics.median(per_step),
        "min_ms": min(per_step),
        "max_ms": max(per_step),
        "samples": len(per_step),
        "durability": samples[0]["durability"],
    }


def steps(plan: Plan, log: Log) -> dict[str, Any]:
    """Durable step overhead: {shape: {side: summary | {"error": ...}}}."""
    sides = {
        "baton-normal": ("bench.baton_steps", ["--sync", "NORMAL"], "--dir"),
        "baton-full": ("bench.baton_steps", ["--sync", "FULL"], "--dir"),
        "baton-normal-percommit": (
            "bench.baton_steps",
            ["--sync", "NORMAL", "--group-commit-ms", "0"],
            "--dir",
        ),
        "baton-full-percommit": ("bench.baton_steps", ["--sync", "FULL", "--group-commit-ms", "0"], "--dir"),
        "baton-normal-bot": ("bench.baton_steps", ["--sync", "NORMAL", "--bot"], "--dir"),
        "dbos-default": ("bench.peers.dbos_steps", ["--mode", "default"], "--db"),
        "dbos-wal": ("bench.peers.dbos_steps", ["--mode", "wal"], "--db"),
    }
    shapes = ("chain", "fanout")
    samples: dict[tuple[str, str], list[dict[str, Any]]] = {}
    errors: dict[str, str] = {}
    for rnd in range(plan.rounds):
        for shape in shapes:
            for side, (module, extra, flag) in sides.items():
                if side in errors:
                    continue
                log(f"steps round {rnd + 1}/{plan.rounds}: {side} {shape}")
                with _tmp(side) as tmp:
                    target = tmp if flag == "--dir" else str(Path(tmp) / "dbos.sqlite")
                    args = ["--shape", shape, "--n", str(plan.steps), flag, target, *extra]
                    try:
                        samples.setdefault((shape, side), []).append(
                            run_child(module, args, what=side, timeout=600)
                        )
                    except ChildFailed as exc:
                        errors[side] = exc.detail
    log("steps: prefect (one server start, every round of both shapes)")
    with _tmp("prefect") as tmp:
        args = ["--shapes", ",".join(shapes), "--rounds", str(plan.prefect_rounds), "--n", str(plan.steps),
                "--home", tmp]  # fmt: skip
        try:
            result = run_child("bench.peers.prefect_tasks", args, what="prefect", timeout=1800)
            for sample in result["samples"]:
                samples.setdefault((sample["shape"], "prefect"), []).append(
                    {**sample, "durability": result["durability"]}
                )
        except ChildFailed as exc:
            errors["prefect"] = exc.detail
    out: dict[str, Any] = {"n": plan.steps, "rounds": plan.rounds, "shapes": {}}
    for shape in shapes:
        table: dict[str, Any] = {}
        for side in [*sides, "prefect"]:
            if (shape, side) in samples:
                table[side] = _median_samples(samples[(shape, side)])
            elif side in errors:
                table[side] = {"error": errors[side]}
        out["shapes"][shape] = table
    return out


def recover(plan: Plan, log: Log) -> dict[str, Any]:
    """Cold relaunch (`baton`, `dbos`: a new process is spawned), outer restart (`baton-outer`:
    killed, reaped and spawned again as systemd does) and supervised restart (`baton-supervised`:
    bot/supervisor.py forks a new child), each timed from its own origin (`recovery.ORIGIN`:
    the spawn, or the SIGKILL)."""
    out: dict[str, Any] = {"n": plan.steps, "kill_at": plan.kill_at}
    for side in ("baton", "baton-outer", "baton-supervised", "dbos"):
        runs = []
        for rnd in range(plan.recovery_rounds):
            log(f"recovery round {rnd + 1}/{plan.recovery_rounds}: {side}")
            try:
                runs.append(recovery.measure(side, n=plan.steps, kill_at=plan.kill_at))
            except ChildFailed as exc:
                out[side] = {"error": exc.detail}
                break
        if runs:
            keys = ("to_running_s", "to_complete_s", "engine_to_running_s", "engine_to_complete_s")
            out[side] = {k: statistics.median(getattr(r, k) for r in runs) for k in keys}
            out[side].update(samples=len(runs), durability=runs[0].durability, origin=recovery.ORIGIN[side],
                             executions=runs[0].executions, status=runs[0].status,
                             raw=[asdict(r) for r in runs])  # fmt: skip
    return out


def resume(plan: Plan, log: Log) -> dict[str, Any]:
    sizes: dict[str, Any] = {}
    for n in plan.resume_sizes:
        log(f"resume cost: {n} nodes")
        with _tmp("resume") as tmp:
            try:
                sizes[str(n)] = run_child("bench.baton_resume", ["--n", str(n), "--dir", tmp],
                                          what=f"resume {n}", timeout=900)  # fmt: skip
            except ChildFailed as exc:
                sizes[str(n)] = {"error": exc.detail}
    return {"sizes": sizes}


def latency(plan: Plan, log: Log) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for db in ("sqlite", "postgres"):
        log(f"command latency: {db}, {plan.history} runs of history")
        with _tmp("latency") as tmp:
            args = ["--db", db, "--history", str(plan.history), "--samples", str(plan.latency_samples),
                    "--dir", tmp]  # fmt: skip
            try:
                out[db] = run_child("bench.baton_latency", args, what=f"latency {db}", timeout=900)
            except ChildFailed as exc:
                out[db] = {"error": exc.detail}
    return out


def measured(module: str, args: list[str], *, what: str, timeout: float) -> dict[str, Any]:
    """A section's child process: its figures, or the error it ended with (the report shows it)."""
    try:
        return run_child(module, args, what=what, timeout=timeout)
    except ChildFailed as exc:
        return {"error": exc.detail}


def scorecard(plan: Plan, log: Log) -> dict[str, Any]:
    log("resume-cache scorecard")
    return measured("bench.scorecard.runner", [], what="scorecard", timeout=900)


def memory(plan: Plan, log: Log) -> dict[str, Any]:
    log(f"memory: {plan.memory_runs} concurrent paused runs")
    with _tmp("memory") as tmp:
        args = ["--runs", str(plan.memory_runs), "--dir", tmp]
        return measured("bench.baton_memory", args, what="memory", timeout=900)


def definitions(plan: Plan, log: Log) -> dict[str, Any]:
    sizes: dict[str, Any] = {}
    for n in plan.definition_sizes:
        log(f"definitions: {n} nodes")
        with _tmp("definitions") as tmp:
            args = ["--n", str(n), "--samples", str(plan.definition_samples), "--dir", tmp]
            sizes[str(n)] = measured("bench.baton_definitions", args, what=f"defs {n}", timeout=600)
    return {"sizes": sizes}


def real_steps(plan: Plan, log: Log) -> dict[str, Any]:
    log(f"real steps: {plan.real_steps} bash and script steps vs bare process starts")
    with _tmp("real") as tmp:
        args = ["--n", str(plan.real_steps), "--rounds", str(plan.rounds), "--dir", tmp]
        return measured("bench.baton_real_steps", args, what="real steps", timeout=900)


def cold_start(plan: Plan, log: Log) -> dict[str, Any]:
    log(f"cold start: `baton say --wait 'run hello hi'`, {plan.cold_samples} new processes")
    with _tmp("cold") as tmp:
        args = ["--samples", str(plan.cold_samples), "--dir", tmp]
        return measured("bench.baton_cold", args, what="cold start", timeout=600)


def distributed(plan: Plan, log: Log) -> dict[str, Any]:
    log(f"distributed: {plan.distributed_steps} no-op steps vs Procrastinate jobs, 1, 2 and 4 workers")
    with _tmp("distributed") as tmp:
        args = ["--steps", str(plan.distributed_steps), "--workers", "1,2,4", "--rounds", str(plan.rounds),
                "--db", "bench_distributed", "--dir", tmp]  # fmt: skip
        return measured("bench.distributed", args, what="distributed", timeout=1800)


def scale(plan: Plan, log: Log) -> dict[str, Any]:
    out: dict[str, Any] = {}
    log(f"scale: {plan.scale_paused:,} paused runs in one bot")
    with _tmp("scale-memory") as tmp:
        try:
            out["memory"] = run_child("bench.baton_memory", ["--runs", str(plan.scale_paused), "--dir", tmp],
                                      what="paused runs", timeout=1800)  # fmt: skip
        except ChildFailed as exc:
            out["memory"] = {"error": exc.detail}
    log(f"scale: `runs` and `status` with {plan.scale_history:,} runs of history (SQLite)")
    with _tmp("scale-history") as tmp:
        args = ["--history", str(plan.scale_history), "--samples", str(plan.latency_samples), "--dir", tmp]
        try:
            out["history"] = run_child("bench.baton_history", args, what="history", timeout=1800)
        except ChildFailed as exc:
            out["history"] = {"error": exc.detail}
    return out


def web_pages(plan: Plan, log: Log) -> dict[str, Any]:
    log("run pages: page time by size, live-update latency, memory of open pages")
    args = ["--sizes", ",".join(str(n) for n in plan.page_sizes), "--pages", "100",
            "--samples", str(plan.page_samples)]  # fmt: skip
    try:
        return run_child("bench.web_pages", args, what="run pages", timeout=1200)
    except ChildFailed as exc:
        return {"error": exc.detail}


def approvals(plan: Plan, log: Log) -> dict[str, Any]:
    log(f"approvals: {plan.approval_due} deadlines due, {2 * plan.approval_pending} pending, vote latency")
    with _tmp("approvals") as tmp:
        args = ["--due", str(plan.approval_due), "--pending", str(plan.approval_pending), "--dir", tmp]
        try:
            return run_child("bench.baton_approvals", args, what="approvals", timeout=900)
        except ChildFailed as exc:
            return {"error": exc.detail}


def outbox(plan: Plan, log: Log) -> dict[str, Any]:
    log(f"outbox: {plan.outbox_changes} state changes with and without the row; "
        f"latency of {plan.outbox_runs} runs")
    with _tmp("outbox") as tmp:
        args = ["--n", str(plan.outbox_changes), "--runs", str(plan.outbox_runs), "--dir", tmp]
        return measured("bench.baton_outbox", args, what="outbox", timeout=900)


def queue(plan: Plan, log: Log) -> dict[str, Any]:
    log(f"queue: admission overhead over {plan.queue_overhead_runs} runs; "
        f"draining {plan.queue_drain} queued runs of one key")
    with _tmp("queue") as tmp:
        args = ["--n", str(plan.queue_overhead_runs), "--drain", str(plan.queue_drain), "--dir", tmp]
        return measured("bench.baton_queue", args, what="queue", timeout=1800)


def mcp(plan: Plan, log: Log) -> dict[str, Any]:
    log(f"mcp: get_run round trips, {plan.mcp_samples} per transport (stdio, streamable HTTP)")
    with _tmp("mcp") as tmp:
        try:
            return run_child("bench.mcp_roundtrips", ["--samples", str(plan.mcp_samples), "--dir", tmp],
                             what="mcp", timeout=600)
        except ChildFailed as exc:
            return {"error": exc.detail}


def retention(plan: Plan, log: Log) -> dict[str, Any]:
    log(f"retention: prune {plan.prune_history:,} runs of history while `status` and `run` are timed")
    with _tmp("retention") as tmp:
        args = ["--runs", str(plan.prune_history), "--dir", tmp]
        return measured("bench.baton_prune", args, what="retention", timeout=3600)


def schedules(plan: Plan, log: Log) -> dict[str, Any]:
    log(f"schedules: {plan.schedules} due in the same minute, two replicas, SQLite and PostgreSQL")
    out: dict[str, Any] = {}
    for db in ("sqlite", "postgres"):
        with _tmp("schedules") as tmp:
            args = ["--n", str(plan.schedules), "--dir", tmp, "--db", db]
            out[db] = measured("bench.baton_schedules", args, what=f"schedules ({db})", timeout=900)
    return out


def mapped(plan: Plan, log: Log) -> dict[str, Any]:
    log(f"map: per-item overhead of a {plan.map_items:,}-item map of no-op steps")
    with _tmp("map") as tmp:
        args = ["--n", str(plan.map_items), "--dir", tmp]
        return measured("bench.baton_map", args, what="map", timeout=900)


SECTIONS: dict[str, Callable[[Plan, Log], dict[str, Any]]] = {
    "steps": steps,
    "recovery": recover,
    "resume": resume,
    "latency": latency,
    "scorecard": scorecard,
    "memory": memory,
    "definitions": definitions,
    "real_steps": real_steps,
    "cold_start": cold_start,
    "distributed": distributed,
    "scale": scale,
    "web_pages": web_pages,
    "approvals": approvals,
    "outbox": outbox,
    "queue": queue,
    "mcp": mcp,
    "retention": retention,
    "schedules": schedules,
    "map": mapped,
}
