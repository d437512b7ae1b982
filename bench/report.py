"""Rendering bench/RESULTS.md from the sections' data (pure: data in, Markdown out)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench import report_user
from bench.scorecard.score import Tally, total

TARGETS = {"normal": 0.25, "full": 0.6, "recovery": 0.35, "resume": 50.0, "latency_p99": 20.0, "rss": 200.0}


def ms(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def ratio(peer: float, baton: float) -> str:
    return f"{peer / baton:.1f}×" if baton > 0 else "–"


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _err(value: Mapping[str, Any]) -> str:
    return f"not measured: `{value['error']}`"


def steps_section(data: Mapping[str, Any]) -> list[str]:
    title = f"{data['n']} no-op steps, median of {data['rounds']} interleaved rounds"
    out = [
        f"## Durable step overhead ({title})",
        "",
        "Per-step time = time from starting the run/workflow/flow until its result, divided by the",
        "number of steps. On every side each step is journaled durably before the result is reported.",
        "Baton's default group-commits the results of pure steps (one commit per batch, at most 10 ms",
        "old, and before any other journal write); its `-percommit` rows commit every step before the",
        "next one starts, as DBOS does.",
        "",
    ]
    for shape, table in data["shapes"].items():
        baton = table.get("baton-normal", {}).get("per_step_ms")
        full = table.get("baton-full", {}).get("per_step_ms")
        out += [
            f"**{shape}**",
            "",
            "| side | durability | per step (ms) | min–max | samples | vs Baton NORMAL | vs Baton FULL |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for side, row in table.items():
            if "error" in row:
                out.append(f"| {side} | – | {_err(row)} | | | | |")
                continue
            p = row["per_step_ms"]
            vs = [ratio(p, b) if b else "–" for b in (baton, full)]
            out.append(
                f"| {side} | {row['durability']} | {ms(p)} | {ms(row['min_ms'])}–{ms(row['max_ms'])} "
                f"| {row['samples']} | {vs[0]} | {vs[1]} |"
            )
        out.append("")
    return out


#: recovery rows: side -> (label, what "restart" means for it)
RECOVERY_SIDES = {
    "baton": ("baton, cold relaunch", "spawn of a new process"),
    "baton-outer": ("baton, restarted by systemd (unsupervised)", "SIGKILL of the process"),
    "baton-supervised": ("baton, supervised restart (`--supervise`)", "SIGKILL of the child"),
    "dbos": ("dbos, cold relaunch", "spawn of a new process"),
}


def recovery_section(data: Mapping[str, Any]) -> list[str]:
    target = TARGETS["recovery"]
    out = [
        f"## Recovery after kill -9 ({data['n']}-step chain killed at step {data['kill_at']})",
        "",
        "| side | durability | restart from | restart → running again (s) | restart → completed (s) "
        f"| engine start → running (s) | engine start → completed (s) | steps executed after restart "
        f"| running again ≤ {target:g} s |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for side, (label, origin) in RECOVERY_SIDES.items():
        row = data.get(side)
        if row is None:
            continue
        if "error" in row:
            out.append(f"| {label} | – | {origin} | {_err(row)} | | | | | |")
            continue
        out.append(
            f"| {label} | {row['durability']} | {origin} | {ms(row['to_running_s'])} "
            f"| {ms(row['to_complete_s'])} | {ms(row['engine_to_running_s'])} "
            f"| {ms(row['engine_to_complete_s'])} | {row['executions']} "
            f"| {verdict(row['to_running_s'] <= target)} |"
        )
    out += [
        "",
        'Cold relaunch: "restart" is the spawn of the new process (interpreter start and imports',
        "included). Restarted by systemd: the default `baton run` (no `--supervise`) from its",
        "SIGKILL: the service manager reaps it, waits systemd's default `RestartSec` (0.1 s) and",
        'spawns a new process. Supervised restart: "restart" is the SIGKILL of the serving child;',
        "bot/supervisor.py (`--supervise`) reaps it and forks a new child with the stack already",
        'imported. "Engine start" is `Engine.start()` / `DBOS.launch()` in the new process.',
        f"Medians of {data.get('baton', {}).get('samples', '?')} kills per side.",
        "",
    ]
    return out


def resume_section(data: Mapping[str, Any]) -> list[str]:
    out = [
        "## Resume cost (chain of N nodes, all but the last cached)",
        "",
        "| nodes | plan (ms) | plan stmts | `resume` (ms) | stmts | `--resume-from` (ms) | stmts "
        "| copied results | loading the edited YAML (ms) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, row in data["sizes"].items():
        if "error" in row:
            out.append(f"| {n} | {_err(row)} | | | | | | | |")
            continue
        out.append(
            f"| {n} | {ms(row['resume_plan_ms'], 1)} | {row['resume_plan_queries']} "
            f"| {ms(row['resume_ms'], 1)} "
            f"| {row['resume_queries']} | {ms(row['resume_from_ms'], 1)} | {row['resume_from_queries']} "
            f"| {row['resume_from_cached']} | {ms(row.get('load_edited_ms'), 1)} |"
        )
    out += [
        "",
        "Statements = SQLAlchemy statements (`before_cursor_execute`) + hot-path writes",
        "(`HotPath.run`, which bypasses SQLAlchemy's events); see `bench/query_count.py`.",
        "",
    ]
    return out


def latency_section(data: Mapping[str, Any]) -> list[str]:
    out = [
        "## Command latency (ChatMessage → replies, through the real Handler)",
        "",
        "| store | durability | history | command | p50 (ms) | p99 (ms) | max (ms) |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for db, row in data.items():
        if "error" in row:
            out.append(f"| {db} | – | – | {_err(row)} | | | |")
            continue
        for cmd, t in row["commands"].items():
            out.append(
                f"| {db} | {row['durability']} | {row['history']:,} | `{cmd}` | {ms(t['p50_ms'])} "
                f"| {ms(t['p99_ms'])} | {ms(t['max_ms'])} |"
            )
    samples = next((r["samples"] for r in data.values() if "samples" in r), "?")
    out += ["", f"{samples} samples per command and store, after 5 warm-up rounds.", ""]
    return out


def tallies(data: Mapping[str, Any]) -> dict[str, Tally]:
    keyings = ("baton", "node-id", "prefix")
    return {k: total(Tally(*s["tallies"][k]) for s in data["scenarios"]) for k in keyings}


def scorecard_section(data: Mapping[str, Any]) -> list[str]:
    if "error" in data:
        return ["## Resume-cache scorecard", "", _err(data), ""]
    scenarios = data["scenarios"]
    out = [
        f"## Resume-cache scorecard ({len(scenarios)} edit scenarios)",
        "",
        'Positive = a result re-used ("skipped"). Safe = the node is not in the scenario\'s',
        "hand-written must-re-run set. An unsafe skip serves a result that may be stale.",
        "",
        "| keying | safe skips (TP) | unsafe skips (FP) | needless re-runs (FN) | needed re-runs (TN) "
        "| precision | recall | scenarios with an unsafe skip |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    names = {"baton": "Baton (Merkle keys)", "node-id": "node id alone", "prefix": "byte-exact prompt prefix"}
    for k, t in tallies(data).items():
        unsafe = sum(1 for s in scenarios if s["tallies"][k][1] > 0)
        out.append(
            f"| {names[k]} | {t.tp} | {t.fp} | {t.fn} | {t.tn} | {ms(t.precision, 3)} "
            f"| {ms(t.recall, 3)} | {unsafe} |"
        )
    out += [
        "",
        "| scenario | edit | must re-run | Baton re-ran (its reason) | node id: unsafe / needless "
        "| prefix: unsafe / needless |",
        "|---|---|---|---|---|---|",
    ]
    for s in scenarios:
        reasons = "; ".join(f"{n} ({r})" for n, r in sorted(s["baton_reasons"].items())) or "nothing"
        must = ", ".join(s["must_rerun"]) or "nothing"
        cells = [f"{s['tallies'][k][1]} / {s['tallies'][k][2]}" for k in ("node-id", "prefix")]
        b = s["tallies"]["baton"]
        flag = "" if b[1] == 0 and b[2] == 0 else f" **({b[1]} unsafe, {b[2]} needless)**"
        out.append(f"| {s['name']} | {s['what']} | {must} | {reasons}{flag} | {cells[0]} | {cells[1]} |")
    errors = [f"{s['name']}: {', '.join(s['corpus_errors'])}" for s in scenarios if s["corpus_errors"]]
    out += [
        "",
        "Corpus check (a node outside must-re-run whose output changed): "
        + ("; ".join(errors) if errors else "none."),
        "",
    ]
    return out + map_scorecard_section(data.get("map_scenarios") or [])


def map_tallies(scenarios: Sequence[Mapping[str, Any]]) -> dict[str, Tally]:
    return {k: total(Tally(*s["tallies"][k]) for s in scenarios) for k in ("baton", "node-id")}


def map_scorecard_section(scenarios: Sequence[Mapping[str, Any]]) -> list[str]:
    """The `map:` / `workflow:` family: units are steps, map items by value and child steps,
    and what the resume ran is counted from the units' own log lines."""
    if not scenarios:
        return []
    out = [
        f"### Map and sub-workflow scenarios ({len(scenarios)})",
        "",
        "A unit is a plain step, one map item (by its value: `deploy:web-1`) or one step of the",
        "child run (`child:draft`); each writes a line when it really runs, and the resume's lines",
        "are what Baton ran.",
        "",
        "| keying | safe skips (TP) | unsafe skips (FP) | needless re-runs (FN) | needed re-runs (TN) "
        "| precision | recall |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    names = {"baton": "Baton (item and child keys)", "node-id": "step id alone (item by position)"}
    for k, t in map_tallies(scenarios).items():
        out.append(f"| {names[k]} | {t.tp} | {t.fp} | {t.fn} | {t.tn} | {ms(t.precision, 3)} "
                   f"| {ms(t.recall, 3)} |")
    out += ["", "| scenario | edit | must re-run | Baton ran | node id: unsafe / needless |",
            "|---|---|---|---|---|"]
    for s in scenarios:
        ran = ", ".join(s["baton_ran"]) or "nothing"
        b = s["tallies"]["baton"]
        flag = "" if b[1] == 0 and b[2] == 0 else f" **({b[1]} unsafe, {b[2]} needless)**"
        n = s["tallies"]["node-id"]
        out.append(f"| {s['name']} | {s['what']} | {', '.join(s['must_rerun']) or 'nothing'} | {ran}{flag} "
                   f"| {n[1]} / {n[2]} |")
    errors = [f"{s['name']}: {', '.join(s['corpus_errors'])}" for s in scenarios if s["corpus_errors"]]
    out += ["", "Corpus check: " + ("; ".join(errors) if errors else "none."), ""]
    return out


def memory_section(data: Mapping[str, Any]) -> list[str]:
    if "error" in data:
        return ["## Memory", "", _err(data), ""]
    return [
        "## Memory (the bot, Slack and Discord adapters imported, SQLite)",
        "",
        "| concurrent paused runs | RSS after start (MB) | peak RSS (MB) | seconds to pause all |",
        "|---:|---:|---:|---:|",
        f"| {data['paused']} of {data['runs']} | {ms(data['startup_rss_mb'], 1)} "
        f"| {ms(data['peak_rss_mb'], 1)} | {ms(data['seconds_to_pause_all'], 1)} |",
        "",
    ]


def _get(data: Mapping[str, Any], *path: str) -> Any:
    value: Any = data
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def summary_section(results: Mapping[str, Any]) -> list[str]:
    rows: list[str] = []

    def row(
        what: str, value: float | None, unit: str, target: float, peer: str = "", *, floor: bool = False
    ) -> None:
        bound = f"{'≥' if floor else '≤'} {target:g} {unit}"
        if value is None:
            rows.append(f"| {what} | not measured | {bound} | {peer} | – |")
        else:
            ok = value >= target if floor else value <= target
            rows.append(f"| {what} | {value:.2f} {unit} | {bound} | {peer} | {verdict(ok)} |")

    steps = results.get("steps") or {}
    for shape in ("chain", "fanout"):
        table = _get(steps, "shapes", shape) or {}
        sides = (
            ("baton-normal", "normal"),
            ("baton-full", "full"),
            ("baton-normal-bot", "bot"),
            ("baton-full-percommit", "full-percommit"),
        )
        for side, key in sides:
            value = _get(table, side, "per_step_ms")
            peers = [
                f"{p} {ratio(_get(table, p, 'per_step_ms'), value)}"
                for p in ("dbos-default", "dbos-wal", "prefect")
                if value and _get(table, p, "per_step_ms")
            ]
            label = {
                "normal": "WAL NORMAL",
                "full": "WAL FULL",
                "bot": "WAL NORMAL, chat progress on",
                "full-percommit": "WAL FULL, a commit per step (group commit off)",
            }[key]
            target = TARGETS["normal" if key == "bot" else "full" if key == "full-percommit" else key]
            row(f"step overhead, {shape}, {label}", value, "ms", target, "; ".join(peers))
    rec = results.get("recovery") or {}
    dbos_done = _get(rec, "dbos", "to_complete_s")
    row(
        "recovery: engine start → running again",
        _get(rec, "baton", "engine_to_running_s"),
        "s",
        TARGETS["recovery"],
    )
    peer = f"DBOS relaunch → result {dbos_done:.2f} s" if dbos_done else ""
    row(
        "recovery: cold relaunch (spawn) → running again",
        _get(rec, "baton", "to_running_s"),
        "s",
        TARGETS["recovery"],
        peer,
    )
    row(
        "recovery: restarted by systemd (SIGKILL of the process) → running again",
        _get(rec, "baton-outer", "to_running_s"),
        "s",
        TARGETS["recovery"],
    )
    row(
        "recovery: supervised restart (SIGKILL of the child) → running again",
        _get(rec, "baton-supervised", "to_running_s"),
        "s",
        TARGETS["recovery"],
    )
    sizes = _get(results, "resume", "sizes") or {}
    for n, key, label in (("1000", "resume_ms", "resume"), ("1000", "resume_from_ms", "--resume-from")):
        stmts = {s: _get(sizes, s, key.replace("_ms", "_queries")) for s in sizes}
        note = "statements " + " / ".join(f"{v}" for v in stmts.values()) + f" for N = {' / '.join(stmts)}"
        row(f"resume cost, 1,000 nodes ({label})", _get(sizes, n, key), "ms", TARGETS["resume"], note)
    for db in ("sqlite", "postgres"):
        for cmd in ("run", "status", "approve"):
            value = _get(results, "latency", db, "commands", cmd, "p99_ms")
            row(f"`{cmd}` p99, {db}", value, "ms", TARGETS["latency_p99"])
    mem = results.get("memory") or {}
    row("peak RSS, 1,000 paused runs", mem.get("peak_rss_mb"), "MB", TARGETS["rss"])
    for what, value, unit, target, note in report_user.summary_rows(results):
        row(what, value, unit, target, note, floor=what.startswith(report_user.AT_LEAST))
    out = [
        "## Summary",
        "",
        "| measurement | Baton | target | peers (their time ÷ Baton's) | verdict |",
        "|---|---:|---:|---|---|",
        *rows,
        "",
    ]
    card = results.get("scorecard") or {}
    if "scenarios" in card:
        t = tallies(card)
        out += [
            "| scorecard keying | precision of skips | recall of skips | unsafe skips |",
            "|---|---:|---:|---:|",
        ]
        for k, v in t.items():
            out.append(f"| {k} | {ms(v.precision, 3)} | {ms(v.recall, 3)} | {v.fp} |")
        if card.get("map_scenarios"):
            for k, v in map_tallies(card["map_scenarios"]).items():
                out.append(f"| {k}, map and sub-workflows | {ms(v.precision, 3)} | {ms(v.recall, 3)} "
                           f"| {v.fp} |")
        out.append("")
    return out


def document(results: Mapping[str, Any], machine: Mapping[str, str], command: str, findings: str) -> str:
    lines = [
        "# Baton benchmarks",
        "",
        f"Generated by `{command}` on {machine['date']}. Everything below ran on this machine in",
        "one run, side by side; the machine is shared and noisy, so read the ratios first.",
        "",
        "| machine | |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in machine.items() if k != "date"],
        "",
    ]
    lines += summary_section(results)
    builders = {
        "steps": steps_section,
        "recovery": recovery_section,
        "resume": resume_section,
        "latency": latency_section,
        "scorecard": scorecard_section,
        "memory": memory_section,
        **report_user.BUILDERS,
    }
    for name, build in builders.items():
        if name in results:
            try:  # one section that cannot be rendered never loses the others
                section = build(results[name])
            except Exception as exc:  # the report says what it could not render
                section = [f"## {name}", "", f"not rendered: `{type(exc).__name__}: {exc}`", ""]
            lines += section or [f"## {name}", "", "not rendered: the section built no lines", ""]
    if findings.strip():
        lines += ["## Findings", "", findings.strip(), ""]
    return "\n".join(lines)
