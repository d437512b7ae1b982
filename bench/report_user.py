"""Rendering the sections about what a user waits on: definitions, real steps, cold start,
distributed throughput and scale (issue 18). Pure: data in, Markdown out; `report.py` puts
their summary rows into the one Summary table and their sections after the others."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: (what, value, unit, target, peer or floor note); value None = not measured. The target is
#: a ceiling, except for the names in `AT_LEAST` (a floor: higher is better).
SummaryRow = tuple[str, float | None, str, float, str]
AT_LEAST = ("distributed no-op steps",)

TARGETS = {
    "definitions_1000": 20.0,
    "definitions_5000": 100.0,
    "step_ratio": 1.3,
    "sandbox_ratio": 2.0,  # issue 25: a sandboxed step ÷ the bare process start
    "cold_say": 0.3,  # issue 34 (was 0.5)
    "cold_relaunch": 0.35,
    "distributed_share_1": 85.0,  # issue 34: one worker ÷ Procrastinate on the same connector (was 50)
    "distributed_share_2": 95.0,
    "distributed_share_4": 95.0,
    "page_5000_ms": 150.0,  # issue 34: first paint of a completed 5,000-node run's page
    "page_5000_kb": 300.0,
    "live_update_ms": 100.0,  # a step finishing -> an open page's event stream (same process)
    "mcp_stdio_p50": 20.0,  # `get_run` round trip through the MCP SDK's client
    "mcp_http_p50": 40.0,
    "paused_rss": 300.0,
    "history_p99": 20.0,
    "admission_ms": 1.0,
    "prune_p99": 50.0,
    "fire_p99": 1.0,
    "map_item": 0.2,  # ms per item of a 10,000-item map of no-op steps (SQLite)
}


def _ms(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, Mapping) or key not in data:
            return None
        data = data[key]
    return data


def _err(value: Mapping[str, Any]) -> str:
    return f"not measured: `{value['error']}`"


# -- definitions ----------------------------------------------------------------------------


def definitions_rows(data: Mapping[str, Any]) -> list[SummaryRow]:
    rows: list[SummaryRow] = []
    for n, target in (("1000", "definitions_1000"), ("5000", "definitions_5000")):
        size = _get(data, "sizes", n) or {}
        label = f"{int(n):,}"
        parses = size.get("unchanged_parses")
        note = f"unchanged reload {_ms(size.get('unchanged_ms'), 3)} ms, {parses} parses" if size else ""
        rows.append((f"load + validate + prepare, {label} nodes, new file", size.get("cold_ms"), "ms",
                     TARGETS[target], note))  # fmt: skip
        rows.append((f"load + validate + prepare, {label} nodes, after an edit", size.get("edited_ms"), "ms",
                     TARGETS[target], "one node changed: the others are re-used"))  # fmt: skip
    return rows


def definitions_section(data: Mapping[str, Any]) -> list[str]:
    out = [
        "## Loading definitions (chain of N tool steps, through `Catalog` and `prepare`)",
        "",
        "| nodes | file (KB) | new file (ms) | min | after an edit (ms) | min | parses per edit "
        "| unchanged reload (ms) | parses when unchanged |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, row in (data.get("sizes") or {}).items():
        if "error" in row:
            out.append(f"| {n} | {_err(row)} | | | | | | | |")
            continue
        per_edit = row["edited_parses"] / row["samples"]
        out.append(
            f"| {int(n):,} | {row['bytes'] / 1024:.0f} | {_ms(row['cold_ms'], 1)} "
            f"| {_ms(row['cold_min_ms'], 1)} "
            f"| {_ms(row['edited_ms'], 1)} | {_ms(row['edited_min_ms'], 1)} | {per_edit:g} "
            f"| {_ms(row['unchanged_ms'], 3)} | {row['unchanged_parses']} |"
        )
    samples = next(iter((data.get("sizes") or {}).values()), {}).get("samples", "?")
    out += [
        "",
        f"Medians of {samples} samples. *New file*: a file the process has never seen, in a new",
        "catalog (each sample another file's content, so no cache helps). *After an edit*: the last",
        "step's `with:` changed; the file is read, parsed and checked again, the untouched nodes'",
        "models and prepared forms are re-used. *Unchanged*: `reload()` as every command calls it",
        "(a `stat` per file; `Catalog.parses` does not move).",
        "",
    ]
    return out


# -- real steps ------------------------------------------------------------------------------

_KINDS = {
    "bash": ('`bash: "true"` step', 'bare `create_subprocess_exec("bash", "-c", "true")`'),
    "script": ("`script:` step (`pass`)", "bare `python -c pass`"),
    "bash_sandbox": (
        '`bash: "true"` step in the sandbox', 'bare `create_subprocess_exec("bash", "-c", "true")`'
    ),
    "script_sandbox": ("`script:` step (`pass`) in the sandbox", "bare `python -c pass`"),
}
_COLD = {  # the same sandbox, warming off: in the section, not in the summary
    "bash_sandbox_cold": (
        '`bash: "true"` step in the sandbox, started cold',
        'bare `create_subprocess_exec("bash", "-c", "true")`',
    ),
    "script_sandbox_cold": ("`script:` step (`pass`) in the sandbox, started cold", "bare `python -c pass`"),
}


def real_steps_rows(data: Mapping[str, Any]) -> list[SummaryRow]:
    rows: list[SummaryRow] = []
    for kind, (label, floor) in _KINDS.items():
        row = data.get(kind) or {}
        note = f"{floor}: {_ms(row.get('bare_ms'))} ms, Baton {_ms(row.get('baton_ms'))} ms" if row else ""
        if row.get("baton_cpu_ms") is not None:
            note += f"; CPU {_ms(row.get('bare_cpu_ms'))} vs {_ms(row.get('baton_cpu_ms'))} ms"
        target = TARGETS["sandbox_ratio" if kind.endswith("_sandbox") else "step_ratio"]
        rows.append((f"{label} ÷ the bare process start", row.get("ratio"), "×", target, note))
    return rows


def real_steps_section(data: Mapping[str, Any]) -> list[str]:
    out = [
        f"## Real steps against the bare process start (chain of {data['n']}, "
        f"{data['rounds']} interleaved rounds)",
        "",
        "| step | floor | floor per process (ms) | Baton per step (ms) | Baton ÷ floor | per round "
        "| CPU floor / Baton (ms) |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for kind, (label, floor) in {**_KINDS, **_COLD}.items():
        row = data.get(kind)
        if row is None:
            continue
        rounds = ", ".join(f"{r:.2f}" for r in row["ratios"])
        has_cpu = row.get("baton_cpu_ms") is not None
        cpu = f"{_ms(row['bare_cpu_ms'])} / {_ms(row['baton_cpu_ms'])}" if has_cpu else ""
        out.append(
            f"| {label} | {floor} | {_ms(row['bare_ms'])} | {_ms(row['baton_ms'])} "
            f"| {row['ratio']:.2f}× | {rounds} | {cpu} |"
        )
    out += [
        "",
        "Baton's time is the run's, start to rest, divided by the steps: rendering, the step's",
        "environment, its own process group and work directory, both pipes read, the reaper's",
        "sweep, and the journal (a bash step is `unsafe` by default, so its `started` entry is",
        "committed before it runs). The floor starts the same program with both pipes read.",
        "Sandboxed steps take the sandboxes warmed for their run (`core/engine/warm.py`); the",
        "*started cold* rows are the same sandbox with warming off. CPU is this process and its",
        "reaped children per step (warmed sandboxes a run never used included)"
        + (f"; load average {data['load'][0]:.2f} at the end." if data.get("load") else "."),
        "",
    ]
    return out


# -- cold start -------------------------------------------------------------------------------


def cold_start_rows(data: Mapping[str, Any]) -> list[SummaryRow]:
    note = (
        f"CPU {_ms(data.get('say_cpu_s'))} s; floors: interpreter {_ms(data.get('interpreter_wall_s'))} s, "
        f"+ SQLAlchemy and pydantic {_ms(data.get('sqlalchemy_pydantic_wall_s'))} s"
    )
    return [("`baton say --wait 'run hello hi'`, new process", data.get("say_wall_s"), "s",
             TARGETS["cold_say"], note)]  # fmt: skip


def cold_start_section(data: Mapping[str, Any]) -> list[str]:
    sides = (
        ("say", "`baton say --wait 'run hello hi'`"),
        ("interpreter", "`python -c pass`"),
        ("sqlalchemy_pydantic", "`python -c 'import sqlalchemy, pydantic'`"),
    )
    out = [
        f"## Cold start of the command line (median of {data['samples']} new processes)",
        "",
        "| process | wall (s) | min wall (s) | CPU, user + system (s) |",
        "|---|---:|---:|---:|",
    ]
    for key, label in sides:
        out.append(
            f"| {label} | {_ms(data.get(f'{key}_wall_s'))} | {_ms(data.get(f'{key}_min_wall_s'))} "
            f"| {_ms(data.get(f'{key}_cpu_s'))} |"
        )
    out += [
        "",
        "Each `say` is a new interpreter: imports, settings, the SQLite store (already migrated),",
        "the catalog, the run of hello's one bash step, its progress and reply, exit. The two",
        "floors ran in the same rounds; CPU time is less moved by other load than wall time.",
        "Cold relaunch after kill -9 is in the recovery table above.",
        "",
    ]
    return out


# -- distributed ----------------------------------------------------------------------------


def distributed_rows(data: Mapping[str, Any]) -> list[SummaryRow]:
    rows: list[SummaryRow] = []
    for workers in ("1", "2", "4"):
        row = data.get(workers) or {}
        if workers == "4" and not row:
            continue  # a result from before the 4-worker row
        note = ""
        if row:
            note = f"Baton {row['baton_steps_per_s']:.0f} steps/s, "
            note += f"Procrastinate {row['procrastinate_jobs_per_s']:.0f} jobs/s"
            if row.get("procrastinate_default_jobs_per_s") is not None:
                note += f" (its default connector: {row['procrastinate_default_jobs_per_s']:.0f})"
        label = {"1": "one worker", "2": "two workers", "4": "four workers"}[workers]
        rows.append((f"distributed no-op steps ÷ Procrastinate's no-op jobs, {label}",
                     row.get("share_pct"), "%", TARGETS[f"distributed_share_{workers}"], note))  # fmt: skip
    return rows


def distributed_section(data: Mapping[str, Any]) -> list[str]:
    out = [
        f"## Distributed throughput ({data['steps']} no-op steps / jobs, "
        f"{data['concurrency']} slots a worker)",
        "",
        "| worker processes | Procrastinate no-op jobs/s | Baton no-op steps/s | Baton ÷ Procrastinate "
        "| Procrastinate, its default connector, jobs/s |",
        "|---:|---:|---:|---:|---:|",
    ]
    for workers in ("1", "2", "4"):
        row = data.get(workers)
        if row is None:
            continue
        default = row.get("procrastinate_default_jobs_per_s")
        out.append(
            f"| {workers} | {row['procrastinate_jobs_per_s']:.0f} | {row['baton_steps_per_s']:.0f} "
            f"| {row['share_pct']:.0f} % | {'–' if default is None else f'{default:.0f}'} |"
        )
    out += [
        "",
        "Same PostgreSQL server, a database created for the bench. Procrastinate: the jobs are",
        "deferred one by one to worker processes running an async task that returns at once",
        "(listen/notify, jobs deleted when they succeed, as `baton worker` configures them); timed",
        "from the first defer to an empty queue. Its workers use the connector `baton worker` uses",
        "(`queue_connector`: autocommit, a pooled connection checked only after a second unused),",
        "so Baton's share is taken against the same Procrastinate; the last column is the same",
        "jobs on Procrastinate's default connector (a transaction and a check per query), measured",
        "in the same rounds. Baton: a replica in the bench process runs a",
        "fan-out of no-op tool steps (`BATON_MAX_PARALLEL=64`) on `baton worker` processes; each",
        "step is a `queued` journal entry and its job in one transaction, claimed and settled in",
        "the journal by a worker, and read back from the journal by the replica (one read for",
        "every step it waits on). The journal stays the source of truth; the queue carries work.",
        "",
    ]
    return out


# -- scale ------------------------------------------------------------------------------------


def scale_rows(data: Mapping[str, Any]) -> list[SummaryRow]:
    mem, hist = data.get("memory") or {}, data.get("history") or {}
    rows: list[SummaryRow] = []
    if "error" not in mem:
        runs = mem.get("runs")
        label = f"{runs:,}" if isinstance(runs, int) else "?"
        note = f"{mem.get('paused')} paused; after start-up {_ms(mem.get('startup_rss_mb'), 1)} MB"
        what = f"peak RSS, {label} paused runs"
        rows.append((what, mem.get("peak_rss_mb"), "MB", TARGETS["paused_rss"], note))
    if "error" not in hist:
        size = hist.get("history")
        label = f"{size:,}" if isinstance(size, int) else "?"
        for cmd in ("runs", "status"):
            value = _get(hist, "commands", cmd, "p99_ms")
            note = f"p50 {_ms(_get(hist, 'commands', cmd, 'p50_ms'))} ms"
            what = f"`{cmd}` p99, sqlite, {label} runs of history"
            rows.append((what, value, "ms", TARGETS["history_p99"], note))
    return rows


def scale_section(data: Mapping[str, Any]) -> list[str]:
    mem, hist = data.get("memory") or {}, data.get("history") or {}
    out = ["## Scale", ""]
    if "error" in mem:
        out += [f"Paused runs: {_err(mem)}", ""]
    elif mem:
        out += [
            "| concurrent paused runs | RSS after start (MB) | peak RSS (MB) | seconds to pause all |",
            "|---:|---:|---:|---:|",
            f"| {mem['paused']} of {mem['runs']} | {_ms(mem['startup_rss_mb'], 1)} "
            f"| {_ms(mem['peak_rss_mb'], 1)} | {_ms(mem['seconds_to_pause_all'], 1)} |",
            "",
        ]
    if "error" in hist:
        out += [f"History: {_err(hist)}", ""]
    elif hist:
        out += [
            f"`runs` and `status` through the real handler with {hist['history']:,} runs of history "
            f"(seeded by `bench/seed.py` in {hist['seed_seconds']:.0f} s; {hist['durability']}), "
            f"{hist['samples']} samples each:",
            "",
            "| command | p50 (ms) | p99 (ms) | max (ms) |",
            "|---|---:|---:|---:|",
        ]
        for cmd, row in hist["commands"].items():
            out.append(f"| `{cmd}` | {_ms(row['p50_ms'])} | {_ms(row['p99_ms'])} | {_ms(row['max_ms'])} |")
        out += [
            "",
            "`runs` lists a conversation's 20 newest runs (about 2,000 each here) through index",
            "`ix_runs_recent` (migration 0007); `status` is of a random historical run.",
            "",
        ]
    return out


# -- run pages ----------------------------------------------------------------------------------


def web_pages_rows(data: Mapping[str, Any]) -> list[SummaryRow]:
    page = _get(data, "page_time", "5000") or {}
    first = page.get("first_paint_ms", page.get("median_ms"))
    size = page.get("bytes")
    note = f"max {_ms(page.get('max_ms'), 1)} ms" if page else ""
    live = _get(data, "live_latency", "local_ms", "median")
    return [
        ("run page of a completed 5,000-node run, first paint (median)", first, "ms", TARGETS["page_5000_ms"],
         note),
        ("run page of a completed 5,000-node run, size of the first paint",
         None if size is None else size / 1024, "KB", TARGETS["page_5000_kb"], ""),
        ("live update on an open run page (a step finishing → its event stream, median)", live, "ms",
         TARGETS["live_update_ms"], ""),
    ]  # fmt: skip


def web_pages_section(data: Mapping[str, Any]) -> list[str]:
    if "error" in data:
        return ["## Run pages", "", _err(data), ""]
    out = [
        "## Run pages (`bench/web_pages.py`; uvicorn on loopback, SQLite)",
        "",
        "| completed run of N nodes | page time, median (ms) | max (ms) | page size (KB) |",
        "|---:|---:|---:|---:|",
    ]
    for n, row in (data.get("page_time") or {}).items():
        size = f"{row['bytes'] / 1024:.0f}"
        out.append(f"| {int(n):,} | {_ms(row['median_ms'], 1)} | {_ms(row['max_ms'], 1)} | {size} |")
    live, mem = data.get("live_latency") or {}, data.get("memory") or {}
    if live:
        out += [
            "",
            "Live update, a step finishing → an open page's event stream: "
            f"{_ms(_get(live, 'local_ms', 'median'), 1)} ms median "
            f"(max {_ms(_get(live, 'local_ms', 'max'), 1)}) for a run in the serving process;"
            f" {_ms(_get(live, 'replica_ms', 'median'), 1)} ms median for another replica's write"
            f" (poll every {_get(live, 'replica_ms', 'poll_ms')} ms); {live.get('samples')} samples.",
        ]
    if mem:
        pages = next((k for k in mem if k.startswith("rss_mib_") and k.endswith("_pages")), None)
        if pages is not None:
            count = pages.removeprefix("rss_mib_").removesuffix("_pages")
            out.append(
                f"Memory of the serving process: {mem['rss_mib_no_page']} MiB with no page open, "
                f"{mem[pages]} MiB with {count} pages open ({mem['per_page_kib']} KiB a page)."
            )
    out.append("")
    return out


def schedules_rows(data: Mapping[str, Any]) -> list[SummaryRow]:
    rows: list[SummaryRow] = []
    for db, row in data.items():
        if not isinstance(row, Mapping) or "error" in row:
            continue
        note = (f"p50 {_ms(row.get('lateness_p50_s'))} s, max {_ms(row.get('lateness_max_s'))} s; "
                f"{row.get('runs')} runs for {row.get('schedules')} fires, each fired once: "
                f"{'yes' if row.get('fired_once') else '**no**'}")
        what = f"schedule fire lateness p99, {row.get('schedules'):,} due at once, two replicas ({db})"
        rows.append((what,
                     row.get("lateness_p99_s"), "s", TARGETS["fire_p99"], note))
    return rows


def schedules_section(data: Mapping[str, Any]) -> list[str]:
    lines = ["## Schedules: fire lateness", "",
             "N schedules due at the same minute boundary, two replica processes (`build_baton`, each",
             "with its schedule loop) on one database; lateness = the run's `created_at` - its",
             "`scheduled_for`.", ""]
    for db, row in data.items():
        if "error" in row:
            lines.append(f"- {db}: {_err(row)}")
            continue
        lines.append(
            f"- **{db}**: {row['schedules']:,} fires, {row['runs']:,} runs (each fired once: "
            f"{'yes' if row['fired_once'] else 'no'}; per replica {row['fires_per_replica']}); lateness "
            f"p50 {_ms(row['lateness_p50_s'])} s, p99 {_ms(row['lateness_p99_s'])} s, "
            f"max {_ms(row['lateness_max_s'])} s"
            + (f"; visible to another connection p50 {_ms(row['visible_p50_s'])} s, "
               f"p99 {_ms(row['visible_p99_s'])} s." if "visible_p99_s" in row else "."))
    lines.append("")
    return lines


def queue_rows(data: Mapping[str, Any]) -> list[SummaryRow]:
    rows: list[SummaryRow] = []
    for db, o in (data.get("overhead") or {}).items():
        note = (f"median per run created and rested: unlimited {o['unlimited']['median_us']:.0f} µs, "
                f"keyed {o['keyed']['median_us']:.0f} µs")  # fmt: skip
        rows.append((f"admission overhead per run ({db})", o["overhead_us"] / 1000, "ms",
                     TARGETS["admission_ms"], note))  # fmt: skip
    return rows


def queue_section(data: Mapping[str, Any]) -> list[str]:
    if "error" in data:
        return ["## Concurrency queue", "", _err(data), ""]
    lines = ["## Concurrency queue", ""]
    for db, o in data["overhead"].items():
        lines.append(
            f"- **Admission overhead ({db})**, {o['runs']:,} runs each created and brought to rest as "
            f"the engine does, interleaved: unlimited {o['unlimited']['median_us']:.0f} µs, with a key "
            f"{o['keyed']['median_us']:.0f} µs (median; p99 {o['unlimited']['p99_us']:.0f} / "
            f"{o['keyed']['p99_us']:.0f} µs): {o['overhead_us']:.0f} µs per run."
        )
    for db, d in data["drain"].items():
        lines.append(
            f"- **Draining one key ({db})**, {d['runs']:,} runs of a one-step workflow with "
            f"`limit: {d['limit']}` started at once through the real Engine ({d['queued']} queued): "
            f"{d['runs_per_s']:.0f} runs/s ({d['seconds']:.1f} s), at most {d['most_running_at_once']} "
            f"running at once, admitted in queue order: {'yes' if d['order_held'] else 'NO'}."
        )
    return [*lines, ""]


ROWS: dict[str, Callable[[Mapping[str, Any]], list[SummaryRow]]] = {
    "queue": queue_rows,
    "definitions": definitions_rows,
    "real_steps": real_steps_rows,
    "cold_start": cold_start_rows,
    "distributed": distributed_rows,
    "scale": scale_rows,
    "schedules": schedules_rows,
}
def approvals_section(data: Mapping[str, Any]) -> list[str]:
    if "error" in data:
        return ["## Approval policies", "", _err(data), ""]
    late, pending, votes = data["lateness"], data["pending"], data["votes"]
    return [
        "## Approval policies (SQLite)",
        "",
        f"- **Deadline lateness under load**: {late['due']:,} deadlines falling due over 10 s, two "
        f"replicas ticking every 0.25 s while {late['votes_cast']:,} votes were written: "
        f"p50 {_ms(late['p50_ms'], 0)} ms, p99 {_ms(late['p99_ms'], 0)} ms, max {_ms(late['max_ms'], 0)} ms; "
        f"{late['fired']:,} fired, each once (by {', '.join(late['fired_by'])}).",
        f"- **{pending['pending']:,} pending deadlines**: planned in {pending['plan_s']:.1f} s; they live in "
        f"the database, adding {pending['rss_added_mb']:.0f} MB to the planning process; a fresh process's "
        f"first look for due ones takes {_ms(pending['first_tick_ms'], 2)} ms with them, "
        f"{_ms(pending['first_tick_empty_ms'], 2)} ms without (an index range scan, none due).",
        f"- **Vote latency** (a vote typed → the gate's message edited, recording outbox): "
        f"p50 {_ms(votes['p50_ms'], 1)} ms, p99 {_ms(votes['p99_ms'], 1)} ms over {votes['votes']} votes.",
        "",
    ]


def outbox_section(data: Mapping[str, Any]) -> list[str]:
    if "error" in data:
        return ["## Durable outbox", "", _err(data), ""]
    lines = ["## Durable outbox", ""]
    for db, o in data["overhead"].items():
        lines.append(
            f"- **Overhead per state change ({db})**, {o['state_changes']:,} runs brought to rest, "
            f"interleaved: the CAS alone {o['cas']['median_us']:.0f} µs, in a unit of work "
            f"{o['cas_in_unit']['median_us']:.0f} µs, with its outbox row "
            f"{o['cas_with_outbox_row']['median_us']:.0f} µs "
            f"(median; ×{o['ratio_row_vs_cas']:.2f} the CAS alone)."
        )
    for platform, lat in data["latency"].items():
        lines.append(
            f"- **Delivery latency ({platform})**, state change committed → the platform's call, "
            f"{lat['runs']} runs: final edit p50 {_ms(lat['final_edit']['p50_ms'], 1)} ms, "
            f"p99 {_ms(lat['final_edit']['p99_ms'], 1)} ms; "
            f"final reply p50 {_ms(lat['final_reply']['p50_ms'], 1)} ms, "
            f"p99 {_ms(lat['final_reply']['p99_ms'], 1)} ms."
        )
    return [*lines, ""]


def mcp_section(data: Mapping[str, Any]) -> list[str]:
    if "error" in data:
        return ["## Agents (MCP)", "", _err(data), ""]
    lines = [
        "## Agents (MCP): `get_run` round trip (`bench/mcp_roundtrips.py`; the SDK's client, SQLite)",
        "",
        "| transport | p50 (ms) | p99 (ms) | max (ms) | calls |",
        "|---|---:|---:|---:|---:|",
    ]
    names = {"stdio": "stdio (`baton mcp`)", "http": "streamable HTTP (`/mcp` of `baton run`, bearer token)"}
    for key, name in names.items():
        row = data.get(key)
        if row:
            lines.append(f"| {name} | {_ms(row['p50_ms'], 2)} | {_ms(row['p99_ms'], 2)} "
                         f"| {_ms(row['max_ms'], 2)} | {row['samples']} |")
    return [*lines, ""]


def mcp_rows(data: Mapping[str, Any]) -> list[SummaryRow]:
    rows: list[SummaryRow] = []
    for key, label in (("stdio", "stdio, `baton mcp`"), ("http", "streamable HTTP, bearer token")):
        row = data.get(key) or {}
        note = f"p99 {_ms(row.get('p99_ms'))} ms, {row.get('samples')} calls" if row else ""
        rows.append((f"MCP `get_run` round trip p50 ({label})", row.get("p50_ms"), "ms",
                     TARGETS[f"mcp_{key}_p50"], note))  # fmt: skip
    return rows


ROWS["mcp"] = mcp_rows


def retention_rows(data: Mapping[str, Any]) -> list[SummaryRow]:
    runs = f"{data['runs']:,}"
    return [
        (f"`{cmd}` p99 while {runs} runs are pruned (SQLite)", _get(data, "during", cmd, "p99_ms"), "ms",
         TARGETS["prune_p99"], f"before the prune {_ms(_get(data, 'baseline', cmd, 'p99_ms'), 1)} ms")
        for cmd in ("status", "run")
    ]  # fmt: skip


ROWS["retention"] = retention_rows


def _of(total: int | None) -> str:
    return "" if total is None else f" of {total:,}"


def _loads(load: Mapping[str, float] | None) -> str:
    """The 1-minute load average at each phase (the machine is shared), if recorded."""
    return "" if not load else " (load average " + ", ".join(f"{k} {v:g}" for k, v in load.items()) + ")"


def retention_section(data: Mapping[str, Any]) -> list[str]:
    if "error" in data:
        return ["## Retention", "", _err(data), ""]
    d, b = data["during"], data["baseline"]
    return [
        "## Retention (SQLite)",
        "",
        f"- **Pruning {data['runs']:,} runs of history** (a month old, one journal entry and one audit "
        f"row each): {data['pruned']:,} finished runs pruned in {data['prune_s']:.1f} s "
        f"({data['runs_per_s']:,.0f} runs/s, {data['batches']:,} batches of {data['batch']}); "
        f"{data['kept']:,}{_of(data.get('paused_before'))} paused runs kept; {data['left_prunable']} left "
        f"prunable{_loads(data.get('load_avg_1m'))}.",
        f"- **Commands meanwhile** ({d['status']['samples']:,} of each): `status` p50 "
        f"{_ms(d['status']['p50_ms'], 1)} ms, p99 {_ms(d['status']['p99_ms'], 1)} ms; `run` p50 "
        f"{_ms(d['run']['p50_ms'], 1)} ms, p99 {_ms(d['run']['p99_ms'], 1)} ms (before the prune: "
        f"p99 {_ms(b['status']['p99_ms'], 1)} / {_ms(b['run']['p99_ms'], 1)} ms).",
        f"- **Size**: {data['size_before_mb']:.1f} MB before, {data['size_after_mb']:.1f} MB after the "
        f"prune (SQLite keeps freed pages), {data['size_vacuumed_mb']:.1f} MB after `baton prune --vacuum` "
        f"({data['vacuum_s']:.1f} s).",
        "",
    ]


def map_rows(data: Mapping[str, Any]) -> list[SummaryRow]:
    note = (f"{data['progress_messages']} progress message ({data['progress_edits']} edits), "
            f"peak RSS {data['peak_rss_mb']:.0f} MB")
    return [(f"per-item overhead, a {data['n']:,}-item map of no-op steps (SQLite)", data["per_item_ms"],
             "ms", TARGETS["map_item"], note)]  # fmt: skip


ROWS["map"] = map_rows
ROWS["web_pages"] = web_pages_rows

#: The costs of the features built since the first round (issue 34, item 5): a full run shows
#: a row for each even when its section failed ("not measured", never a made-up figure).
#: section -> the rows it yields when it has no data: (what, unit, target)
FEATURE_COSTS: dict[str, list[tuple[str, str, float]]] = {
    "real_steps": [('`bash: "true"` step in the sandbox ÷ the bare process start', "×",
                    TARGETS["sandbox_ratio"]),
                   ("`script:` step (`pass`) in the sandbox ÷ the bare process start", "×",
                    TARGETS["sandbox_ratio"])],
    "queue": [("admission overhead per run (sqlite)", "ms", TARGETS["admission_ms"])],
    "schedules": [("schedule fire lateness p99, two replicas", "s", TARGETS["fire_p99"])],
    "map": [("per-item overhead, a 10,000-item map of no-op steps (SQLite)", "ms", TARGETS["map_item"])],
    "mcp": [("MCP `get_run` round trip p50 (stdio, `baton mcp`)", "ms", TARGETS["mcp_stdio_p50"]),
            ("MCP `get_run` round trip p50 (streamable HTTP, bearer token)", "ms", TARGETS["mcp_http_p50"])],
    "retention": [("`status` p99 while runs are pruned (SQLite)", "ms", TARGETS["prune_p99"])],
}  # fmt: skip


def map_section(data: Mapping[str, Any]) -> list[str]:
    if "error" in data:
        return ["## Map", "", _err(data), ""]
    return [
        "## Map: one step per item (`bench/baton_map.py`, SQLite WAL NORMAL, chat progress on)",
        "",
        f"- **{data['n']:,} items** of a no-op tool, each its own journaled step: {data['seconds']:.2f} s, "
        f"{data['per_item_ms']:.3f} ms per item; {data['journaled_items']:,} item rows; "
        f"{data['progress_messages']} progress message ({data['progress_edits']} edits); "
        f"peak RSS {data['peak_rss_mb']:.0f} MB.",
        *([f"- **{data['children']} child runs** (`map:` over a `workflow:` step, each child one no-op "
           f"step): {data['fan_out_seconds']:.2f} s, {data['per_child_ms']:.1f} ms per child run, "
           f"{data['children_completed']} completed; {data['fan_out_messages']} chat messages for the "
           f"whole fan-out (the children of map items post none of their own)."]
          if "children" in data else []),
        "",
    ]


BUILDERS: dict[str, Callable[[Mapping[str, Any]], list[str]]] = {
    "approvals": approvals_section,
    "outbox": outbox_section,
    "queue": queue_section,
    "retention": retention_section,
    "definitions": definitions_section,
    "real_steps": real_steps_section,
    "cold_start": cold_start_section,
    "distributed": distributed_section,
    "scale": scale_section,
    "web_pages": web_pages_section,
    "mcp": mcp_section,
    "schedules": schedules_section,
    "map": map_section,
}


def summary_rows(results: Mapping[str, Any]) -> list[SummaryRow]:
    """The rows of every section in `results`; a feature cost whose section failed, or yielded
    no row, still has its row ("not measured") when the run measured anything else of it."""
    rows: list[SummaryRow] = []
    for name, build in ROWS.items():
        if name not in results:
            continue
        built = build(results[name]) if "error" not in results[name] else []
        if not built or all(value is None for _, value, _, _, _ in built):
            error = results[name].get("error") if isinstance(results[name], Mapping) else None
            note = f"not measured: `{error}`" if error else ""
            fallback = FEATURE_COSTS.get(name, [])
            built = [(what, None, unit, target, note) for what, unit, target in fallback] or built
        rows += built
    return rows
